"""Run a .pte with the installed ExecuTorch runtime (inside a worker process: see workers.py)."""

from __future__ import annotations

import re
import time

import torch


class RuntimeFailure(Exception):
    """The runtime refused to load or execute the program (it returned an error, no crash)."""


def run_pte(pte: bytes, inputs: tuple) -> tuple[list[torch.Tensor], float]:
    from harness.runtimes.load import pybindings

    _load_for_executorch_from_buffer = pybindings()._load_for_executorch_from_buffer
    t0 = time.perf_counter()
    try:
        program = _load_for_executorch_from_buffer(pte)
        outputs = program.forward(list(inputs))
    except Exception as e:  # pybind11 maps the runtime's C++ exceptions to several types
        raise RuntimeFailure(runtime_message(e)) from None
    return list(outputs), time.perf_counter() - t0


def runtime_message(e: BaseException) -> str:
    """The runtime's own last line, with the build folder cut from source paths, so the same
    check at the same place reads the same on every machine (``executorch/backends/...:367``)."""
    text = str(e).strip()
    line = text.splitlines()[-1] if text else repr(e)
    if not isinstance(e, RuntimeError):  # e.g. IndexError from a std::out_of_range
        line = f"{type(e).__name__}: {line}"
    return re.sub(r"\S*/(executorch/(backends|runtime|extension)/)", r"\1", line)
