"""One minimal case per finding, found by Hypothesis's own shrinker (``hypothesis.find``).

The search space is the finding's representative case and its simpler neighbours, field by
field: each field is drawn from "simpler values first, then the representative's value" (the
representative's value repeated, so random draws stay near the failure and the shrinker, which
moves towards the front of the list, moves towards the simplest conv). The predicate runs the
cell for real in a kept worker process (an abort is a CRASH of that try, not of the run) and
holds when the cell lands in the same finding. Each finding gets a time budget; past it every
try answers False, which ends the search with the smallest failing case seen so far.

Tries are cheap where they can be (``Lab``): one kept worker per runtime plug-in for every
finding (the torch import, the runtime load and the lowering memo's pattern graphs paid once),
each try lowering only the lane that failed, from the cache when a case was lowered before, and
every answer memoised per (lane, case) and shared with the diagnosis (harness/run/diagnose.py).
shrunk.json says each finding's tries per minute; the run prints the total
("shrink: N tries in S s, T tries/min").
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, Phase, assume, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from harness.stages.build import eager_check
from harness.results.findings import (Finding, cell_finding_id, finding_id, lands_in, per_minute,
                                      shrink_line)
from harness.lane import Lane
from harness.spec import CaseError, ConvCase
from harness.status import Status
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
    padding 0, no bias, 1d, fp32, zeros padding_mode, no output_padding, batch 1, contiguous,
    static), spelled the same way wherever the spelling is kept."""
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
    # The layout towards contiguous and static (issue 39); kept only at the case's own rank, where
    # it means the same thing. A dynamic dimension keeps its sizes (the ones the program ran at);
    # every other dimension of each size follows the neighbour's input shape.
    same_rank = dim == case.dim
    memory_format = draw(_choices(["contiguous"], case.memory_format)) if same_rank else "contiguous"
    module_cl = draw(_choices([False], case.module_channels_last)) if same_rank else False
    dynamic = draw(_choices(["none"], case.dynamic)) if same_rank else "none"
    shape = (batch, in_ch, *sizes)
    dynamic_sizes: tuple = ()
    if dynamic != "none":
        axes = set(case.dynamic_axes())
        shape = tuple(case.input_shape[a] if a in axes else n for a, n in enumerate(shape))
        dynamic_sizes = tuple(tuple(s[a] if a in axes else n for a, n in enumerate(shape))
                              for s in case.dynamic_sizes)
    try:
        return ConvCase(dim=dim, transposed=transposed, in_channels=in_ch, out_channels=out_ch,
                        kernel_size=kernel, stride=stride, padding=padding, padding_mode=mode,
                        dilation=dilation, output_padding=output_padding, groups=groups,
                        bias=draw(_choices([False], case.bias)), input_shape=shape,
                        dtype=draw(_choices(["float32"], case.dtype)), quant=quant,
                        prologue=prologue, epilogue=epilogue, weights=weights,
                        memory_format=memory_format, module_channels_last=module_cl,
                        dynamic=dynamic, dynamic_sizes=dynamic_sizes)
    except CaseError:
        assume(False)


@dataclass(frozen=True)
class Try:
    """What one follow-up cell did: its status and the finding it landed in ("" for none)."""
    status: str
    finding: str
    component: str = ""  # the culprit (record.CellResult.component; "" when unknown)


class Lab:
    """Kept worker processes for a finished run's follow-up cells (the shrinker's tries, the
    diagnosis' variants): one per runtime plug-in the lanes execute on (a runtime-fix lane's
    patched one, runner.library_for), started when first needed, so a finding's tries pay the
    torch import, the runtime load and the lowering memo's first build (stages/lowering_memo.py)
    once. A try lowers only the lane asked about (its cell prepares alone, from the cache when
    the run or an earlier try stored it). Every answer is kept per (lane, case id), starting
    with the run's own cells (``df``): the shrinker and the diagnosis share them, and a case
    asked twice (or a cell the run already has, e.g. a corpus control one step away) runs
    once."""

    def __init__(self, run_dir: Path, config, df=None, log_name: str = "followup"):
        self.config = config
        self.log_dir = str(run_dir / "logs" / log_name)
        self.tries = 0  # cells actually run
        self.seconds = 0.0  # ... and the time they took (worker starts included)
        self.reused = 0  # answers given again without running a cell
        self._answers: dict[tuple[str, str], Try] = {}
        self._calls: dict = {}
        self._stack = contextlib.ExitStack()
        if df is not None:  # the run's own cells are answers already: a try that asks runs none
            for row in df.to_dict(orient="records"):
                lane = Lane.of(row["backend"], row["fixes"])
                self._answers[(lane.name, row["case_id"])] = Try(
                    row["status"], cell_finding_id(row) or "", str(row.get("component") or ""))

    def __enter__(self) -> Lab:
        return self

    def __exit__(self, *exc) -> None:
        self._stack.close()

    def problem(self, lane: Lane) -> str:
        """Why the lane's cells cannot run here ("" when they can)."""
        from harness.run import runner

        if lane.device:
            return f"{lane.name} ran on another machine"
        return runner.library_for(self.config, lane)[1]

    def summary(self) -> str:
        return (f"follow-up cells: {self.tries} run in {round(self.seconds, 1)} s, "
                f"{self.reused} answer(s) reused")

    def known(self, case: ConvCase, lane: Lane) -> Try | None:
        return self._answers.get((lane.name, case.case_id))

    def run(self, case: ConvCase, lane: Lane) -> Try:
        """The case's cell in ``lane``, in the lane's kept worker (an abort is a CRASH of this
        try, not of the run); memoised."""
        from harness.run import runner, workers

        key = (lane.name, case.case_id)
        if key in self._answers:
            self.reused += 1
            return self._answers[key]
        library = runner.library_for(self.config, lane)[0]
        t0 = time.monotonic()
        if library not in self._calls:
            self._calls[library] = self._stack.enter_context(workers.one_worker(
                timeout=self.config.timeout, log_dir=self.log_dir, on_start=runner.load_runtime,
                on_start_args=(library,)))
        task = runner.CellTask(case, lane, None, cache_dir=self.config.cache_dir)
        result, death = self._calls[library](runner.execute_work, task)
        if result is None:  # worded as the run words a crash: what killed it, what it printed
            said = workers.crash_output(self.log_dir, task.tag)
            message = death + (f"; it printed: {said}" if said else "")
            status, component = Status.CRASH.value, ""
            fid = finding_id(lane.backend_column, status, message)
        else:
            status, component = result.status, result.component or ""
            fid = finding_id(result.backend, result.status, result.message, result.error_pattern)
        self.tries += 1
        self.seconds += time.monotonic() - t0
        self._answers[key] = Try(status, fid or "", component)
        return self._answers[key]


def shrink(finding: Finding, budget_s: float, lab: Lab) -> Shrunk:
    """The smallest neighbour of the finding's representative that lands in the same finding,
    each try a real cell in the finding's lane (``lab``)."""
    example = finding.example
    lane = Lane.of(example["backend"], example["fixes"])
    start, tries = time.monotonic(), 0
    problem = lab.problem(lane)
    if problem:
        return Shrunk(finding.id, None, 0.0, 0, problem)

    seen: dict[str, bool] = {}  # answers are replayed: past the budget, known cases keep theirs

    def same_finding(case: ConvCase) -> bool:
        nonlocal tries
        if case.case_id in seen or time.monotonic() - start > budget_s:
            return seen.get(case.case_id, False)
        if lab.known(case, lane) is None:
            tries += 1
        got = lab.run(case, lane)
        seen[case.case_id] = lands_in(got.finding, finding, got.component)
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


def from_baseline(finding: Finding, stored: dict, lab: Lab) -> Shrunk | None:
    """The baseline's minimal case of a known finding, when it still lands in the finding here
    (one cell, in the finding's lane); None when it does not (or cannot run here): shrink anew."""
    lane = Lane.of(finding.example["backend"], finding.example["fixes"])
    try:
        case = ConvCase.from_dict(stored)
    except CaseError:
        return None
    if lab.problem(lane):
        return None
    start, ran = time.monotonic(), lab.known(case, lane) is None
    got = lab.run(case, lane)
    if not lands_in(got.finding, finding, got.component):
        return None
    return Shrunk(finding.id, case, round(time.monotonic() - start, 1), int(ran),
                  "the baseline's minimal case, still in this finding: not shrunk again")


def shrink_all(run_dir: Path, df, budget_s: float, config, lab: Lab | None = None,
               known: dict | None = None) -> dict:
    """Shrink one representative per finding of a finished run; -> shrunk.json's content.
    Each minimal case gets its own repro script (repro/minimal-<finding>.py); each entry
    says its tries per minute, and the last line printed says them for the whole run.
    ``known``: the baseline's minimal cases by finding id (baseline.Baseline.minimal): a known
    finding whose minimal case still lands in it keeps that case (one cell, not a search)."""
    from harness.results import findings, repro
    from harness.run import runner

    found = findings.find(df, run_dir)
    out: dict = {}
    total_tries, total_s = 0, 0.0
    with contextlib.ExitStack() as stack:
        if lab is None:
            lab = stack.enter_context(Lab(run_dir, config, df))
        for f in found:
            r = (from_baseline(f, known[f.id], lab) if f.id in (known or {}) else None) \
                or shrink(f, budget_s, lab)
            lane = Lane.of(f.example["backend"], f.example["fixes"])
            entry = {"seconds": r.seconds, "tries": r.tries,
                     "tries_per_min": per_minute(r.tries, r.seconds), "note": r.note,
                     "lane": lane.name}
            total_tries, total_s = total_tries + r.tries, total_s + r.seconds
            if r.case is not None:
                script = run_dir / "repro" / f"minimal-{f.id}.py"
                script.parent.mkdir(exist_ok=True)
                library = None if lane.device else runner.library_for(config, lane)[0]
                script.write_text(repro.script(r.case, f.example["backend"], f.example["fixes"],
                                               f.status, f.example["message"], library))
                entry.update(case=r.case.to_dict(), case_id=r.case.case_id,
                             repro=f"repro/{script.name}")
            out[f.id] = entry
            print(f"shrink {f.id} ({f.status}, {f.count} cells): "
                  f"{entry.get('case_id') or r.note} in {r.seconds} s, {r.tries} tries "
                  f"({entry['tries_per_min']} tries/min)")
    print(shrink_line(total_tries, total_s))
    (run_dir / "shrunk.json").write_text(json.dumps(out, indent=1))
    return out
