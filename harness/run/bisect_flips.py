"""``harness bisect --run-diff A B --source GITDIR --out DIR``: every cell that flipped between two
runs at ExecuTorch commits (``harness run --executorch``), bisected to its first commit.

1. The two runs name their commits (run.json's ``executorch_tree``); B's may not be an ancestor
   of A's (name the older run first), and neither may be dirty (uncommitted changes are in no
   commit to find). Two release tags (v1.4.1 and main, v1.3.1 and v1.4.1) are on two branches:
   A's commit is not an ancestor of B's. Then each flip's cell is evaluated at their merge base
   first: with A's outcome there, the flip is B's branch's (merge base..B is bisected); with B's
   outcome already, it came from A's own branch (a fix or a regression only the release branch
   has: merge base..A is bisected, the first commit is on A's side); with neither, both branches
   moved it (one line, not bisected). Each flip says which range was bisected (``bisected``,
   ``side``).
2. ``results.diff`` lists the cells that moved (``FLIP_CHANGES``). Cells of one lane with the
   same old -> new status pair and the same culprit components (each side's) are one *flip*: one
   ``git bisect run`` on its first cell (``bisect.run``, each step ``bisect_step``), the others
   named beside it. A flip whose ends do not reproduce (an outcome the step reads differently,
   an end that cannot be evaluated faithfully) says so and is not guessed.
3. What the bisects share: a Vulkan plug-in is built once per digest of the source it compiles
   and a cell lowered once per Python digest (``bisect_step.vulkan_plugin``, ``lowered_dir``:
   the keys a run at a tree uses, so the two runs' own builds and lowerings serve the ends, and
   a commit that changed neither is served), each (commit, stage) of a cell is evaluated once
   (the ends, the merge base, the parent), and every step of every flip is in
   ``DIR/steps-all.json``.
4. ``DIR/bisect.json``: the runs, the range, every flip (cells, lane, old -> new, direction,
   first commit with PR, steps, seconds, its own folder ``flip-K/``); ``NEW_RUN/flips.json``
   holds the same table for the new run's report; the console ends with the table
   "cells -> first commit (PR), regression or fix".
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness.runtimes.git_source import GitError, Repo

# the diff's kinds a flip is made of: status moves, and the ones where one side did not execute
# (at a tree whose XNNPACK runtime is not shown equal to the wheel's, a delegated cell is
# NO_RUNTIME: DELEGATED -> NOT_DELEGATED is still a lowering flip) or only delegation moved
FLIP_CHANGES = ("regressed", "fixed", "changed", "unexecuted", "delegation")
FLIPS_FILE = "flips.json"  # in the new run's folder: the table its report shows


class FlipError(ValueError):
    """Bad input (runs not at commits, commits not in order): one line."""


@dataclass
class Flip:
    backend: str
    fixes: str
    old: str
    new: str
    component: str
    change: str
    cells: list = field(default_factory=list)   # case ids, the first one bisected
    direction: str = ""
    first_commit: dict | None = None
    range: list = field(default_factory=list)   # candidates skips left
    stage: str = ""
    steps: int = 0
    skipped: int = 0
    seconds: float = 0.0
    error: str = ""                             # why this flip has no first commit
    # the first commit against its parent alone: "<parent12> OLD, <first12> NEW" (the bisect's
    # own steps where it evaluated both, else the parent evaluated here), or why not
    confirmed: str = ""
    folder: str = ""
    bisected: str = ""      # the range bisected, "<from12>..<to12>"
    # whose commits hold the first commit: "new" (OLD..NEW, or merge base..NEW when OLD is not an
    # ancestor of NEW), "old" (merge base..OLD: OLD's own branch changed the cell, NEW never had it)
    side: str = ""
    base_outcome: str = ""  # the cell at the merge base (OLD not an ancestor of NEW)

    @property
    def lane(self) -> str:
        return self.backend + (f"+{self.fixes}" if self.fixes else "")

    def line(self) -> str:
        """'case (+N more) lane OLD -> NEW: first commit SHA subject (#PR), regression'."""
        return f"{cell_list(self.cells)} [{self.lane}] {self.old} -> {self.new}{self.outcome()}"

    def outcome(self) -> str:
        """': first commit SHA subject (#PR), regression' (or why there is none)."""
        where = ""
        if self.side == "old":  # the old end's own branch did it; the new end never had it
            where = (f" on the old end's branch (merge base {self.bisected[:12]} already "
                     f"{self.new}; bisected {self.bisected})")
        elif self.base_outcome:
            where = f" (bisected {self.bisected} from the merge base)"
        if self.first_commit:
            c = self.first_commit
            pr = f" (#{c['pr']})" if c.get("pr") and f"(#{c['pr']})" not in c["subject"] else ""
            sure = f" [{self.confirmed}]" if self.confirmed.startswith("not") else ""
            return f": {c['commit'][:12]} {c['subject']}{pr}, {self.direction}{where}{sure}"
        if self.range:
            return (f": one of {len(self.range)} commits (skips leave a range: "
                    f"{', '.join(r['commit'][:12] for r in self.range[:4])}), "
                    f"{self.direction}{where}")
        return f": not bisected ({self.error})"


def cell_list(cells: list) -> str:
    return cells[0] + (f" (+{len(cells) - 1} more)" if len(cells) > 1 else "")


@dataclass
class CommitLine:
    """A line of the table: every flip whose first commit is one commit (the same direction, on
    the same branch) with its cells together, whatever lane or statuses they flipped in (the
    stock lane and a fix lane whose fixes change nothing there flip alike); a flip with no
    first commit is a line of its own."""
    cells: list
    lanes: list
    changes: list                 # "OLD -> NEW" of its flips, in their order
    first_commit: dict | None
    direction: str
    range: list
    error: str
    flips: list                   # the flips' folders (flip-K)
    line: str


def by_commit(flips: list[Flip]) -> list[CommitLine]:
    """The flips -> the table's lines, in the flips' order (largest first)."""
    merged: dict = {}
    for k, f in enumerate(flips):
        key = (f.first_commit["commit"], f.direction, f.side) if f.first_commit else k
        merged.setdefault(key, []).append(f)
    lines = []
    for group in merged.values():
        cells = list(dict.fromkeys(c for f in group for c in f.cells))
        lanes = list(dict.fromkeys(f.lane for f in group))
        changes = list(dict.fromkeys(f"{f.old} -> {f.new}" for f in group))
        head = f"{cell_list(cells)} [{', '.join(lanes)}] {'; '.join(changes)}"
        first = group[0]
        lines.append(CommitLine(cells, lanes, changes, first.first_commit, first.direction,
                                first.range, first.error, [f.folder for f in group],
                                head + first.outcome()))
    return lines


def commit_of(run: Path) -> dict:
    """The run's ExecuTorch tree record; FlipError unless it is a clean commit."""
    from harness.runfolder import RunFolder

    try:
        header = RunFolder(run).header()
    except ValueError as e:
        raise FlipError(str(e)) from None
    tree = header.executorch_tree
    if not tree or not tree.get("commit"):
        raise FlipError(f"{run} is not a run at an ExecuTorch commit (run it with harness run "
                        f"--executorch REF --source GITDIR or --executorch-tree DIR)")
    if tree.get("dirty") is not False:
        raise FlipError(f"{run} ran at {tree.get('label')}: uncommitted changes are in no commit "
                        f"to bisect to")
    return tree


def group(table) -> list[Flip]:
    """The diff's flipped cells -> one Flip per (lane, old, new, each side's component), largest
    first."""
    flips: dict[tuple, Flip] = {}
    for r in table[table["change"].isin(FLIP_CHANGES)].to_dict(orient="records"):
        # both sides' culprits: cells that failed for two reasons on one side are two flips even
        # where the other side names one culprit for both (NO_RUNTIME's "harness")
        old_c, new_c = (c if isinstance(c, str) else "" for c in (r.get("component_old"),
                                                                  r.get("component_new")))
        fixes = r["fixes"] if isinstance(r["fixes"], str) else ""
        key = (r["backend"], fixes, r["old"], r["new"], old_c, new_c)
        flips.setdefault(key, Flip(r["backend"], fixes, r["old"], r["new"], new_c or old_c,
                                   r["change"]))
        flips[key].cells.append(r["case_id"])
    return sorted(flips.values(), key=lambda f: (-len(f.cells), f.backend, f.fixes, f.old, f.new))


def flips_between(old_run: Path, new_run: Path) -> list[Flip]:
    from harness.results import matrix
    from harness.results.diff import diff

    try:
        old, new = matrix.read(old_run), matrix.read(new_run)
    except ValueError as e:
        raise FlipError(str(e)) from None
    table = diff(old, new)
    comp = ["component"] if "component" in old and "component" in new else []
    if comp:  # the culprit of each side, for the grouping
        keys = ["case_id", "backend", "fixes"]
        table = table.merge(old[keys + comp].rename(columns={"component": "component_old"}),
                            on=keys, how="left")
        table = table.merge(new[keys + comp].rename(columns={"component": "component_new"}),
                            on=keys, how="left")
    return group(table)


def from_merge_base(ev, old: str, new: str, base: str, stage: str | None,
                    log) -> tuple[str, str, str, str, str]:
    """OLD's commit is not an ancestor of NEW's: the cell at their merge base says which branch
    moved it -> (from, to, side, stage, the base's outcome): (base, NEW, "new", ...) where the
    base has OLD's outcome, (base, OLD, "old", ...) where it has NEW's already. BisectError
    (one line) where the base cannot be evaluated or has neither end's outcome."""
    from harness.run import bisect

    chosen, o_end, n_end = bisect.evaluate_ends(ev, old, new, stage, log)
    at = ev.evaluate(base, chosen)
    log(f"merge base {base[:12]} [{chosen}]: {at.outcome or 'skip: ' + at.skip_reason} "
        f"({at.seconds:g} s)")
    if at.outcome is None:
        raise bisect.BisectError(f"cannot evaluate the merge base {base[:12]} at the {chosen} "
                                 f"stage: {at.skip_reason}")
    if at.outcome == o_end.outcome:
        return base, new, "new", chosen, at.outcome
    if at.outcome == n_end.outcome:
        return base, old, "old", chosen, at.outcome
    raise bisect.BisectError(f"at the merge base {base[:12]} the cell is {at.outcome}, neither "
                             f"end's ({o_end.outcome} at the old end, {n_end.outcome} at the new): "
                             f"both branches moved it")


def cell_evaluator(spec, folder: Path, cache: str | None, repo: Repo, origin: dict):
    """The default evaluator of a flip's cell (``bisect_step.CellEvaluator``)."""
    from harness.run.bisect_step import CellEvaluator

    ev = CellEvaluator(spec, repo, folder / ".work" / "ends", cache)
    ev.origin = origin
    return ev


def run(old_run: Path, new_run: Path, source: Path, out: Path, cache: str | None = None,
        stage: str | None = None, log=print, limit: int | None = None,
        evaluator=cell_evaluator, backend: str | None = None) -> dict:
    """Bisect every flip between the two runs (see the module doc) -> bisect.json's content.
    ``evaluator(spec, folder, cache, repo, origin)``: what evaluates a flip's cell at a commit
    (the conv cell; a ``--probe`` in the tests of the range logic). ``backend``: only that
    backend's flips (``--backend`` with ``--run-diff``); ``limit``: the largest N of them."""
    from harness.results.diff import run_label
    from harness.run import bisect
    from harness.run.bisect_step import CellSpec
    from harness.runfolder import RunFolder

    t0 = time.perf_counter()
    a, b = commit_of(old_run), commit_of(new_run)
    try:
        repo = Repo(source)
        good, bad = repo.rev(a["commit"]), repo.rev(b["commit"])
    except GitError as e:
        raise FlipError(str(e)) from None
    if good == bad:
        raise FlipError(f"both runs are at {good[:12]}: nothing to bisect")
    if repo.is_ancestor(bad, good):  # (two branches are fine: bisected from their merge base)
        raise FlipError(f"{new_run}'s commit {bad[:12]} is an ancestor of {old_run}'s "
                        f"{good[:12]}: name the older run first")
    base = ""
    if not repo.is_ancestor(good, bad):  # two branches (release tags): from their merge base
        base = repo.git("merge-base", good, bad, check=False).stdout.strip()
        if not base:
            raise FlipError(f"{good[:12]} and {bad[:12]} share no history in {source}")
    flips = flips_between(old_run, new_run)
    if backend:
        flips = [f for f in flips if f.backend.split("@")[0] == backend]
    try:
        cases = {c.case_id: c for c in RunFolder(new_run).cases()}
    except ValueError as e:
        raise FlipError(str(e)) from None
    out.mkdir(parents=True, exist_ok=True)
    n = repo.count(good, bad)
    log(f"bisect --run-diff: {sum(len(f.cells) for f in flips)} flipped cells in {len(flips)} "
        f"flips, {n} commits in {good[:12]}..{bad[:12]}" + (
            f" (the old end is not an ancestor of the new: merge base {base[:12]}, "
            f"{repo.count(bad, good)} commits on the old end's side)" if base else ""))
    every_step = []
    for flip in flips[limit:] if limit else []:
        flip.error = f"beyond --max-flips {limit}"
    for k, flip in enumerate(flips[:limit] if limit else flips, 1):
        folder = out / f"flip-{k}"
        folder.mkdir(parents=True, exist_ok=True)
        flip.folder = folder.name
        case = cases.get(flip.cells[0])
        if case is None:
            flip.error = f"case {flip.cells[0]} is not in {new_run / 'cases.json'}"
            continue
        (folder / "cell.json").write_text(json.dumps([case.to_dict()], indent=1) + "\n")
        spec = CellSpec(str(folder / "cell.json"), case.case_id, flip.backend.split("@")[0],
                        tuple(f for f in flip.fixes.split(",") if f))
        ev = evaluator(spec, folder, cache, repo, {"run": str(Path(new_run).resolve()),
                                                    "finding": None, "case_id": case.case_id})
        log(f"flip {k}/{len(flips)}: {flip.lane} {flip.old} -> {flip.new}, {len(flip.cells)} "
            f"cell(s), bisecting {case.case_id}")
        t = time.perf_counter()
        try:
            lo, hi, side, chosen, at_base = good, bad, "new", stage, ""
            if base:
                lo, hi, side, chosen, at_base = from_merge_base(ev, good, bad, base, stage,
                                                                lambda s: log("  " + s))
            flip.side, flip.base_outcome, flip.bisected = side, at_base, f"{lo[:12]}..{hi[:12]}"
            result = bisect.run(ev, repo, lo, hi, folder, chosen, log=lambda s: log("  " + s))
        except (bisect.BisectError, GitError) as e:
            flip.error = str(e)
            flip.seconds = round(time.perf_counter() - t, 1)
            log(f"  not bisected: {e}")
            continue
        flip.direction, flip.stage = result["direction"], result["stage"]
        flip.first_commit, flip.range = result["first_commit"], result["range"]
        flip.steps, flip.skipped = result["evaluated_steps"], result["skipped_steps"]
        flip.error = result.get("error", "")
        if flip.first_commit:
            flip.confirmed = confirm(ev, repo, result, log)
        flip.seconds = round(time.perf_counter() - t, 1)
        every_step += [{**s, "flip": k} for s in result["steps"]]
    evaluated = {(s["commit"]) for s in every_step if s.get("outcome") is not None}
    summary = {
        "tool": "harness bisect --run-diff",
        "old_run": {"dir": str(Path(old_run).resolve()), "label": run_label(old_run),
                    "commit": good},
        "new_run": {"dir": str(Path(new_run).resolve()), "label": run_label(new_run),
                    "commit": bad},
        "source": str(source), "commits": n,
        # OLD not an ancestor of NEW (two branches): where the flips were bisected from
        "backend": backend or None,  # only this backend's flips (--backend)
        "merge_base": base or None, "old_side_commits": repo.count(bad, good) if base else 0,
        "flips": [{**asdict(f), "lane": f.lane, "line": f.line()} for f in flips],
        # the table: cells that flip for one commit are one line (lanes and statuses together)
        "commits": [asdict(line) for line in by_commit(flips)],
        "cells": sum(len(f.cells) for f in flips),
        "evaluated_steps": sum(f.steps for f in flips),
        "distinct_commits_evaluated": len(evaluated),
        # the steps' lowerings (git bisect run's steps, not the ends): served at a Python digest
        # lowered before (a run at a tree, an earlier step) or lowered here
        "lowerings": {k: sum(s.get("lowering") == k for s in every_step)
                      for k in ("served", "lowered")},
        "seconds": round(time.perf_counter() - t0, 1),
    }
    (out / "steps-all.json").write_text(json.dumps(every_step, indent=1, default=str) + "\n")
    (out / "bisect.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    (Path(new_run) / FLIPS_FILE).write_text(json.dumps(
        {**summary, "bisect_dir": str(out.resolve())}, indent=1, default=str) + "\n")
    return summary


def confirm(ev, repo: Repo, result: dict, log) -> str:
    """The first commit's outcome is the new end's and its parent's the old end's."""
    first = result["first_commit"]["commit"]
    parents = repo.git("rev-list", "--parents", "-n", "1", first).stdout.split()[1:]
    if len(parents) != 1:
        return f"not confirmed: {first[:12]} has {len(parents)} parents"
    parent = parents[0]
    seen = {s["commit"]: s for s in result["steps"] if s.get("outcome") is not None}
    for end in ("good", "bad"):
        seen.setdefault(result[end]["commit"], {"outcome": result[end]["outcome"]})
    old, new = result["good"]["outcome"], result["bad"]["outcome"]
    if parent not in seen:
        step = ev.evaluate(parent, result["stage"])
        log(f"  confirm: parent {parent[:12]} [{result['stage']}]: "
            f"{step.outcome or 'skip: ' + step.skip_reason}")
        seen[parent] = {"outcome": step.outcome}
    got = (seen[parent]["outcome"], seen.get(first, {}).get("outcome"))
    if got == (old, new):
        return f"{parent[:12]} {old}, {first[:12]} {new}"
    return f"not confirmed: parent {parent[:12]} {got[0]}, {first[:12]} {got[1]}"


def table_lines(summary: dict) -> list[str]:
    """The console's table: cells that flip for one commit are one line (``by_commit``)."""
    rows = summary.get("commits") or summary["flips"]
    lines = [f"{summary['old_run']['label']} -> {summary['new_run']['label']}: "
             f"{summary['cells']} flipped cells, {len(summary['flips'])} flips, "
             f"{len(rows)} line{'' if len(rows) == 1 else 's'}"]
    lines += [f"  {r['line']}" for r in rows]
    return lines
