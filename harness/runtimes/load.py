"""Putting a built runtime plug-in into this process, and saying what is there.

``--vulkan-runtime auto`` takes the plug-in built for the installed wheel (``vulkan.installed``),
``PATH`` a given library, ``none`` nothing (the lane is then NO_RUNTIME / static checks only).
The library is loaded RTLD_GLOBAL after the pybinding: its static initializer registers
VulkanBackend in the wheel's one backend registry (libexecutorch.so), shared with the pybinding.
"""

from __future__ import annotations

import contextlib
import ctypes
from pathlib import Path

from harness.runtimes import RuntimeBuildError
from harness.runtimes import vulkan

_LOADED: dict[str, str] = {}  # library path -> "" (loaded) in this process
# What this process was told to execute the Vulkan lane with: unset (None) means "whatever is
# registered"; "" means no runtime (``--vulkan-runtime none``), honoured even where a plug-in was
# loaded earlier in the same process (a loaded library cannot be unloaded).
_CHOSEN: str | None = None


def resolve(choice: str | None, cache: str | None = None) -> str | None:
    """``auto``/``none``/PATH -> the library to load, or None. RuntimeBuildError for a bad PATH."""
    choice = choice or "auto"
    if choice == "none":
        return None
    if choice == "auto":
        found = vulkan.installed(cache)
        return found.library if found else None
    path = Path(choice)
    if path.is_dir():
        path = path / vulkan.LIBRARY
    if not path.is_file():
        raise RuntimeBuildError(f"--vulkan-runtime {choice}: no such library")
    return str(path.resolve())


def pybindings():
    """The runtime's C++ extension. Imported directly, not through ``portable_lib.py``, which
    imports ``executorch.exir`` first (6 s of lowering code that an execution worker never
    uses; most of a worker's start-up). Older wheels name it differently: then portable_lib."""
    try:
        from executorch.extension.pybindings import _C as lib
    except ImportError:
        from executorch.extension.pybindings import portable_lib as lib
    return lib


def registered_backends() -> tuple[str, ...]:
    """What the runtime in this process can execute; detected, never assumed (asked anew each
    time: loading a plug-in registers one more, and the question costs microseconds)."""
    return tuple(pybindings()._get_registered_backend_names())


def load(library: str | None) -> bool:
    """Load the plug-in into this process (once); True when VulkanBackend is registered after."""
    pybindings()  # first: see above
    global _CHOSEN
    _CHOSEN = library or ""
    if library and library not in _LOADED:
        ctypes.CDLL(library, mode=ctypes.RTLD_GLOBAL)
        _LOADED[library] = ""
    return vulkan_enabled()


@contextlib.contextmanager
def use(library: str | None):
    """``load(library)`` for the duration of a run in this process; the previous choice is back
    afterwards (a run with ``--vulkan-runtime none`` must not switch the lane off for the rest of
    a process that runs several, e.g. a test session)."""
    global _CHOSEN
    before = _CHOSEN
    try:
        load(library)
        yield
    finally:
        _CHOSEN = before


def vulkan_enabled() -> bool:
    return _CHOSEN != "" and vulkan.BACKEND in registered_backends()


def describe(library: str | None, cache: str | None = None) -> dict:
    """The run header's record of the Vulkan runtime under test and the device it runs on."""
    from harness.runtimes.device import vulkan_devices

    devices, problem = vulkan_devices()
    info: dict = {"library": library, "devices": devices, "device_problem": problem}
    manifest = vulkan.for_library(Path(library)) if library else None
    if manifest:
        info.update(manifest.summary())
        # the conv shaders its source can dispatch: the universe coverage is measured against
        info["conv_shaders"] = manifest.shader_universe().to_dict()
    elif library:
        info["skew_note"] = "no manifest beside the library: its source commit is unknown"
    # How a cell's dispatched shaders are observed (stages/execute.py): nothing is added to
    # the plug-in, the stock lane runs the stock library
    info["dispatch_observation"] = (
        "the plug-in's own dispatch profiling (built with ET_EVENT_TRACER_ENABLED, its query "
        "pool always on), read from an ETDump the host attaches to each execution; the library "
        "is unchanged")
    return info


def status_lines(cache: str | None = None) -> list[str]:
    """``harness runtime status``: what is built, what the runtime registers, the device."""
    from harness.runtimes.device import describe as describe_device, vulkan_devices
    from harness.runtimes.wheel import installed as installed_wheel

    lines = []
    try:
        wheel = installed_wheel()
        lines.append(f"executorch {wheel.version} (commit {wheel.git_version[:12]}) at {wheel.root}")
    except RuntimeBuildError as e:
        return [f"executorch: {e}"]
    lines.append(f"registered in the wheel: {', '.join(registered_backends())}")
    found = vulkan.installed(cache)
    if found:
        lines.append(f"vulkan plug-in: {found.library} ({found.library_bytes / 2**20:.1f} MiB, "
                     f"sha256 {found.library_sha256[:16]}, built {found.built_at} in "
                     f"{found.build_seconds:g} s)")
        lines.append(f"  source: {found.source_commit} (version.txt {found.source_version_txt}) "
                     f"from {found.source_origin} (kept in the cache entry)")
        lines.append(f"  {found.skew_note or 'source is the wheel own commit'}")
        lines.append(f"  glslc: {found.glslc_version}")
        ok = load(found.library)
        lines.append(f"  loaded: VulkanBackend {'registered' if ok else 'NOT registered'}")
    else:
        lines.append("vulkan plug-in: not built for this wheel (python -m harness runtime build "
                     "vulkan); the Vulkan lane is NO_RUNTIME")
    for m in vulkan.built(cache):  # patched builds: --vulkan-runtime PATH runs them
        if m.patches and m.executorch_version == wheel.version \
                and m.executorch_git_version == wheel.git_version:
            lines.append(f"vulkan plug-in, {m.describe_patches()}: {m.library} (source "
                         f"{m.source_commit[:12]}, sha256 {m.library_sha256[:16]})")
    devices, problem = vulkan_devices()
    for i, dev in enumerate(devices):
        lines.append(f"vulkan device {i}: {describe_device(dev)}")
    if problem:
        lines.append(f"vulkan device: {problem}")
    return lines
