"""Run a .pte with the installed ExecuTorch runtime (inside a worker process: see workers.py).

What the delegate dispatched is observed with the runtime's own event tracer (ETDump): for a
backend that reports its dispatches (``Backend.observes_dispatch``: Vulkan) the program is
loaded with ``enable_etdump=True``, and the Vulkan delegate, built as every plug-in
here is with ``ET_EVENT_TRACER_ENABLED`` (the wheel's CMake config asks for it), already keeps
a GPU query pool on and reports one profiling event per compute-shader dispatch naming its
``kernel_name`` (VulkanBackend.cpp, after ``compute_graph->execute()``). The plug-in is the same
library byte for byte; only the host attaches an event tracer to the method, which records and
changes nothing in what the delegate computes. A runtime without ETDump support simply reports
nothing dispatched.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from dataclasses import dataclass, field


class RuntimeFailure(Exception):
    """The runtime refused to load or execute the program (it returned an error, no crash)."""


@dataclass
class Execution:
    """One program run: its outputs, the seconds load + forward took, and the compute shaders
    the delegate reported dispatching (sorted, each once; [] where nothing was reported)."""
    outputs: list  # torch tensors
    seconds: float
    dispatched: list = field(default_factory=list)


def execute_pte(pte: bytes, inputs: tuple, observe: bool = False) -> Execution:
    """Load and run the program; ``observe``: with an ETDump attached, to read the shaders it
    dispatched (a few ms more; only for a delegate that reports them)."""
    from harness.runtimes.load import pybindings

    load = pybindings()._load_for_executorch_from_buffer
    t0 = time.perf_counter()
    try:
        program = None
        if observe:
            try:
                program = load(pte, enable_etdump=True, debug_buffer_size=0)
            except TypeError:  # a runtime whose binding has no ETDump option
                pass
        if program is None:
            program = load(pte)
        outputs = program.forward(list(inputs))
    except Exception as e:  # pybind11 maps the runtime's C++ exceptions to several types
        raise RuntimeFailure(runtime_message(e)) from None
    seconds = time.perf_counter() - t0
    return Execution(list(outputs), seconds, dispatched_shaders(program))


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
        program.write_etdump_result_to_file(path, os.path.join(d, "run.debug"))
        with open(path, "rb") as fh:
            data = fh.read()
    return sorted({m.decode() for m in _KERNEL.findall(data)})


def runtime_message(e: BaseException) -> str:
    """The runtime's own last line, with the build folder cut from source paths, so the same
    check at the same place reads the same on every machine (``executorch/backends/...:367``)."""
    text = str(e).strip()
    line = text.splitlines()[-1] if text else repr(e)
    if not isinstance(e, RuntimeError):  # e.g. IndexError from a std::out_of_range
        line = f"{type(e).__name__}: {line}"
    return re.sub(r"\S*/(executorch/(backends|runtime|extension)/)", r"\1", line)

