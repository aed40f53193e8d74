"""Build, find and load the Vulkan runtime plug-in for the installed executorch wheel.

Cached as ``<cache>/runtimes/<executorch version>-<source commit[:12]>/`` holding the library and
``manifest.json`` (source commit and skew, glslc version, build seconds, library sha256, ...).
A build whose inputs (wheel, source digest, CMake project, toolchain) match a manifest whose
library still has its recorded sha256 is a cache hit and compiles nothing.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from . import NATIVE, RuntimeBuildError, cache_root, source as source_mod, toolchain, wheel as wheel_mod

LIBRARY = "libexecutorch_backend_vulkan.so"
RUNNER = "convconf_runner"  # native runner (runner.cpp) for programs run on another machine
BACKEND = "VulkanBackend"
BUILDER_VERSION = "1"  # bump when the build recipe changes in a way the inputs do not show


@dataclass
class Manifest:
    runtime: str
    library: str                  # absolute path of the cached library
    runner: str                   # the native runner built beside it ("" where it could not be)
    library_sha256: str
    library_bytes: int
    executorch_version: str
    executorch_git_version: str   # the wheel's own commit
    source_commit: str
    source_version_txt: str
    source_commit_date: str
    source_origin: str
    source_exact: bool
    skew_note: str
    glslc_version: str
    toolchain_packages: list
    build_seconds: float
    phase_seconds: dict
    jobs: int
    built_at: str
    inputs_key: str
    cached: bool = False          # set on a cache hit (not stored)
    extra: dict = field(default_factory=dict)

    @classmethod
    def read(cls, path: Path) -> "Manifest | None":
        try:
            data = json.loads(Path(path).read_text())
            return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})
        except (OSError, ValueError, TypeError):
            return None

    def write(self, path: Path) -> None:
        data = asdict(self)
        data.pop("cached")
        Path(path).write_text(json.dumps(data, indent=1) + "\n")

    def summary(self) -> dict:
        """What a run header records about the runtime under test."""
        return {"library": self.library, "library_sha256": self.library_sha256[:16],
                "source_commit": self.source_commit, "source_exact": self.source_exact,
                "skew_note": self.skew_note, "executorch_version": self.executorch_version,
                "glslc_version": self.glslc_version}


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _inputs_key(wheel, src) -> str:
    recipe = b"".join(p.read_bytes() for p in sorted(NATIVE.iterdir()) if p.is_file())
    material = json.dumps([BUILDER_VERSION, wheel.version, wheel.git_version, src.commit,
                           src.digest, hashlib.sha256(recipe).hexdigest(),
                           toolchain.TOOLCHAIN_VERSION])
    return hashlib.sha256(material.encode()).hexdigest()[:24]


def runtimes_dir(cache: str | None = None) -> Path:
    return cache_root(cache) / "runtimes"


def build(source: str | None = None, jobs: int | None = None, cache: str | None = None,
          log: Callable[[str], None] = print) -> Manifest:
    """Build (or find in the cache) the plug-in for the installed wheel. Concurrent callers
    (pytest-xdist workers, parallel CI jobs) wait for one build and then hit its cache."""
    wheel = wheel_mod.installed()
    root = runtimes_dir(cache)
    src = source_mod.resolve(source, wheel, root / "sources" / wheel.git_version[:12])
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build_locked(wheel, src, root, jobs, cache, log)


def _build_locked(wheel, src, root: Path, jobs, cache, log) -> Manifest:
    t_all = time.perf_counter()
    key = _inputs_key(wheel, src)
    dest = root / f"{wheel.version}-{src.commit[:12]}"
    found = Manifest.read(dest / "manifest.json")
    if found and found.inputs_key == key and Path(found.library).exists() \
            and _sha256(Path(found.library)) == found.library_sha256:
        found.cached = True
        return found

    jobs = jobs or len(os.sched_getaffinity(0))
    phases: dict = {}
    t = time.perf_counter()
    installed = toolchain.ensure_packages(toolchain.BUILD_PACKAGES, log)
    phases["apt"] = round(time.perf_counter() - t, 1)
    t = time.perf_counter()
    tc = toolchain.ensure_next_release_tools(cache_root(cache), log)
    phases["toolchain"] = round(time.perf_counter() - t, 1)

    work = root / "build" / dest.name  # per wheel+source: a changed recipe rebuilds incrementally
    src.extract(work / "src")
    build_dir = work / "cmake"
    recipe = _stage_recipe(work / "native", build_dir)
    configure = ["cmake", "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release", str(recipe),
                 f"-DET_SRC_PARENT={work / 'src'}", f"-DET_WHEEL_DIR={wheel.root}",
                 f"-DET_RUNTIME_LIB={wheel.runtime_lib}",
                 f"-DET_EXTRA_LIBS={';'.join(map(str, wheel.extra_libs))}",
                 f"-DET_KERNEL_LIBS={';'.join(map(str, wheel.kernel_libs))}",
                 f"-DVK_THIRD_PARTY={tc.third_party}", f"-DGLSLC={tc.glslc}",
                 f"-DFLATC={shutil.which('flatc', path='/usr/bin') or 'flatc'}",
                 f"-DPYTHON_EXECUTABLE={sys.executable}", f"-DSHADER_NTHREADS={jobs}"]
    for phase, cmd in (("configure", configure),
                       ("shaders", ["ninja", f"-j{jobs}", "vulkan_shaders"]),
                       ("compile", ["ninja", f"-j{jobs}"])):
        t = time.perf_counter()
        log(f"{phase}: {' '.join(cmd[:3])} ...")
        _run(cmd, build_dir, build_dir / f"{phase}.log")
        phases[phase] = round(time.perf_counter() - t, 1)

    built = build_dir / LIBRARY
    staging = root / f".{dest.name}.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    shutil.copy2(built, staging / LIBRARY)
    runner_missing = _runner_missing(build_dir)
    if not runner_missing:
        shutil.copy2(build_dir / RUNNER, staging / RUNNER)
    if shutil.which("strip"):  # debug sections are most of its size; symbols stay exported
        subprocess.run(["strip", "--strip-debug", str(staging / LIBRARY)], check=False)
    library = dest / LIBRARY
    manifest = Manifest(
        runtime="vulkan", library=str(library), runner="" if runner_missing else str(dest / RUNNER),
        library_sha256=_sha256(staging / LIBRARY),
        library_bytes=(staging / LIBRARY).stat().st_size, executorch_version=wheel.version,
        executorch_git_version=wheel.git_version, source_commit=src.commit,
        source_version_txt=src.version_txt, source_commit_date=src.commit_date,
        source_origin=src.origin, source_exact=src.exact_for(wheel),
        skew_note=src.skew_note(wheel), glslc_version=tc.glslc_version(),
        toolchain_packages=tc.packages(), build_seconds=0.0, phase_seconds=phases, jobs=jobs,
        built_at=time.strftime("%Y-%m-%d %H:%M:%S"), inputs_key=key,
        extra={"apt_installed": installed, "runner_missing": runner_missing})
    check = registers(staging / LIBRARY)
    if check:
        raise RuntimeBuildError(f"built {LIBRARY} but it does not register {BACKEND}: {check}")
    manifest.build_seconds = round(time.perf_counter() - t_all, 1)
    manifest.write(staging / "manifest.json")
    shutil.rmtree(dest, ignore_errors=True)
    os.rename(staging, dest)
    shutil.rmtree(work / "src", ignore_errors=True)  # keep the cmake tree: incremental rebuilds
    return manifest


def _runner_missing(build_dir: Path) -> str:
    """Why the CMake project left the native runner out ('' when it built it)."""
    marker = build_dir / "runner-not-built.txt"
    if marker.exists():
        return marker.read_text().strip()
    return "" if (build_dir / RUNNER).exists() else "the build produced no runner"


def _stage_recipe(recipe: Path, build_dir: Path) -> Path:
    """Copy the CMake project next to its build tree. CMake pins a build tree to the path of
    its source; configuring from the checkout would tie the shared cache to one clone (CI's
    checkout and a developer's share ~/.cache), so every clone configures this copy instead."""
    recipe.mkdir(parents=True, exist_ok=True)
    for f in NATIVE.iterdir():
        if f.is_file() and (not (recipe / f.name).exists()
                            or (recipe / f.name).read_bytes() != f.read_bytes()):
            shutil.copy2(f, recipe / f.name)  # unchanged files keep their mtime: ninja stays incremental
    cache_file = build_dir / "CMakeCache.txt"
    if cache_file.exists() and f"CMAKE_HOME_DIRECTORY:INTERNAL={recipe}\n" not in cache_file.read_text():
        cache_file.unlink()  # configured from elsewhere (an older layout); objects stay reusable
    build_dir.mkdir(parents=True, exist_ok=True)
    return recipe


def _run(cmd: list[str], cwd: Path, log_path: Path) -> None:
    with open(log_path, "w") as fh:
        done = subprocess.run(cmd, cwd=cwd, stdout=fh, stderr=subprocess.STDOUT)
    if done.returncode:
        lines = [ln for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
        said = next((ln for ln in lines if "error" in ln.lower()), lines[-1] if lines else "")
        raise RuntimeBuildError(f"{' '.join(cmd[:2])} failed (exit {done.returncode}, log "
                                f"{log_path}): {said.strip()[:300]}")


def registers(library: Path) -> str:
    """Load the plug-in in a fresh interpreter; '' when VulkanBackend registers, else why not."""
    code = ("import ctypes,sys\n"
            "from executorch.extension.pybindings.portable_lib import _get_registered_backend_names\n"
            "ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)\n"
            "print(list(_get_registered_backend_names()))\n")
    done = subprocess.run([sys.executable, "-c", code, str(library)], capture_output=True,
                          text=True, timeout=300)
    if done.returncode:
        return (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
    return "" if BACKEND in done.stdout else f"registered: {done.stdout.strip()}"


def installed(cache: str | None = None) -> Manifest | None:
    """The plug-in built for the installed wheel (its own commit preferred, then the newest)."""
    try:
        wheel = wheel_mod.installed()
    except RuntimeBuildError:
        return None
    found = [m for m in (Manifest.read(p) for p in runtimes_dir(cache).glob("*/manifest.json"))
             if m and m.executorch_version == wheel.version
             and m.executorch_git_version == wheel.git_version and Path(m.library).exists()]
    return max(found, key=lambda m: (m.source_exact, m.built_at)) if found else None


def for_library(path: Path) -> Manifest | None:
    return Manifest.read(Path(path).parent / "manifest.json")
