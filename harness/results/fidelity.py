"""The overlay's fidelity: a release's own wheel against a run at that release's tag laid over
the installed wheel (``harness run --executorch vX --source GITDIR``), cell by cell.

Both runs hold the same cells (same cases, same lanes). For each cell the two sides are compared
on what each step produced, from the lowering to the verdict:

- the lowering outcome: a lowering-stage verdict (INVALID, LOWER_ERROR) or how much was delegated;
- the delegated / undelegated op counts;
- the program bytes: the sha256 of program.pte that each run's cache entry holds (the run header
  names its cache folder and the versions its keys were made with; "" where no entry is there,
  then the bytes are not compared);
- the executed verdict, where both executed; and max|d| where both executed to the same verdict.

Every cell where anything differs is one ``Disagreement`` with a reason class (``REASONS``, most
serious first; the cell's other differing aspects beside it). ``unexecuted-at-tree`` is by design
(``EXPECTED``): a run at a tree does not execute a cell whose verdict would rest on the wheel's
native code it cannot show equal (XNNPACK, the portable kernels; docs/releases-and-bisection.md),
so only that cell's lowering outcome compares. ``compare`` -> ``Fidelity``; ``write`` ->
OUT/fidelity.{csv,md,json}.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness import versions
from harness.lane import Lane
from harness.record import CellResult
from harness.runfolder import RunFolder, atomic_write
from harness.stages import cache
from harness.status import EXECUTED, Status

# reason class -> what it means; the order is the order of seriousness (a cell's reason is its
# first differing aspect in this order).
REASONS = {
    "verdict-same-program": "both executed the same program bytes and judged them differently: "
                            "the runtimes differ (for Vulkan: the plug-in built for the wheel vs "
                            "the one built from the tag's tree)",
    "verdict-program-differs": "both executed and judged differently, and the programs differ: "
                               "the verdict follows the lowering",
    "lowering-outcome": "the lowering ended differently (a lowering-stage verdict, or delegated "
                        "vs not): the tag's Python over the installed wheel does not lower as "
                        "the release's wheel does",
    "delegation": "same lowering outcome, different delegated / undelegated op counts",
    "program-bytes": "same ops delegated, different program bytes (.pte sha256)",
    "no-plugin": "one side had no Vulkan plug-in to execute on (NO_RUNTIME for a build reason)",
    "unexecuted-on-wheel": "the release's wheel did not execute the cell, the run at the tag did",
    "unexecuted-at-tree": "the run at the tag does not execute a verdict that would "
                          "rest on the installed wheel's native code it cannot show equal "
                          "(XNNPACK, the portable kernels, a moved schema); the lowering "
                          "outcome still compares",
    "numbers": "same executed verdict, different max|d|",
}
EXPECTED = frozenset({"unexecuted-at-tree"})
STATIC = frozenset({Status.INVALID.value, Status.LOWER_ERROR.value})
# what a NOT_DELEGATED cell that nothing executed says (stages/cell.static_result)
NOT_EXECUTED = "(not executed: "
CSV_COLUMNS = ("case_id", "backend", "fixes", "reason", "expected", "aspects", "wheel_status",
               "tree_status", "wheel_delegation", "tree_delegation", "wheel_ops", "tree_ops",
               "wheel_program", "tree_program", "wheel_max_abs", "tree_max_abs",
               "wheel_message", "tree_message")


class FidelityError(ValueError):
    """Bad input: not a run folder, not the pair of runs this compares, different cells. One line."""


@dataclass(frozen=True)
class Disagreement:
    """One cell where the release's wheel and the run at its tag differ."""
    case_id: str
    backend: str
    fixes: str
    reason: str                 # a key of REASONS: the most serious differing aspect
    aspects: tuple = ()         # every differing aspect (reason classes), the reason first
    wheel_status: str = ""
    tree_status: str = ""
    wheel_delegation: str = ""
    tree_delegation: str = ""
    wheel_ops: str = ""         # "delegated: op xN; outside: op xN"
    tree_ops: str = ""
    wheel_program: str = ""     # the first 12 hex of the program's sha256, "" unknown
    tree_program: str = ""
    wheel_max_abs: float | None = None
    tree_max_abs: float | None = None
    wheel_message: str = ""
    tree_message: str = ""

    @property
    def expected(self) -> bool:
        return self.reason in EXPECTED

    def to_row(self) -> dict:
        row = asdict(self)
        row.update(aspects=",".join(self.aspects), expected=self.expected)
        return {c: row[c] for c in CSV_COLUMNS}


@dataclass
class Fidelity:
    """The comparison of two runs: who they are, how much compared, every disagreement."""
    wheel: str                  # "executorch 1.4.1"
    tree: str                   # "executorch e4d02f41f790 over 1.5.1"
    cells: int = 0
    agree: int = 0
    programs_compared: int = 0  # cells whose program bytes are known on both sides
    programs_equal: int = 0
    executed_both: int = 0      # cells both sides executed (their verdicts compared)
    verdicts_equal: int = 0
    disagreements: list = field(default_factory=list)

    def counts(self) -> dict:
        got = Counter(d.reason for d in self.disagreements)
        return {reason: got[reason] for reason in REASONS if got[reason]}

    @property
    def unexpected(self) -> list:
        return [d for d in self.disagreements if not d.expected]

    def summary_line(self) -> str:
        by = ", ".join(f"{k} {v}" for k, v in self.counts().items()) or "none"
        return (f"{self.cells} cells: {self.agree} agree, {len(self.disagreements)} differ "
                f"({by}); programs equal {self.programs_equal}/{self.programs_compared}, "
                f"executed verdicts equal {self.verdicts_equal}/{self.executed_both}")

    def to_dict(self) -> dict:
        out = {k: v for k, v in asdict(self).items() if k != "disagreements"}
        out.update(counts=self.counts(), reasons={k: REASONS[k] for k in self.counts()},
                   disagreements=[d.to_row() for d in self.disagreements])
        return out


# --- reading the two runs -------------------------------------------------------------------------
def read_run(path) -> tuple[RunFolder, list[CellResult]]:
    run = RunFolder(path)
    try:
        run.header()
        cells = run.cells()
    except ValueError as e:  # RunFolderError: one line naming the file
        raise FidelityError(str(e).splitlines()[0]) from None
    return run, cells


def program_digests(run: RunFolder, cells: list[CellResult], pipelines=()) -> dict:
    """cell key -> sha256 of the program its run lowered, read from the run's cache entry (the
    header's cache folder, keys made with the header's versions); "" where no entry holds one.

    A cache key holds the stages' digest (versions.pipeline_digest) of the process that lowered
    the cell. The header has the run's parent's; a worker started after the harness's own source
    changed under a running run (a shared checkout) keyed its entries with another one: the
    entry is looked up under the header's digest, then under each of ``pipelines`` and this
    process's own."""
    header = run.header()
    root = Path(header.cache_dir) if header.cache_dir else cache.default_dir()
    digests = list(dict.fromkeys(
        [header.versions.get("pipeline", ""), *pipelines, versions.pipeline_digest()]))
    out = {}
    for c in cells:
        lane, out[c.key] = Lane.of(c.backend, c.fixes), ""
        for digest in digests:
            k = cache.key(c.case_id, lane, {**header.versions, "pipeline": digest})
            try:
                meta = json.loads((root / k[:2] / k / "meta.json").read_text())
            except (OSError, ValueError):
                continue
            out[c.key] = str((meta.get(cache.CHECKS) or {}).get("program.pte", ""))
            break
    return out


def check_pair(wheel_run: RunFolder, wheel_cells: list, tree_run: RunFolder,
               tree_cells: list) -> None:
    """FidelityError (one line) unless WHEEL is a run on a wheel, TREE a run at a tree, and both
    hold the same cells."""
    if wheel_run.header().executorch_tree:
        raise FidelityError(f"{wheel_run.path}: a run at an ExecuTorch tree; the first run must "
                            f"be on a release's own wheel")
    if not tree_run.header().executorch_tree:
        raise FidelityError(f"{tree_run.path}: not a run at an ExecuTorch tree (run.json has no "
                            f"executorch_tree); the second run must be one (--executorch REF)")
    cases = [{c.case_id for c in cells} for cells in (wheel_cells, tree_cells)]
    if cases[0] != cases[1]:
        only = [sorted(cases[0] - cases[1]), sorted(cases[1] - cases[0])]
        raise FidelityError(
            f"the two runs have different case sets: {len(only[0])} only in {wheel_run.path}"
            f"{' (' + only[0][0] + ', ...)' if only[0] else ''}, {len(only[1])} only in "
            f"{tree_run.path}{' (' + only[1][0] + ', ...)' if only[1] else ''}")
    keys = [{c.key for c in cells} for cells in (wheel_cells, tree_cells)]
    if keys[0] != keys[1]:
        lanes = [sorted({f"{b}{'+' + f if f else ''}" for _, b, f in k}) for k in keys]
        raise FidelityError(f"the two runs have different lanes: {', '.join(lanes[0])} in "
                            f"{wheel_run.path}, {', '.join(lanes[1])} in {tree_run.path}")


# --- comparing ------------------------------------------------------------------------------------
def ops_text(cell: CellResult) -> str:
    def part(ops: dict) -> str:
        return ", ".join(f"{k} x{v}" for k, v in sorted(ops.items())) or "-"

    return f"delegated: {part(cell.delegated_ops)}; outside: {part(cell.undelegated_ops)}"


def lowering_outcome(cell: CellResult) -> str:
    """What the lowering ended in: a lowering-stage verdict, or how much it delegated."""
    if cell.status in STATIC:
        return str(cell.status)
    return f"lowered ({cell.delegation or '?'})"


def executed(cell: CellResult) -> bool:
    """The cell's program ran. NOT_DELEGATED: it ran within tolerance, the conv outside -- unless
    nothing could run it (stages/cell.static_result keeps what lowering saw and says so)."""
    if cell.status == Status.NOT_DELEGATED.value:
        return NOT_EXECUTED not in (cell.message or "")
    return cell.status in {s.value for s in EXECUTED}


def no_plugin(cell: CellResult) -> bool:
    return cell.status == Status.NO_RUNTIME.value and cell.backend.split("@")[0] == "vulkan" \
        and "plug-in" in (cell.message or "")


def close(a, b) -> bool:
    if a is None or b is None:
        return (a is None) == (b is None)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)


def aspects(wheel: CellResult, tree: CellResult, wheel_program: str, tree_program: str) -> list:
    """The reason classes of every aspect on which the two sides of one cell differ, most
    serious first ([] where they agree)."""
    found = set()
    lowered_same = lowering_outcome(wheel) == lowering_outcome(tree)
    if not lowered_same:
        found.add("lowering-outcome")
    elif (wheel.delegated_ops, wheel.undelegated_ops) != (tree.delegated_ops, tree.undelegated_ops):
        found.add("delegation")
    programs_differ = bool(wheel_program and tree_program and wheel_program != tree_program)
    if programs_differ and lowered_same:
        found.add("program-bytes")
    ran = executed(wheel), executed(tree)
    if lowered_same and wheel.status not in STATIC:
        if all(ran):
            if wheel.status != tree.status:
                found.add("verdict-program-differs" if programs_differ or not wheel_program
                          or not tree_program else "verdict-same-program")
            elif not close(wheel.max_abs_error, tree.max_abs_error):
                found.add("numbers")
        elif no_plugin(wheel) != no_plugin(tree):
            found.add("no-plugin")
        elif ran[0]:
            found.add("unexecuted-at-tree")
        elif ran[1]:
            found.add("unexecuted-on-wheel")
        elif wheel.status != tree.status:  # neither ran: the contract's prediction moved
            found.add("lowering-outcome")
    return [r for r in REASONS if r in found]


def compare(wheel_dir, tree_dir) -> Fidelity:
    """WHEEL_DIR (a run on a release's own wheel) against TREE_DIR (a run at that release's tag
    over the installed wheel). FidelityError (one line) for bad input."""
    wheel_run, wheel_cells = read_run(wheel_dir)
    tree_run, tree_cells = read_run(tree_dir)
    check_pair(wheel_run, wheel_cells, tree_run, tree_cells)
    pipelines = [r.header().versions.get("pipeline", "") for r in (wheel_run, tree_run)]
    wheel_programs = program_digests(wheel_run, wheel_cells, pipelines)
    tree_programs = program_digests(tree_run, tree_cells, pipelines)
    out = Fidelity(wheel=wheel_run.header().executorch_label,
                   tree=tree_run.header().executorch_label, cells=len(wheel_cells))
    by_key = {c.key: c for c in tree_cells}
    for w in wheel_cells:
        t = by_key[w.key]
        wp, tp = wheel_programs[w.key], tree_programs[w.key]
        if wp and tp:
            out.programs_compared += 1
            out.programs_equal += wp == tp
        if executed(w) and executed(t):
            out.executed_both += 1
            out.verdicts_equal += w.status == t.status
        found = aspects(w, t, wp, tp)
        if not found:
            out.agree += 1
            continue
        out.disagreements.append(Disagreement(
            w.case_id, w.backend, w.fixes, found[0], tuple(found), str(w.status), str(t.status),
            w.delegation, t.delegation, ops_text(w), ops_text(t), wp[:12], tp[:12],
            w.max_abs_error, t.max_abs_error, first_line(w.message), first_line(t.message)))
    order = {r: i for i, r in enumerate(REASONS)}
    out.disagreements.sort(key=lambda d: (order[d.reason], d.backend, d.case_id, d.fixes))
    return out


def first_line(text) -> str:
    return str(text or "").strip().splitlines()[0][:300] if str(text or "").strip() else ""


# --- writing --------------------------------------------------------------------------------------
def markdown(result: Fidelity) -> str:
    lines = [f"# Fidelity of the overlay: {result.tree} vs {result.wheel}", "",
             result.summary_line() + ".", "",
             "| reason | cells | by design | what it means | e.g. |", "|---|---|---|---|---|"]
    for reason, n in result.counts().items():
        first = next(d for d in result.disagreements if d.reason == reason)
        example = (f"`{first.case_id}` {first.backend}{'+' + first.fixes if first.fixes else ''}: "
                   f"{first.wheel_status} -> {first.tree_status}")
        lines.append(f"| {reason} | {n} | {'yes' if reason in EXPECTED else 'no'} | "
                     f"{cell_text(REASONS[reason])} | {example} |")
    if result.disagreements:
        lines += ["", "| cell | lane | reason | wheel | tree | wheel ops | tree ops | programs |",
                  "|---|---|---|---|---|---|---|---|"]
        for d in result.disagreements:
            lines.append(f"| `{d.case_id}` | {d.backend}{'+' + d.fixes if d.fixes else ''} | "
                         f"{','.join(d.aspects)} | {d.wheel_status} | {d.tree_status} | "
                         f"{d.wheel_ops} | {d.tree_ops} | {d.wheel_program or '?'} / "
                         f"{d.tree_program or '?'} |")
    return "\n".join(lines) + "\n"


def cell_text(text: str) -> str:
    """Text inside a markdown table cell: its pipes escaped ("max|d|" would split the row)."""
    return text.replace("|", "\\|")


def write(result: Fidelity, out: Path) -> list[Path]:
    """OUT/fidelity.csv (one row per disagreement), .md (counts by reason, the table), .json."""
    import pandas as pd

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"fidelity.{ext}" for ext in ("csv", "md", "json")]
    table = pd.DataFrame([d.to_row() for d in result.disagreements], columns=list(CSV_COLUMNS))
    atomic_write(paths[0], table.to_csv(index=False))
    atomic_write(paths[1], markdown(result))
    atomic_write(paths[2], json.dumps(result.to_dict(), indent=1) + "\n")
    return paths
