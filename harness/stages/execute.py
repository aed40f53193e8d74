"""Run a .pte with the installed ExecuTorch runtime (inside a worker process: see workers.py).

What the delegate dispatched is observed with the runtime's own event tracer (ETDump): for a
backend that reports its dispatches (``Backend.observes_dispatch``: Vulkan) the program is
loaded with ``enable_etdump=True``, and the Vulkan delegate, built as every plug-in
here is with ``ET_EVENT_TRACER_ENABLED`` (the wheel's CMake config asks for it), already keeps
a GPU query pool on and reports one profiling event per compute-shader dispatch naming its
``kernel_name`` (VulkanBackend.cpp, after ``compute_graph->execute()``). The plug-in is the same
library byte for byte; only the host attaches an event tracer to the method, which records and
changes nothing in what the delegate computes. A runtime without ETDump support, or one whose
event tracer aborts a delegate's run (ExecuTorch before 1.5: ``etdump_works``), runs unobserved
and reports nothing dispatched.

What the runtime itself says is kept per cell: while the program loads and executes, file
descriptors 1 and 2 point at a file of the cell's own (``captured``), so every ET_LOG line
(``Check failed ...``, ``KernelCall failed at instruction I in operator OP``), the XNNPACK
executor's complaints, a Vulkan exception's text and an abort message land there, not in a
worker's shared log. After the cell the descriptors are restored and the text is echoed to
where they pointed (the worker log keeps everything). A native abort leaves the file behind:
the parent reads its last lines (workers.cell_log_tail). ``Execution.log`` /
``RuntimeFailure.log`` carry it; culprit.py reads the decisive lines out of it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field


class RuntimeFailure(Exception):
    """The runtime refused to load or execute the program (it returned an error, no crash);
    ``log``: what the runtime printed meanwhile."""

    def __init__(self, message: str, log: str = ""):
        super().__init__(message)
        self.log = log


# Lines the runtime prints on every load that say nothing about the cell (cpuinfo probing).
NOISE = ("cpuinfo_utils",)


def clean_log(text: str) -> str:
    """The runtime's output without the per-load noise, blank lines dropped."""
    return "\n".join(ln for ln in text.splitlines()
                     if ln.strip() and not any(n in ln for n in NOISE))


def _flush_native() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, ValueError, OSError):
            pass
    try:
        ctypes.CDLL(None).fflush(None)  # C stdio buffers (ET_LOG may go through stdout)
    except (OSError, AttributeError):
        pass


class Captured:
    """What the runtime wrote to fds 1/2 inside ``captured`` (filled when the block ends)."""
    text: str = ""


@contextlib.contextmanager
def captured(path: str | os.PathLike | None = None, echo: bool = True):
    """fds 1 and 2 -> ``path`` (a temporary file when None) for the block; -> Captured. The
    file is removed afterwards (a process that dies inside the block leaves it for its parent);
    ``echo`` writes the text to where fd 2 pointed before."""
    got = Captured()
    own = path is None
    if own:
        fd, path = tempfile.mkstemp(prefix="convconf-runtime-", suffix=".log")
    else:
        os.makedirs(os.path.dirname(os.fspath(path)) or ".", exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    _flush_native()
    saved = os.dup(1), os.dup(2)
    # The pybinding's ET_LOG goes to std::cerr, which pybind11 redirects to Python's sys.stderr
    # during its calls (scoped_estream_redirect): for the block, Python's streams write to the
    # fds too (under pytest they are capture objects, not fds 1/2)
    py_streams = sys.stdout, sys.stderr
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        sys.stdout = open(1, "w", closefd=False, buffering=1, errors="replace")
        sys.stderr = open(2, "w", closefd=False, buffering=1, errors="replace")
        yield got
    finally:
        _flush_native()
        sys.stdout, sys.stderr = py_streams
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for f in (*saved, fd):
            os.close(f)
        try:
            with open(path, errors="replace") as fh:
                got.text = fh.read()
            os.unlink(path)
        except OSError:
            pass
        if echo and got.text:
            try:
                os.write(2, got.text.encode(errors="replace"))
            except OSError:
                pass


@dataclass
class Execution:
    """One program run: its outputs, the seconds load + forward took, and the compute shaders
    the delegate reported dispatching (sorted, each once; [] where nothing was reported)."""
    outputs: list  # torch tensors
    seconds: float
    dispatched: list = field(default_factory=list)
    log: str = ""  # what the runtime printed while loading and executing (clean_log)
    sized: list = field(default_factory=list)  # a dynamic case's runs, per size (sizes.py)


_KERNELS: list[str] = []  # "" once the quantized kernels are registered in this process


def register_kernels() -> str:
    """The runtime side of ExecuTorch's documented setup (backends/xnnpack/test/ops/
    test_conv2d.py: ``import ...pybindings.portable_lib`` then ``import
    executorch.kernels.quantized``): the pybinding's runtime has no quantized_decomposed
    kernels of its own; that import loads ``libexecutorch_kernels_quantized.so``, whose
    registrations give a quantize/dequantize left outside a delegate a kernel (without it:
    "Missing operator: quantized_decomposed::dequantize_per_channel.out", error 0x14, our
    setup). The native runner links that library itself. Once per process; -> "" or why not."""
    if not _KERNELS:
        try:
            import executorch.kernels.quantized  # noqa: F401
            _KERNELS.append("")
        except Exception as e:
            _KERNELS.append(f"import executorch.kernels.quantized failed: {type(e).__name__}: {e}")
    return _KERNELS[0]


def execute_pte(pte: bytes, inputs: tuple, observe: bool = False,
                log_path: str | os.PathLike | None = None, sizes: list | None = None) -> Execution:
    """Load and run the program; ``observe``: with an ETDump attached, to read the shaders it
    dispatched (a few ms more; only for a delegate that reports them). What the runtime prints
    meanwhile goes to ``log_path`` (a temporary file when None) and comes back as ``log``."""
    from harness.runtimes.load import pybindings

    load = pybindings()._load_for_executorch_from_buffer
    register_kernels()  # after the pybinding, as ExecuTorch's tests do
    observe = observe and etdump_works()
    t0 = time.perf_counter()
    failure = None
    with captured(log_path) as said:
        try:
            program = None
            if observe:
                try:
                    program = load(pte, enable_etdump=True, debug_buffer_size=0)
                except TypeError:  # a runtime whose binding has no ETDump option
                    pass
            if program is None:
                program = load(pte)
            if sizes:  # a dynamic case: every size on this one loaded method (sizes.py)
                from harness.stages.sizes import forward_sizes
                outputs, sized = [], forward_sizes(program, sizes, runtime_message)
            else:
                outputs, sized = program.forward(list(inputs)), []
        except Exception as e:  # pybind11 maps the runtime's C++ exceptions to several types
            failure = runtime_message(e)
    if failure is not None:
        raise RuntimeFailure(failure, clean_log(said.text))
    seconds = time.perf_counter() - t0
    return Execution(list(outputs), seconds, dispatched_shaders(program), clean_log(said.text),
                     sized)


# The first ExecuTorch release whose event tracer survives a delegate's run: the 1.4.1 wheel
# aborts at the end of every Vulkan execution that has an ETDump attached ("etdump_flatcc.cpp:201
# ... ETDumpGen in an invalid state"; its own plug-in, v1.4.1's source): 63 cells CRASH with it,
# PASS or MISMATCH without, the same program on the same plug-in (issue 50's fidelity check).
# Observing is a side view (dispatched shaders for coverage) and must never change a verdict: an
# older runtime runs unobserved and reports nothing dispatched.
ETDUMP_SINCE = (1, 5)


def etdump_works() -> bool:
    """Whether the installed ExecuTorch runtime can carry an ETDump through a run."""
    from harness.versions import stack

    numbers = re.findall(r"\d+", stack()["executorch"])[:2]
    return len(numbers) < 2 or tuple(map(int, numbers)) >= ETDUMP_SINCE


_KERNEL = re.compile(rb'"kernel_name":\s*"([A-Za-z0-9_]+)"')


def dispatched_shaders(program) -> list[str]:
    """The kernel names of the compute shaders the program's delegates reported dispatching,
    sorted, each once. Read from the ETDump buffer's profiling-event names, which the flatbuffer
    stores verbatim as strings (``"kernel_name": "conv2d_float"``); not through
    ``executorch.devtools``, whose import (the Inspector, exir) costs an execution worker
    tens of seconds."""
    if not getattr(program, "has_etdump", lambda: False)():
        return []
    with tempfile.TemporaryDirectory(prefix="convconf-etdump-") as d:
        path = os.path.join(d, "run.etdp")
        try:
            program.write_etdump_result_to_file(path, os.path.join(d, "run.debug"))
            with open(path, "rb") as fh:
                data = fh.read()
        except (OSError, RuntimeError):
            # "No etdump data found": the runtime recorded no event (e.g. a program no delegate
            # took, all portable kernels), so it wrote no file: nothing was dispatched, and the
            # cell's verdict is its execution's, not a harness error (nightly seed 0: 2 CRASH
            # cells said "FileNotFoundError ... run.etdp" before this)
            return []
    return sorted({m.decode() for m in _KERNEL.findall(data)})


def runtime_message(e: BaseException) -> str:
    """The runtime's own last line, with the build folder cut from source paths, so the same
    check at the same place reads the same on every machine (``executorch/backends/...:367``)."""
    text = str(e).strip()
    line = text.splitlines()[-1] if text else repr(e)
    if not isinstance(e, RuntimeError):  # e.g. IndexError from a std::out_of_range
        line = f"{type(e).__name__}: {line}"
    return re.sub(r"\S*/(executorch/(backends|runtime|extension)/)", r"\1", line)

