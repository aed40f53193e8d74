"""One cell = (case, backend, fix set) through every stage, ending in one matrix row.

Stages up to the static checks are pure functions of the cell and the installed versions, so
their outcome (including the .pte and the eager references) is cached; execution and comparison
are redone every time, they are cheap and they are what a runtime change would alter.
"""

from __future__ import annotations

import time

from . import backends
from .cache import Cache, key as cache_key
from .compare import compare
from .execute import RuntimeFailure, run_pte
from .prepare import prepare_case
from .record import METRIC_COLUMNS, CellResult
from .spec import ConvCase
from .status import STATIC_FINAL, Status


def new_result(case: ConvCase, backend: str, fix_names: list[str]) -> CellResult:
    return CellResult(case=case, backend=backend, fixes=",".join(fix_names))


def prepare(case: ConvCase, backend_name: str, fix_names: list[str]) -> dict:
    """One lane's static stages (quantize, export, lower, checks) -> its cache entry."""
    fix_names = sorted(fix_names)
    return prepare_case(case, [(backend_name, fix_names)])[(backend_name, ",".join(fix_names))]


def prepare_lanes(case: ConvCase, lanes: list, cache: Cache | None) -> dict:
    """The static stages of several lanes of one case, per-case work once (prepare.py); every
    cacheable entry is stored. -> {(backend, fixes): (row, final)}: a final row needs no
    execution; the others carry the static stages' seconds (cell_time_s) for execution to add."""
    lanes = [(b, sorted(f)) for b, f in lanes]
    entries = prepare_case(case, lanes)
    rows = {}
    for (backend_name, fixes), entry in entries.items():
        fix_names = [f for f in fixes.split(",") if f]
        if cache and entry["status"] != Status.INVALID.value:
            cache.store(cache_key(case.case_id, backend_name, fix_names), entry)
        row = new_result(case, backend_name, fix_names)
        _static(row, entry)
        final = _finished_without_runtime(row, backends.get(backend_name))
        row.cell_time_s = round((entry.get("lower_time_s") or 0)
                                + entry.get("prepare_share_s", 0), 3)
        rows[(backend_name, fixes)] = (row, final)
    return rows


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
        entry = prepare(case, backend_name, fix_names)
        if cache and entry["status"] != Status.INVALID.value:
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
                      eager_ref=refs.get("eager_ref"),
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
