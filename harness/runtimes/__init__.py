"""Native runtime pieces the PyPI wheels do not ship, built here from ExecuTorch sources.

``vulkan``: ExecuTorch's Vulkan delegate (``backends/vulkan/runtime``) compiled as a plug-in
(``libexecutorch_backend_vulkan.so``) against the installed wheel's ``libexecutorch.so`` and
headers, so the wheel's own runtime executes Vulkan programs once the plug-in is loaded.
The CMake project is ``native/``; toolchain inputs come from Debian (``toolchain``), sources
from ``source``; results are cached with a manifest under ``<convconf cache>/runtimes/``.
``patching``: source patches (``patches/*.diff``, fixes for runtime bugs the harness found)
applied before a build (``runtime build vulkan --patch NAME``); a patched plug-in is cached apart.
"""

from __future__ import annotations

from pathlib import Path

NATIVE = Path(__file__).resolve().parent / "native"


class RuntimeBuildError(Exception):
    """A runtime cannot be built here; the message is one line that names what is missing."""


def cache_root(root: str | None = None) -> Path:
    from harness.versions import cache_home

    return Path(root) if root else cache_home()
