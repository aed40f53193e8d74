"""A cell = (case, lane) through the stages, ending in one CellResult.

``prepare`` runs the static stages (prepare.py); ``static_result`` turns a Prepared into the
record as far as those took it and says whether it is final; ``execute`` runs the lowered
program and judges it. Every lowered program executes where its runtime is present: a
CONTRACT_VIOLATION is only a prediction (kept in ``predicted``), and a partly delegated program
(NOT_DELEGATED: the conv itself stayed outside) still runs delegate code, so a runtime failure
or a wrong value there is that status; if it runs within tolerance it stays NOT_DELEGATED.
"""

from __future__ import annotations

import time

from harness.lane import Lane
from harness.record import METRIC_COLUMNS, CellResult
from harness.runtimes import tree
from harness.spec import ConvCase
from harness.stages import backends, culprit, fixes
from harness.stages.cache import Cache
from harness.stages.compare import compare
from harness.stages.execute import RuntimeFailure, execute_pte
from harness.stages.prepare import Prepared, prepare_case
from harness.status import Status

STATIC_FIELDS = ("status", "phase", "message", "delegated_ops", "undelegated_ops",
                 "contract_violations", "pte_size_kb", "quantize_time_s", "lower_time_s",
                 "reused_from")


def new_result(case: ConvCase, lane: Lane) -> CellResult:
    at = tree.current()  # a run at an ExecuTorch tree: what the verdict rests on
    return CellResult(case=case, backend=lane.backend_column, fixes=lane.fixes_column,
                      rests_on=at.rests_on(lane.backend_column) if at else "")


def unfaithful(prepared: Prepared) -> str:
    """At an ExecuTorch tree (runtimes/tree.py): why executing this lane's program would not give
    the tree's verdict ("" when it would, and always on the wheel itself)."""
    at = tree.current()
    if at is None:
        return ""
    patched = any(fixes.get(f).runtime_patch for f in prepared.lane.fixes)
    return at.unfaithful(prepared.lane.backend_column, prepared.undelegated_ops, patched)


def blame(row: CellResult, prepared: Prepared | None = None, log: str = "") -> CellResult:
    """Name the culprit of a cell that is not PASS (culprit.py): ``component``, and what the
    runtime printed (``runtime_log``, its tail; the whole text into the evidence)."""
    if row.status in (None, Status.PASS.value):
        row.component, row.runtime_log = "", ""
        return row
    if log:
        import numpy as np

        row.runtime_log = culprit.tail(log)
        row.evidence = {**(row.evidence or {}), "runtime_log": np.array(log)}
    row.component = culprit.component(
        status=row.status, backend=row.backend, phase=row.phase, message=row.message,
        traceback=prepared.traceback if prepared is not None else "", log=log or row.runtime_log,
        reached=row.reached, code_path=prepared.code_path if prepared is not None else (),
        delegated_ops=row.delegated_ops, undelegated_ops=row.undelegated_ops,
        contract_violations=row.contract_violations)
    if row.status == Status.MISMATCH.value:  # the code that computed the wrong output
        row.message = culprit.with_culprit(row.message, row.component)
    return row


def prepare(case: ConvCase, lane: Lane) -> Prepared:
    """One lane's static stages alone (a run prepares all lanes of a case together)."""
    return prepare_case(case, [lane])[lane]


def static_result(case: ConvCase, prepared: Prepared) -> tuple[CellResult, bool]:
    """The cell's record from its static stages, and whether it is final (nothing to execute):
    a verdict execution cannot change (INVALID, LOWER_ERROR), or no runtime to execute on (then
    a predicted violation stays CONTRACT_VIOLATION, a clean program is NO_RUNTIME and a partly
    delegated one stays NOT_DELEGATED, its message saying it was not executed)."""
    row = new_result(case, prepared.lane)
    row.update(**{n: getattr(prepared, n) for n in STATIC_FIELDS})
    row.cell_time_s = prepared.seconds
    if prepared.status is not None and (Status(prepared.status).static_final
                                        or prepared.pte is None):  # nothing lowered to execute
        return blame(row, prepared), True
    row.predicted = Status.CONTRACT_VIOLATION.value if prepared.contract_violations else "clean"
    backend = backends.get(prepared.lane.backend)
    not_the_trees = unfaithful(prepared)
    if backend.runtime_available() and not not_the_trees:
        row.update(status=None, message="")
        return row, False
    missing = not_the_trees or f"{backend.runtime_name} is not registered in the installed runtime"
    if prepared.status is None:
        row.update(status=Status.NO_RUNTIME.value, phase="execute", message=missing)
    elif prepared.status == Status.NOT_DELEGATED.value:  # what lowering saw; never executed
        row.update(message=f"{prepared.message} (not executed: {missing})")
    return blame(row, prepared), True


def execute(case: ConvCase, prepared: Prepared, log_path: str | None = None) -> CellResult:
    """Run the prepared program and judge it (in a worker process: a native crash costs this
    cell only). A final static record comes back as it is. What the runtime prints while the
    program loads and executes goes to ``log_path`` (the worker's per-cell file, which its
    parent reads if the process dies; a temporary file when None) and into the record."""
    t0 = time.perf_counter()
    row, final = static_result(case, prepared)
    if final:
        return row
    backend = backends.get(prepared.lane.backend)
    refs = prepared.refs
    row.phase = "execute"
    try:
        done = execute_pte(prepared.pte, refs.inputs, observe=backend.observes_dispatch,
                           log_path=log_path, sizes=refs.sizes)
    except RuntimeFailure as e:
        # the runtime's own reason (the failed check, the operator), not a bare error code
        row.update(status=Status.RUNTIME_ERROR.value, message=culprit.explain(str(e), e.log))
        return _timed(blame(row, prepared, e.log), prepared, t0)
    outputs, row.run_time_s = done.outputs, done.seconds
    # coverage: what the payload names (XNNPACK) and what the runtime dispatched (Vulkan)
    row.reached = sorted(set(prepared.code_path) | set(done.dispatched))
    if refs.sizes:  # a dynamic case: judged size by size, its worst reported (sizes.py)
        from harness.stages.sizes import judge
        row = judge(case, prepared, row, done.sized, backend)
        if row.status in (Status.RUNTIME_ERROR.value, Status.CRASH.value):
            row.message = culprit.explain(row.message, done.log)  # the runtime's own reason
        return _timed(blame(row, prepared, done.log), prepared, t0)
    row.phase = "compare"
    verdict = compare(outputs[0], refs.ref, float_ref=refs.float_ref, eager_ref=refs.eager_ref,
                      bound=refs.bound,
                      out_scale=prepared.out_scale, steps=backend.quant_tolerance_steps,
                      groups=case.groups)
    row.update(**{c: verdict.metrics.get(c) for c in METRIC_COLUMNS})
    row.error_pattern = verdict.metrics.get("error_pattern") or ""
    if not verdict.ok:
        row.update(status=Status.MISMATCH.value, message=verdict.message)
        row.evidence = verdict.evidence  # to the run folder (runner), for the finding's picture
    elif prepared.status == Status.NOT_DELEGATED.value:  # ran right, but the conv was outside
        row.update(status=Status.NOT_DELEGATED.value, message=prepared.message)
    else:
        row.update(status=Status.PASS.value, message="")
    return _timed(blame(row, prepared, done.log), prepared, t0)


def _timed(row: CellResult, prepared: Prepared, t0: float) -> CellResult:
    row.cell_time_s = round(prepared.seconds + time.perf_counter() - t0, 3)
    return row


def crash_result(case: ConvCase, lane: Lane, message: str,
                 prepared: Prepared | None = None, log: str = "") -> CellResult:
    """The record of a cell whose worker died; what its static stages found is kept, and
    ``log``: what the runtime printed for the cell before it died (its per-cell file)."""
    row = static_result(case, prepared)[0] if prepared is not None else new_result(case, lane)
    row.update(status=Status.CRASH.value, message=message, phase="execute")
    row.evidence = None
    return blame(row, prepared, log)


def prepared_or_cached(case: ConvCase, lane: Lane, cache: Cache | None) -> tuple[Prepared, bool]:
    """The lane's Prepared from the cache, else prepared now (and stored): (prepared, cached)."""
    found = cache.load(case.case_id, lane) if cache else None
    if found is not None:
        return found, True
    prepared = prepare(case, lane)
    if cache and prepared.status != Status.INVALID.value:
        cache.store(case.case_id, prepared)
    return prepared, False


def run_cell(case: ConvCase, backend: str, fixes=(), cache: Cache | None = None) -> CellResult:
    """One cell in this process, start to end (tests, repro, the shrinker's tries)."""
    t0 = time.perf_counter()
    lane = Lane(backend, tuple(fixes))
    prepared, cached = prepared_or_cached(case, lane, cache)
    row = execute(case, prepared)
    row.cached = cached
    row.cell_time_s = round(time.perf_counter() - t0, 3)
    return row
