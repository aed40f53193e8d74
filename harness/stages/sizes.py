"""A dynamic case (``dynamic`` != "none"): one lowered program, executed at every size it names.

The program is exported once with ``torch.export.Dim`` bounds (build.dynamic_shapes), lowered
once per lane like any other, and then the *same loaded method* runs at each of the case's
``dynamic_sizes`` in order (what a user's app does: resizing, re-planning and re-dispatching
between calls are the path under test). Each size is judged against eager PyTorch at that size,
by the same verdict as a static cell (compare.py); a size the runtime refuses (its bound, a
resize it cannot do) is that size's RUNTIME_ERROR and the next size still runs.

The cell reports its worst size (the status that got least far, ties broken by the larger
max|d|): its status, metrics and error pattern are that size's, its message names it, and
``CellResult.sizes`` keeps every size's ``{size, status, max_abs, message}``. A process that
dies at some size is the whole cell's CRASH (the worker is gone), as for a static cell.

``sized_references`` builds the per-size references where a case's references are built
(prepare.py); ``forward_sizes`` runs on the loaded program (execute.py); ``judge`` turns the
runs into the cell's record (cell.py).
"""

from __future__ import annotations

import time

import torch

from harness.spec import ConvCase
from harness.status import ORDER, Status


def sized_references(case: ConvCase, module, program_module=None) -> list[dict]:
    """Per size of a dynamic case ([] for a static one): its inputs, its eager reference (the
    quantized model's for int8, with the float output beside it; the upcast one for fp16/bf16,
    with eager's own beside it), as References holds them for the case's own size."""
    from harness.stages.build import error_bound, size_inputs, upcast_reference

    out = []
    for shape in case.dynamic_sizes:
        entry = {"size": list(shape)}
        try:
            inputs = size_inputs(case, shape)
            with torch.no_grad():
                eager = module(*inputs)
                entry.update(inputs=inputs, ref=eager, float_ref=None, eager_ref=None)
                if case.quant:
                    entry.update(ref=program_module(*inputs), float_ref=eager)
                elif eager.dtype != torch.float32:
                    entry.update(ref=upcast_reference(module, inputs, eager.dtype), eager_ref=eager)
                if not case.quant:  # judged against its error bound, as a static cell
                    entry["bound"] = error_bound(case, module, inputs)
        except Exception as e:  # eager's own verdict at this size (spec.py should prevent it)
            entry["error"] = f"{type(e).__name__}: {e}".splitlines()[0]
        out.append(entry)
    return out


def forward_sizes(program, sizes: list[dict], runtime_message) -> list[dict]:
    """Run the loaded method at every size, in order: {"outputs", "error", "seconds"} each;
    ``runtime_message(exception)`` is how execution words a runtime's error (execute.py
    passes its own). Outputs are cloned (strides kept): the runtime may hand back its own
    planned buffers, which the next call overwrites."""
    runs = []
    for entry in sizes:
        t0 = time.perf_counter()
        if "inputs" not in entry:  # eager refused this size: nothing to feed
            runs.append({"outputs": None, "error": None, "seconds": 0.0})
            continue
        try:
            outputs = [o.clone() for o in program.forward(list(entry["inputs"]))]
            runs.append({"outputs": outputs, "error": None,
                         "seconds": time.perf_counter() - t0})
        except Exception as e:  # the runtime refused this size; the next one still runs
            runs.append({"outputs": None, "error": runtime_message(e),
                         "seconds": time.perf_counter() - t0})
    return runs


def size_label(size) -> str:
    return "x".join(map(str, size))


def judge(case: ConvCase, prepared, row, runs: list[dict], backend):
    """The cell's record from its sizes: the worst size's status, metrics and pattern, every
    size in ``row.sizes``."""
    from harness.record import METRIC_COLUMNS
    from harness.stages.compare import compare

    refs = prepared.refs
    results, verdicts = [], []
    for entry, run in zip(refs.sizes, runs, strict=True):
        result = {"size": entry["size"], "status": None, "max_abs": None, "message": ""}
        verdict = None
        if "error" in entry:
            result.update(status=Status.INVALID.value, message=entry["error"])
        elif run["error"] is not None:
            result.update(status=Status.RUNTIME_ERROR.value, message=run["error"])
        else:
            verdict = compare(run["outputs"][0], entry["ref"], float_ref=entry.get("float_ref"),
                              eager_ref=entry.get("eager_ref"), bound=entry.get("bound"),
                              out_scale=prepared.out_scale,
                              steps=backend.quant_tolerance_steps, groups=case.groups)
            result.update(status=(Status.PASS if verdict.ok else Status.MISMATCH).value,
                          max_abs=verdict.metrics.get("max_abs_error"), message=verdict.message)
        results.append(result)
        verdicts.append(verdict)
    row.sizes = results
    row.run_time_s = round(sum(r["seconds"] for r in runs), 6)
    if not results:
        return row
    worst = min(range(len(results)), key=lambda i: _badness(results[i]))
    w, verdict = results[worst], verdicts[worst]
    if verdict is not None:
        row.update(**{c: verdict.metrics.get(c) for c in METRIC_COLUMNS})
        row.error_pattern = verdict.metrics.get("error_pattern") or ""
        if not verdict.ok:
            row.evidence = verdict.evidence
    counts = {}
    for r in results:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    tally = ", ".join(f"{n} {s}" for s, n in sorted(counts.items(),
                                                     key=lambda kv: _rank(kv[0])))
    status = w["status"]
    if status == Status.PASS.value:
        if prepared.status == Status.NOT_DELEGATED.value:  # ran right, the conv was outside
            row.update(status=Status.NOT_DELEGATED.value, message=prepared.message)
        else:
            row.update(status=status, message="")
        return row
    row.update(status=status, message=f"at size {size_label(w['size'])} (worst of "
                                      f"{len(results)} sizes: {tally}): {w['message']}")
    return row


def _rank(status: str) -> int:
    return [s.value for s in ORDER].index(status)


def _badness(result: dict) -> tuple:
    """Smaller is worse: the status that got least far, then the larger max|d|."""
    return _rank(result["status"]), -(result["max_abs"] or 0.0)


def worst_size(sizes: list[dict]) -> dict | None:
    """The worst entry of a row's ``sizes`` (for tables and tests)."""
    return min(sizes, key=_badness) if sizes else None
