"""One minimal case per finding, found by Hypothesis's own shrinker (``hypothesis.find``).

The search space is the finding's representative case and its simpler neighbours, field by
field: each field is drawn from "simpler values first, then the representative's value" (the
representative's value repeated, so random draws stay near the failure and the shrinker, which
moves towards the front of the list, moves towards the simplest conv). The predicate runs the
cell for real in a kept worker process (an abort is a CRASH of that try, not of the run) and
holds when the cell lands in the same finding. Each finding gets a time budget; past it every
try answers False, which ends the search with the smallest failing case seen so far.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, Phase, assume, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from harness.stages.build import eager_check
from harness.results.findings import Finding, finding_id
from harness.lane import Lane
from harness.spec import CaseError, ConvCase
from harness.generation.strategies import spatial

NEAR = 3  # weight of the representative's own value against each simpler one


@dataclass
class Shrunk:
    finding: str
    case: ConvCase | None
    seconds: float
    tries: int
    note: str = ""


def _choices(simpler: list, original) -> st.SearchStrategy:
    options = [v for i, v in enumerate(simpler) if v != original and v not in simpler[:i]]
    return st.sampled_from(options + [original] * NEAR)


@st.composite
def neighbours(draw, case: ConvCase):
    """``case`` and simpler versions of it (fewer channels, smaller kernel/stride/dilation,
    padding 0, no bias, 1d, fp32, zeros padding_mode, no output_padding, batch 1), spelled the
    same way wherever the spelling is kept."""
    dim = draw(_choices([1], case.dim)) if not case.transposed else case.dim
    transposed = draw(_choices([False], case.transposed))
    groups = draw(_choices([1], case.groups))
    per_in = draw(_choices([1, 4], case.in_channels // case.groups))
    per_out = draw(_choices([1, 4], case.out_channels // case.groups))
    depthwise = case.groups > 1 and case.groups == case.in_channels
    in_ch = groups if depthwise and groups > 1 else groups * per_in
    out_ch = groups * per_out

    def per_dim(value, simpler):
        if isinstance(value, str):
            return value
        if isinstance(value, tuple):  # simpler ints first, then the same spelling made simpler
            simpler = simpler + [tuple([x] * len(value)) for x in simpler]
        v = draw(_choices(simpler, value))
        if isinstance(v, (tuple, list)) and len(v) > 1:
            return tuple(v[:dim]) if len(v) >= dim else v * dim
        return v

    kernel = per_dim(case.kernel_size, [1, 3])
    if isinstance(kernel, (tuple, list)) and len(kernel) == 1:
        kernel = kernel[0]  # a length-1 kernel_size is a different conv, never a spelling
    padding = case.padding if isinstance(case.padding, str) else per_dim(case.padding, [0])
    stride = 1 if padding == "same" else per_dim(case.stride, [1])
    dilation = per_dim(case.dilation, [1])
    k, d = spatial(kernel, dim), spatial(dilation, dim)
    sizes = []
    for i in range(dim):
        extent = d[i] * (k[i] - 1) + 1
        original = case.input_shape[2 + i] if i + 2 < len(case.input_shape) else extent
        sizes.append(draw(_choices([extent, extent + 2], max(original, 1))))
    quant = draw(_choices([None], case.quant)) if case.quant else None
    # The later fields towards their defaults too (an illegal mix is a CaseError: not drawn).
    mode = draw(_choices(["zeros"], case.padding_mode))
    output_padding = per_dim(case.output_padding, [0]) if transposed else 0
    batch = draw(_choices([1], case.input_shape[0]))
    # The context towards none (a pad of another rank is a CaseError: not drawn).
    prologue = draw(_choices([None], case.prologue)) if case.prologue else None
    epilogue = draw(_choices([()], case.epilogue)) if case.epilogue else ()
    weights = draw(_choices(["constant"], case.weights))
    try:
        return ConvCase(dim=dim, transposed=transposed, in_channels=in_ch, out_channels=out_ch,
                        kernel_size=kernel, stride=stride, padding=padding, padding_mode=mode,
                        dilation=dilation, output_padding=output_padding, groups=groups,
                        bias=draw(_choices([False], case.bias)),
                        input_shape=(batch, in_ch, *sizes),
                        dtype=draw(_choices(["float32"], case.dtype)), quant=quant,
                        prologue=prologue, epilogue=epilogue, weights=weights)
    except CaseError:
        assume(False)


def shrink(finding: Finding, budget_s: float, call, cache_dir: str | None) -> Shrunk:
    """``call`` is ``workers.one_worker``'s: it runs ``runner.execute_work`` on a cell task (the
    cell prepares in the worker, from the cache where it is) in a kept worker."""
    from harness.run import runner

    example = finding.example
    backend, fixes = example["backend"], example["fixes"]
    lane = Lane.of(backend, fixes)
    start, tries = time.monotonic(), 0
    if lane.device:
        return Shrunk(finding.id, None, 0.0, 0, f"{backend} ran on another machine")

    seen: dict[str, bool] = {}  # answers are replayed: past the budget, known cases keep theirs

    def same_finding(case: ConvCase) -> bool:
        nonlocal tries
        if case.case_id in seen or time.monotonic() - start > budget_s:
            return seen.get(case.case_id, False)
        tries += 1
        task = runner.CellTask(case, lane, None, cache_dir=cache_dir)
        result, death = call(runner.execute_work, task)
        status, message = ("CRASH", death) if result is None else (result.status, result.message)
        pattern = "" if result is None else result.error_pattern
        seen[case.case_id] = finding_id(backend, status, message, pattern) == finding.id
        return seen[case.case_id]

    base = ConvCase.from_dict(example["case"])
    try:
        found = find(neighbours(base).filter(lambda c: not eager_check(c)), same_finding,
                     settings=settings(database=None, deadline=None, max_examples=200,
                                       phases=[Phase.generate, Phase.shrink],
                                       suppress_health_check=list(HealthCheck)))
    except NoSuchExample:
        return Shrunk(finding.id, None, round(time.monotonic() - start, 1), tries,
                      "no failing neighbour found within the budget")
    return Shrunk(finding.id, found, round(time.monotonic() - start, 1), tries)


def shrink_all(run_dir: Path, df, budget_s: float, vulkan_runtime: str | None,
               cache_dir: str | None, timeout: float = 300.0) -> dict:
    """Shrink one representative per finding of a finished run; -> shrunk.json's content.
    Each minimal case gets its own repro script (repro/minimal-<finding>.py)."""
    from harness.results import repro
    from harness.run import workers
    from harness.results.findings import find
    from harness.runtimes.load import load

    found = find(df, run_dir)
    out: dict = {}
    logs = str(run_dir / "logs" / "shrink")
    with workers.one_worker(timeout=timeout, log_dir=logs, on_start=load,
                            on_start_args=(vulkan_runtime,)) as call:
        for f in found:
            r = shrink(f, budget_s, call, cache_dir)
            entry = {"seconds": r.seconds, "tries": r.tries, "note": r.note,
                     "lane": Lane.of(f.example["backend"], f.example["fixes"]).name}
            if r.case is not None:
                script = run_dir / "repro" / f"minimal-{f.id}.py"
                script.parent.mkdir(exist_ok=True)
                script.write_text(repro.script(r.case, f.example["backend"], f.example["fixes"],
                                               f.status, f.example["message"], vulkan_runtime))
                entry.update(case=r.case.to_dict(), case_id=r.case.case_id,
                             repro=f"repro/{script.name}")
            out[f.id] = entry
            print(f"shrink {f.id} ({f.status}, {f.count} cells): "
                  f"{entry.get('case_id') or r.note} in {r.seconds} s, {r.tries} tries")
    (run_dir / "shrunk.json").write_text(json.dumps(out, indent=1))
    return out
