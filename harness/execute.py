"""Run a .pte with the installed ExecuTorch runtime (inside a worker process: see workers.py)."""

from __future__ import annotations

import re
import time

import torch


class RuntimeFailure(Exception):
    """The runtime refused to load or execute the program (it returned an error, no crash)."""


def run_pte(pte: bytes, inputs: tuple) -> tuple[list[torch.Tensor], float]:
    from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

    t0 = time.perf_counter()
    try:
        program = _load_for_executorch_from_buffer(pte)
        outputs = program.forward(list(inputs))
    except RuntimeError as e:
        raise RuntimeFailure(runtime_message(e)) from None
    return list(outputs), time.perf_counter() - t0


def runtime_message(e: BaseException) -> str:
    """The runtime's own last line, with the build folder cut from source paths, so the same
    check at the same place reads the same on every machine (``executorch/backends/...:367``)."""
    text = str(e).strip()
    line = text.splitlines()[-1] if text else repr(e)
    return re.sub(r"\S*/(executorch/(backends|runtime|extension)/)", r"\1", line)
