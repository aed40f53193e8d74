"""What decides each finding, by experiment (``harness run --diagnose``, ``harness diagnose DIR``).

For each finding: its representative (the minimal case ``--shrink`` found, else the finding's
example cell's case) is checked first as a control (its answer from the run or the shrinker
where they have it, else a fresh cell), then its one-step variants
(harness/generation/variants.py: each field moved to its simplest neighbour, each spelling
swapped) run as real cells in the finding's lane, in the kept workers of ``shrink.Lab`` (shared
with the shrinker: its answers are reused). A variant that does not land in the same finding
names the field it changed as a deciding parameter (results/diagnosis.py). Each finding has a
time budget; a variant started within it finishes, and the record says honestly how many of the
planned variants ran ("budget ran out after k of n variants"). Writes diagnosis.json, which
findings.find reads into each Finding (findings.md, findings.json, report.html, bug-report).
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from harness.generation.variants import one_step
from harness.lane import Lane
from harness.results import diagnosis as diagnosis_mod
from harness.results.diagnosis import Diagnosis, Variant
from harness.results.findings import Finding, lands_in
from harness.run.shrink import Lab
from harness.spec import ConvCase
from harness.stages.build import eager_check

DEFAULT_BUDGET_S = 90.0  # per finding: a dozen Vulkan variants at ~4-6 s each, a control


def representative(f: Finding) -> tuple[ConvCase, str]:
    """(the case to vary, "shrunk" | "example")."""
    if f.minimal and f.minimal.get("case"):
        return ConvCase.from_dict(f.minimal["case"]), "shrunk"
    return ConvCase.from_dict(f.example["case"]), "example"


def diagnose(f: Finding, lab: Lab, budget_s: float) -> Diagnosis:
    start = time.monotonic()
    deadline = start + budget_s
    lane = Lane.of(f.example["backend"], f.example["fixes"])
    case, source = representative(f)
    d = Diagnosis(f.id, lane.name, case.case_id, source, budget_s=budget_s)

    def done(note: str = "") -> Diagnosis:
        d.seconds, d.note = round(time.monotonic() - start, 1), note
        return d

    problem = lab.problem(lane)
    if problem:
        return done(f"not diagnosed: {problem}")
    steps = [s for s in one_step(case) if not eager_check(s.case)]  # eager rejects: not a conv
    d.planned = len(steps)
    if time.monotonic() >= deadline:
        return done(_ran_out(d))
    control = lab.run(case, lane)
    d.control, d.control_keeps = control.status, lands_in(control.finding, f, control.component)
    if not d.control_keeps:
        return done(f"the representative {case.case_id} itself no longer lands in the finding "
                    f"({control.status}{' ' + control.finding if control.finding else ''}): "
                    "no deciding parameter claimed")
    for s in steps:
        if time.monotonic() >= deadline:
            return done(_ran_out(d))
        t = lab.run(s.case, lane)
        d.variants.append(Variant(s.field, s.change, s.case.case_id, t.status, t.finding,
                                  lands_in(t.finding, f, t.component)))
    return done("" if steps else "no legal one-step variant")


def _ran_out(d: Diagnosis) -> str:
    return (f"budget ran out after {len(d.variants)} of {d.planned} variants "
            f"({d.budget_s:g} s per finding)")


def diagnose_all(run_dir: Path, df, budget_s: float, config, lab: Lab | None = None,
                 only: list[str] | None = None) -> dict[str, Diagnosis]:
    """Diagnose every finding of a finished run, or those in ``only`` (after its shrink, when
    there was one: the minimal case is the representative); writes diagnosis.json (a finding
    not diagnosed now keeps what it had)."""
    from harness.results import findings

    found = [f for f in findings.find(df, run_dir) if only is None or f.id in only]
    out: dict[str, Diagnosis] = {}
    with contextlib.ExitStack() as stack:
        if lab is None:
            lab = stack.enter_context(Lab(run_dir, config, df))
        for f in found:
            d = diagnose(f, lab, budget_s)
            out[f.id] = d
            decided = ", ".join(d.deciding) or "-"
            print(f"diagnose {f.id} ({f.status}, {f.count} cells) on {d.lane}: deciding: "
                  f"{decided} [{d.summary}]")
            for v in d.variants:
                print(f"  {v.line()}")
    diagnosis_mod.write(run_dir, out)
    return out
