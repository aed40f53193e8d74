"""One cell = (case, backend, fix set) through every stage, ending in one matrix row.

Stages up to the static checks are pure functions of the cell and the installed versions, so
their outcome (including the .pte and the eager references) is cached; execution and comparison
are redone every time, they are cheap and they are what a runtime change would alter.
"""

from __future__ import annotations

import time
import traceback

import torch

from . import backends
from .build import build_module, eager_check, make_inputs
from .cache import Cache, key as cache_key
from .compare import compare
from .execute import RuntimeFailure, run_pte
from .lower import lower
from .quantize import output_qparams, quantize
from .record import METRIC_COLUMNS, CellResult
from .spec import ConvCase
from .status import STATIC_FINAL, Status


def new_result(case: ConvCase, backend: str, fix_names: list[str]) -> CellResult:
    return CellResult(case=case, backend=backend, fixes=",".join(fix_names))


def _first_line(e: BaseException) -> str:
    """The error's first line, then its root cause's (pass managers wrap the real error);
    a bare ``assert`` (no message) is named by where it failed."""
    text = _describe(e)
    root = e
    while root.__cause__ is not None and root.__cause__ is not root:
        root = root.__cause__
    if root is not e:
        text += f" <- {_describe(root)}"
    return text[:600]


def _describe(e: BaseException) -> str:
    lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
    if lines:
        return f"{type(e).__name__}: {lines[0]}"
    frame = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
    if frame is None:
        return type(e).__name__
    where = frame.filename.split("site-packages/")[-1]
    return f"{type(e).__name__} at {where}:{frame.lineno}: {frame.line}"


def prepare(case: ConvCase, backend_name: str, fix_names: list[str]) -> dict:
    """Quantize, export, lower, check delegation and contract. -> cache entry."""
    backend = backends.get(backend_name)
    entry: dict = {"status": None, "phase": None, "message": ""}
    module = build_module(case)
    inputs = make_inputs(case)
    with torch.no_grad():
        float_ref = module(*inputs)
    refs = {"inputs": inputs, "ref": float_ref, "float_ref": None}
    entry["refs"] = refs
    program_module = module
    try:
        entry["phase"] = "quantize"
        if case.quant:
            program_module, entry["quantize_time_s"] = quantize(case, module, inputs, backend)
            with torch.no_grad():
                refs["ref"] = program_module(*inputs)
            refs["float_ref"] = float_ref
            qparams = output_qparams(program_module)
            entry["out_scale"] = qparams[0] if qparams else None
        entry["phase"] = "export"
        exported = torch.export.export(program_module, inputs)
        entry["phase"] = "lower"
        lowered = lower(exported, backend, fix_names)
    except Exception as e:  # the stage's own error is the finding
        entry.update(status=Status.LOWER_ERROR.value, message=_first_line(e),
                     traceback=traceback.format_exc(limit=-8))
        return entry
    entry.update(phase="check", pte=lowered.pte, pte_size_kb=round(len(lowered.pte) / 1024, 2),
                 lower_time_s=round(lowered.lower_time_s, 3),
                 delegated_ops=lowered.delegated_ops, undelegated_ops=lowered.undelegated_ops)
    if not lowered.conv_delegated:
        outside = ", ".join(f"{k} x{v}" for k, v in sorted(lowered.undelegated_ops.items()))
        entry.update(status=Status.NOT_DELEGATED.value,
                     message=f"outside the {backend_name} delegate: {outside or 'everything'}")
        return entry
    violations = backend.contract_violations(lowered.edge_manager)
    entry["contract_violations"] = violations
    if violations:
        entry.update(status=Status.CONTRACT_VIOLATION.value, message="; ".join(violations))
    return entry


def run_cell(case: ConvCase, backend_name: str, fix_names: list[str],
             cache: Cache | None = None) -> CellResult:
    t0 = time.perf_counter()
    fix_names = sorted(fix_names)
    row = new_result(case, backend_name, fix_names)
    backend = backends.get(backend_name)
    k = cache_key(case.case_id, backend_name, fix_names)
    entry = cache.load(k) if cache else None  # only valid cases are ever cached
    row.cached = entry is not None
    if entry is None:
        invalid = eager_check(case)
        if invalid:
            row.update(status=Status.INVALID.value, phase="eager", message=invalid)
            return _done(row, t0)
        entry = prepare(case, backend_name, fix_names)
        if cache:
            cache.store(k, entry)
    _static(row, entry)
    if _finished_without_runtime(row, backend):
        return _done(row, t0)

    refs = entry["refs"]
    row.phase = "execute"
    try:
        outputs, row.run_time_s = run_pte(entry["pte"], refs["inputs"])
    except RuntimeFailure as e:
        row.update(status=Status.RUNTIME_ERROR.value, message=str(e))
        return _done(row, t0)
    row.phase = "compare"
    verdict = compare(outputs[0], refs["ref"], float_ref=refs.get("float_ref"),
                      out_scale=entry.get("out_scale"), steps=backend.quant_tolerance_steps)
    row.update(**{c: verdict.metrics.get(c) for c in METRIC_COLUMNS})
    row.update(status=(Status.PASS if verdict.ok else Status.MISMATCH).value,
               message=verdict.message)
    return _done(row, t0)


def cached_row(case: ConvCase, backend_name: str, fix_names: list[str],
               cache: Cache) -> CellResult | None:
    """The finished row of a cell whose outcome needs no execution and is cached (a static
    verdict, or no runtime to run it on); None when the cell must go to a worker."""
    t0 = time.perf_counter()
    fix_names = sorted(fix_names)
    meta = cache.load_meta(cache_key(case.case_id, backend_name, fix_names))
    if meta is None:
        return None
    row = new_result(case, backend_name, fix_names)
    _static(row, meta)
    row.cached = True
    return _done(row, t0) if _finished_without_runtime(row, backends.get(backend_name)) else None


STATIC_FIELDS = ("status", "phase", "message", "delegated_ops", "undelegated_ops",
                 "contract_violations", "pte_size_kb", "quantize_time_s", "lower_time_s")


def _static(row: CellResult, entry: dict) -> None:
    """Copy the cached static stages into the record; the contract check becomes ``predicted``."""
    row.update(**{n: entry[n] for n in STATIC_FIELDS if n in entry})
    if entry["status"] is None or entry["status"] == Status.CONTRACT_VIOLATION.value:
        row.predicted = Status.CONTRACT_VIOLATION.value if entry.get("contract_violations") \
            else "clean"


def _finished_without_runtime(row: CellResult, backend) -> bool:
    """True (row final) unless the cell is to execute: a static verdict that execution cannot
    change, or no runtime (then a predicted violation stays CONTRACT_VIOLATION, else NO_RUNTIME)."""
    if row.status in {s.value for s in STATIC_FINAL}:
        return True
    if backend.runtime_available():
        row.update(status=None, message="")
        return False
    if not row.status:
        row.update(status=Status.NO_RUNTIME.value, phase="execute",
                   message=f"{backend.runtime_name} is not registered in the installed runtime")
    return True


def _done(row: CellResult, t0: float) -> CellResult:
    row.cell_time_s = round(time.perf_counter() - t0, 3)
    return row


def crash_row(case: ConvCase, backend_name: str, fix_names: list[str], message: str,
              cache: Cache | None = None) -> CellResult:
    """The record of a cell whose worker died; what was cached before it died is kept."""
    fix_names = sorted(fix_names)
    row = new_result(case, backend_name, fix_names)
    meta = cache.load_meta(cache_key(case.case_id, backend_name, fix_names)) if cache else None
    if meta:
        _static(row, meta)
    row.update(status=Status.CRASH.value, message=message)
    return row
