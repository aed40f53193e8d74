"""The installed executorch wheel, as a native build sees it: headers, runtime core library,
version and the commit it was built from."""

from __future__ import annotations

import glob
import importlib.util
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, metadata, version
from pathlib import Path

from harness.runtimes import RuntimeBuildError


@dataclass(frozen=True)
class Wheel:
    version: str        # "1.5.1"
    git_version: str    # the commit the wheel was built from (executorch.version.git_version)
    root: Path          # .../site-packages/executorch
    runtime_lib: Path   # the shared library that holds the runtime core (backend registry)
    extra_libs: tuple = ()  # non-modular wheels: the pybinding .so completes the runtime core
    repository: str = ""  # the source repository named in the wheel's own metadata

    @property
    def include(self) -> Path:
        return self.root / "include"

    @property
    def modular(self) -> bool:
        return not self.extra_libs

    @property
    def kernel_libs(self) -> tuple:
        """The wheel's kernel libraries (ops outside a delegate), for a native runner."""
        lib = self.runtime_lib.parent
        return tuple(lib / n for n in ("libexecutorch_kernels_optimized.so",
                                       "libexecutorch_kernels_quantized.so",
                                       "libexecutorch_threadpool.so") if (lib / n).exists()) \
            if self.modular else ()


def installed() -> Wheel:
    try:
        ver = version("executorch")
    except PackageNotFoundError:
        raise RuntimeBuildError("executorch is not installed (pip install executorch)") from None
    spec = importlib.util.find_spec("executorch")
    root = Path(list(spec.submodule_search_locations)[0])
    git_version = ""
    version_py = root / "version.py"
    if version_py.exists():  # read, not imported: importing executorch pulls in torch
        scope: dict = {}
        exec(compile(version_py.read_text(), str(version_py), "exec"), scope)
        git_version = str(scope.get("git_version", ""))
    urls = dict(u.split(", ", 1) for u in (metadata("executorch").get_all("Project-URL") or [])
                if ", " in u)
    repository = urls.get("Repository", "")
    ver = ver.split("+")[0]
    if (root / "lib" / "libexecutorch.so").exists():  # modular layout (1.5.x)
        return Wheel(ver, git_version, root, root / "lib" / "libexecutorch.so",
                     repository=repository)
    # 1.4.x/1.3.x wheels are monolithic: the runtime core is exported by the QNN backend
    # library together with the pybinding (NOTES.md); the plug-in loads after portable_lib.
    qnn = root / "backends" / "qualcomm" / "libqnn_executorch_backend.so"
    pybind = sorted(glob.glob(str(root / "extension" / "pybindings" / "_portable_lib*.so")))
    if qnn.exists() and pybind:
        return Wheel(ver, git_version, root, qnn, (Path(pybind[0]),), repository)
    raise RuntimeBuildError(f"executorch {ver} at {root} has neither lib/libexecutorch.so nor a "
                            f"runtime core a plug-in can link against")
