"""Run a .pte with the installed ExecuTorch runtime (inside a worker process: see workers.py)."""

from __future__ import annotations

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
        raise RuntimeFailure(str(e).strip().splitlines()[-1] if str(e).strip() else repr(e)) from None
    return list(outputs), time.perf_counter() - t0
