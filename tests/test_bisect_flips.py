"""``harness bisect --run-diff`` when the old run's commit is not an ancestor of the new one's
(issue 50): release tags sit on release branches (v1.4.1 is not an ancestor of main), so each
flip's cell is looked at in their merge base first, and the range bisected is the branch that
moved it. CI has no ExecuTorch history: a small repository built here (main and a release branch
off it), the two run folders written here, and each cell's outcome at a commit read by a
``--probe`` of the commit's tree (the driver, git's bisection and the steps are the real ones)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from harness.run import bisect_flips
from harness.run.bisect_step import ProbeEvaluator

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "cases" / "short_int_lists_2d.json"

# each cell's outcome along the history: main m1..m5, the release branch r1..r3 off m2
# (a: main regresses at m4; b: only the release branch fixed it, at r2; c: both moved it)
MAIN = {"a": ["PASS", "PASS", "PASS", "MISMATCH", "MISMATCH"],
        "b": ["LOWER_ERROR"] * 5,
        "c": ["NOT_DELEGATED", "NOT_DELEGATED", "RUNTIME_ERROR", "RUNTIME_ERROR",
              "RUNTIME_ERROR"]}
RELEASE = {"a": ["PASS"] * 3, "b": ["LOWER_ERROR", "PASS", "PASS"], "c": ["PASS"] * 3}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def _commit(repo: Path, outcomes: dict, i: int, name: str) -> str:
    (repo / "calc.py").write_text("".join(f"def {cell}():\n    return {seq[i]!r}\n"
                                          for cell, seq in outcomes.items()))
    (repo / "n.txt").write_text(name + "\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", f"{name} (#{100 + i})")
    _git(repo, "tag", name)
    return _git(repo, "rev-parse", "HEAD")


def two_branches(where: Path) -> Path:
    repo = where / "repo"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "t")
    for i in range(5):
        _commit(repo, MAIN, i, f"m{i + 1}")
    _git(repo, "checkout", "-q", "-b", "release", "m2")
    for i in range(3):
        _commit(repo, RELEASE, i, f"r{i + 1}")
    return repo


def run_at(where: Path, repo: Path, ref: str, outcomes: dict, i: int, cases) -> Path:
    """A run folder at ``ref`` whose cells a, b, c have their outcomes at commit ``i``."""
    from harness.record import CellResult
    from harness.results import matrix
    from harness.runfolder import RunFolder

    commit = _git(repo, "rev-parse", ref)
    out = where / ref
    out.mkdir()
    folder = RunFolder(out)
    folder.write_cases(list(cases.values()))
    folder.write_header({"run_id": ref, "versions": {"executorch": "1.5.1"},
                         "backends": ["xnnpack"],
                         "executorch_tree": {"commit": commit, "dirty": False,
                                             "label": commit[:12]}})
    rows = [CellResult(case, "xnnpack", status=outcomes[cell][i]).to_row()
            for cell, case in cases.items()]
    matrix.write(matrix.frame(rows), out)
    return out


@pytest.fixture
def setup(tmp_path):
    from harness.spec import load_cases

    repo = two_branches(tmp_path)
    cases = dict(zip("abc", load_cases(CASES)[:3]))
    cell_of = {case.case_id: cell for cell, case in cases.items()}

    def probe(spec, folder, cache, repo_, origin):  # the cell's outcome: its function's answer
        return ProbeEvaluator(f'python -c "import calc; print(calc.{cell_of[spec.case_id]}())"',
                              repo_, folder / ".work")

    return repo, cases, probe


def test_a_flip_is_bisected_on_the_branch_that_moved_it(tmp_path, setup):
    repo, cases, probe = setup
    old = run_at(tmp_path, repo, "r3", RELEASE, 2, cases)   # the release tag
    new = run_at(tmp_path, repo, "m5", MAIN, 4, cases)      # main, not its descendant
    sha = {t: _git(repo, "rev-parse", t) for t in ("m2", "m4", "r2", "r3", "m5")}
    said = []
    summary = bisect_flips.run(old, new, repo, tmp_path / "b", log=said.append,
                               evaluator=probe)
    assert summary["merge_base"] == sha["m2"] and summary["old_side_commits"] == 3
    assert f"merge base {sha['m2'][:12]}" in said[0]
    flips = {f["cells"][0]: f for f in summary["flips"]}
    a, b, c = (flips[cases[k].case_id] for k in "abc")
    # a: the merge base has the old end's PASS: main's m4 regressed it (merge base..NEW)
    assert (a["side"], a["base_outcome"], a["direction"]) == ("new", "PASS", "regression")
    assert a["first_commit"]["commit"] == sha["m4"]
    assert a["bisected"] == f"{sha['m2'][:12]}..{sha['m5'][:12]}"
    m3 = _git(repo, "rev-parse", "m3")
    assert a["confirmed"] == f"{m3[:12]} PASS, {sha['m4'][:12]} MISMATCH"
    assert "from the merge base" in a["line"]
    # b: the merge base is LOWER_ERROR already, as the new end: the release branch's own r2
    # fixed it, and main never had that commit (merge base..OLD, reversed)
    assert (b["side"], b["base_outcome"], b["direction"]) == ("old", "LOWER_ERROR", "fix")
    assert b["first_commit"]["commit"] == sha["r2"]
    assert b["bisected"] == f"{sha['m2'][:12]}..{sha['r3'][:12]}"
    r1 = _git(repo, "rev-parse", "r1")
    assert b["confirmed"] == f"{r1[:12]} LOWER_ERROR, {sha['r2'][:12]} PASS"
    assert "on the old end's branch" in b["line"] and sha["r2"][:12] in b["line"]
    # c: the merge base is NOT_DELEGATED, neither end's: both branches moved it, one line
    assert c["first_commit"] is None and c["side"] == ""
    assert "at the merge base" in c["error"] and "neither end's" in c["error"]
    assert "not bisected" in c["line"]
    assert json.loads((tmp_path / "b" / "bisect.json").read_text())["merge_base"] == sha["m2"]


def test_an_old_end_that_is_an_ancestor_is_bisected_as_before(tmp_path, setup):
    repo, cases, probe = setup
    old = run_at(tmp_path, repo, "m1", MAIN, 0, cases)
    new = run_at(tmp_path, repo, "m5", MAIN, 4, cases)
    summary = bisect_flips.run(old, new, repo, tmp_path / "b", log=lambda s: None,
                               evaluator=probe, backend="xnnpack", limit=1)
    assert summary["merge_base"] is None and summary["old_side_commits"] == 0
    flips = {f["cells"][0]: f for f in summary["flips"]}
    assert set(flips) == {cases["a"].case_id, cases["c"].case_id}  # b did not move on main
    c, a = flips[cases["c"].case_id], flips[cases["a"].case_id]
    m1, m3, m5 = (_git(repo, "rev-parse", t) for t in ("m1", "m3", "m5"))
    assert (c["side"], c["base_outcome"], c["bisected"]) == ("new", "", f"{m1[:12]}..{m5[:12]}")
    assert c["first_commit"]["commit"] == m3 and "merge base" not in c["line"]
    # --max-flips 1: the other flip says why it has no first commit
    assert a["first_commit"] is None and a["error"] == "beyond --max-flips 1"
    # --backend: only that backend's flips
    other = bisect_flips.run(old, new, repo, tmp_path / "b2", log=lambda s: None,
                             evaluator=probe, backend="vulkan")
    assert other["flips"] == [] and other["backend"] == "vulkan"


def test_cells_that_failed_for_two_reasons_are_two_flips():
    """v1.4.1 -> main: 7 XNNPACK cells LOWER_ERROR -> NO_RUNTIME, 5 in preprocess (IndexError),
    2 in Conv1dUnsqueezePass; NO_RUNTIME names one culprit ("harness") for all. Two fixes,
    possibly two commits: two flips, not one bisect that speaks for both."""
    import pandas as pd

    rows = [(c, "xnnpack", "", "LOWER_ERROR", "NO_RUNTIME", "changed", old, "harness")
            for c, old in (("a", "lowering:preprocess"), ("b", "lowering:preprocess"),
                           ("c", "lowering:Conv1dUnsqueezePass"))]
    table = pd.DataFrame(rows, columns=["case_id", "backend", "fixes", "old", "new", "change",
                                        "component_old", "component_new"])
    flips = bisect_flips.group(table)
    assert [(f.cells, f.component) for f in flips] == [(["a", "b"], "harness"), (["c"], "harness")]


def test_cells_that_flip_for_one_commit_are_one_line():
    """The stock lane and a fix lane whose fixes change nothing there flip alike, and cells that
    failed for two reasons are two flips: bisected apart, but where their first commit is one
    commit (same direction) the table has one line with every cell, lane and change; a flip
    with another commit, or none, is a line of its own."""
    from harness.run.bisect_flips import Flip, by_commit, table_lines

    fix = {"commit": "9" * 40, "subject": "Infer conv dims (#21588)", "pr": 21588}
    flips = [Flip("xnnpack", "", "LOWER_ERROR", "NO_RUNTIME", "harness", "changed", ["a", "b"],
                  "fix", fix, folder="flip-1"),
             Flip("xnnpack", "fx", "LOWER_ERROR", "NO_RUNTIME", "harness", "changed",
                  ["a", "b"], "fix", fix, folder="flip-2"),
             Flip("xnnpack", "", "LOWER_ERROR", "PASS", "harness", "changed", ["c"], "fix", fix,
                  folder="flip-3"),
             Flip("vulkan", "", "PASS", "MISMATCH", "delegate", "regressed", ["d"],
                  "regression", {"commit": "7" * 40, "subject": "Route conv", "pr": 20190},
                  folder="flip-4"),
             Flip("vulkan", "", "PASS", "CRASH", "delegate", "regressed", ["e"], "regression",
                  None, error="cannot evaluate the good end", folder="flip-5")]
    lines = by_commit(flips)
    assert [line.flips for line in lines] == [["flip-1", "flip-2", "flip-3"], ["flip-4"],
                                              ["flip-5"]]
    first = lines[0]
    assert first.cells == ["a", "b", "c"] and first.lanes == ["xnnpack", "xnnpack+fx"]
    assert first.changes == ["LOWER_ERROR -> NO_RUNTIME", "LOWER_ERROR -> PASS"]
    assert first.line == ("a (+2 more) [xnnpack, xnnpack+fx] LOWER_ERROR -> NO_RUNTIME; "
                          "LOWER_ERROR -> PASS: 999999999999 Infer conv dims (#21588), fix")
    assert lines[1].line == flips[3].line() and "(#20190)" in lines[1].line
    assert lines[2].line.endswith("not bisected (cannot evaluate the good end)")
    summary = {"old_run": {"label": "A"}, "new_run": {"label": "B"}, "cells": 7,
               "flips": [{"cells": f.cells, "line": f.line()} for f in flips],
               "commits": [{"line": line.line} for line in lines]}
    table = table_lines(summary)
    assert table[0] == "A -> B: 7 flipped cells, 5 flips, 3 lines"
    assert table[1:] == [f"  {line.line}" for line in lines]
