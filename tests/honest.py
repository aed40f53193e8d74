"""What every cell the harness writes must be, whatever the delegate did (README "Testing: what
a test may assert"): a status that is one of ours and consistent with what the row says happened.

A test that runs a real case through a delegate asserts this, never which status the delegate
earned: that is the case's corpus entry (cases/*.json, expectations per executorch release)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import torch

from harness.stages.compare import LOW_PRECISION_STEPS
from harness.status import EXECUTED, Status

NAMES = {s.value for s in Status}
INT8_STEPS = 1 + 1e-5  # one output step, as compare.py allows


def _row(row):
    return SimpleNamespace(**row) if isinstance(row, dict) else row


def _num(value):
    """A metric as a float, None when absent (NaN in a matrix read back from CSV)."""
    if value is None or value == "":
        return None
    value = float(value)
    return None if math.isnan(value) else value


def allowed_steps(row) -> float | None:
    """The tolerance in steps for a quantized or low-precision cell, None for fp32 (judged per
    element against atol + rtol * |ref|, which the row does not carry)."""
    case = getattr(row, "case", None)
    quant = getattr(case, "quant", None) if case is not None else getattr(row, "quant", None)
    if isinstance(quant, str) and quant:
        return INT8_STEPS
    dtype = getattr(case, "dtype", None) if case is not None else getattr(row, "dtype", None)
    if isinstance(dtype, str) and dtype and dtype != "float32":
        return LOW_PRECISION_STEPS[getattr(torch, dtype)]
    return None


def assert_honest(row, *, runtime: bool = True) -> str:
    """The row's status is one of ours and says what happened; -> the status. ``runtime``: the
    lane's runtime was present (then a lowered program executed: never NO_RUNTIME)."""
    row = _row(row)
    status = str(row.status)
    assert status in NAMES, row
    message = row.message or ""
    if status != Status.PASS:
        assert message, f"a {status} row says why: {row}"
    if runtime:
        assert status != Status.NO_RUNTIME, row
    if status == Status.NOT_DELEGATED:  # the ops outside the delegate are named
        assert "outside the" in message, row
    if status in (Status.PASS, Status.MISMATCH):  # it executed and was measured
        assert _num(row.run_time_s) is not None and _num(row.run_time_s) > 0, row
    steps, error = _num(getattr(row, "error_steps", None)), _num(row.max_abs_error)
    # a float cell judged by its error bound (issue #48): PASS iff the worst element is within
    # it; int8 (and a row written before the bound) in steps
    ratio = _num(getattr(row, "bound_ratio", None))
    allowed = None if ratio is not None else allowed_steps(row)
    if status == Status.PASS:
        assert error is not None and math.isfinite(error), row
        assert ratio is None or ratio <= 1, row
        if allowed is not None:
            assert steps is not None and steps <= allowed, row
    if status == Status.MISMATCH:  # metrics, or the shape/dtype/NaN that made it one
        assert error is not None or "vs reference" in message or "NaN" in message, row
        assert ratio is None or ratio > 1 or "NaN" in message, row
        if allowed is not None and steps is not None and math.isfinite(steps):
            assert steps > allowed or "vs reference" in message, row
    return status


def assert_executed(row) -> str:
    """A lowered cell with its runtime present executed, or says which stage stopped it; a
    static prediction (CONTRACT_VIOLATION) never stands in for the runtime's verdict."""
    status = assert_honest(row)
    assert status in {s.value for s in EXECUTED} | {"NOT_DELEGATED", "LOWER_ERROR", "INVALID"}, \
        _row(row)
    return status
