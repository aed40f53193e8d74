"""harness fidelity (results/fidelity.py): a release's own wheel vs a run at its tag over the
installed wheel. Small hand-made run folders and cache entries, no lowering: every reason class
is what the cell's two sides show, the program bytes are read from each run's own cache entries,
and bad input is one line, exit 2, nothing written."""

from __future__ import annotations

import json

import pytest

from harness.cli import main
from harness import versions
from harness.header import RunHeader
from harness.lane import Lane
from harness.record import CellResult
from harness.results import fidelity, matrix
from harness.runfolder import RunFolder
from harness.spec import ConvCase
from harness.stages import cache

STACK = {"executorch": "1.4.1", "torch": "2.13.0", "convconf": "0.1.0", "pipeline": "abc"}
TREE_STACK = {**STACK, "executorch": "1.5.1"}
TREE = {"path": "/x", "commit": "e4d02f41f790" + "0" * 28, "ref": "v1.4.1", "label": "e4d02f41f790"}
XNN_DESIGN = ("XNNPACK delegate runs the wheel's build (executorch 1.5.1), whose commit is not in "
              "the repository: cannot tell whether e4d02f41f790's is the same")
CONV = {"aten.convolution.default": 1}


def case(k: int = 3) -> ConvCase:
    return ConvCase(dim=2, in_channels=4, out_channels=4, kernel_size=k, padding=1,
                    input_shape=(1, 4, 8, 8))


def cell(backend="vulkan", status="PASS", k=3, delegated=None, outside=None, max_abs=0.001,
         message="") -> CellResult:
    return CellResult(case=case(k), backend=backend, status=status, message=message,
                      delegated_ops=CONV if delegated is None else delegated,
                      undelegated_ops=outside or {}, max_abs_error=max_abs,
                      executorch_version="1.4.1")


def make_run(path, cells, programs=(), tree=False, pipeline=None):
    """A run folder with its matrix and header, and cache entries (under path/cache) holding the
    sha256 of each cell's program: ``programs`` one per cell ("" = no entry); ``pipeline``: the
    stages' digest the entries were keyed with (default: the header's)."""
    run = RunFolder(path)
    run.path.mkdir(parents=True)
    stack = TREE_STACK if tree else STACK
    run.write_header(RunHeader(versions=stack, cache_dir=str(run.path / "cache"),
                               executorch_tree=TREE if tree else None))
    run.write_cases(list({c.case_id: c.case for c in cells}.values()))
    matrix.write(matrix.frame([c.to_row() for c in cells]), run.path)
    for c, program in zip(cells, programs):
        if program:
            k = cache.key(c.case_id, Lane.of(c.backend, c.fixes),
                          {**stack, "pipeline": pipeline or stack["pipeline"]})
            entry = run.path / "cache" / k[:2] / k
            entry.mkdir(parents=True)
            (entry / "meta.json").write_text(json.dumps({cache.CHECKS: {"program.pte": program}}))
    return run.path


SAME = ("a" * 64, "a" * 64)
OTHER = ("a" * 64, "b" * 64)
# (wheel cell, tree cell, (wheel program, tree program)) -> every differing aspect, most serious first
CLASSES = {
    "agree": (cell(), cell(), SAME, []),
    "program unknown on one side: not compared": (cell(), cell(), ("a" * 64, ""), []),
    "by design": (cell("xnnpack"), cell("xnnpack", "NO_RUNTIME", message=XNN_DESIGN), SAME,
                  ["unexecuted-at-tree"]),
    # at a tree, a NOT_DELEGATED program nothing can faithfully run keeps its status, not executed
    "not delegated, by design": (cell("xnnpack", "NOT_DELEGATED", delegated={}, outside=CONV),
                                 cell("xnnpack", "NOT_DELEGATED", delegated={}, outside=CONV,
                                      message=f"outside (not executed: {XNN_DESIGN})"), SAME,
                                 ["unexecuted-at-tree"]),
    "not delegated, failed on the wheel, not run at the tree": (
        cell("xnnpack", "MISMATCH", delegated={}, outside=CONV),
        cell("xnnpack", "NOT_DELEGATED", delegated={}, outside=CONV,
             message=f"outside (not executed: {XNN_DESIGN})"), SAME, ["unexecuted-at-tree"]),
    "neither ran, the contract's prediction moved": (
        cell(status="CONTRACT_VIOLATION"), cell(status="NO_RUNTIME"), SAME, ["lowering-outcome"]),
    "same program, other verdict": (cell(), cell(status="MISMATCH", max_abs=3.0), SAME,
                                    ["verdict-same-program"]),
    "other program, other verdict": (cell(), cell(status="MISMATCH"), OTHER,
                                     ["verdict-program-differs", "program-bytes"]),
    "lowering": (cell(status="LOWER_ERROR", delegated={}, max_abs=None), cell(), OTHER,
                 ["lowering-outcome"]),
    "delegated vs not": (cell(), cell(status="NOT_DELEGATED", delegated={}, outside=CONV), OTHER,
                         ["lowering-outcome"]),
    "op counts": (cell(outside={"aten.permute_copy.default": 1}),
                  cell(outside={"aten.permute_copy.default": 2}), SAME, ["delegation"]),
    "bytes alone": (cell(), cell(), OTHER, ["program-bytes"]),
    "no plug-in": (cell(), cell(status="NO_RUNTIME", message="no Vulkan plug-in built from "
                                "e4d02f41f790: cmake failed"), SAME, ["no-plugin"]),
    "wheel did not execute": (cell(status="NO_RUNTIME", message="not registered"), cell(), SAME,
                              ["unexecuted-on-wheel"]),
    "numbers": (cell(max_abs=0.001), cell(max_abs=0.002), SAME, ["numbers"]),
}


@pytest.mark.parametrize("name", list(CLASSES))
def test_each_aspect_has_its_reason_class(name):
    wheel, tree, (wp, tp), want = CLASSES[name]
    got = fidelity.aspects(wheel, tree, wp, tp)
    assert got == want
    assert set(got) <= set(fidelity.REASONS)


@pytest.fixture
def pair(tmp_path):
    """Four cells: two agree, one XNNPACK by design, one Vulkan verdict on the same program."""
    wheel = [cell(k=3), cell("xnnpack", k=3), cell(k=5), cell("xnnpack", k=5)]
    tree = [cell(k=3), cell("xnnpack", "NO_RUNTIME", k=3, message=XNN_DESIGN),
            cell(status="MISMATCH", k=5, max_abs=2.0), cell("xnnpack", k=5)]
    programs = ["1" * 64, "2" * 64, "3" * 64, "4" * 64]
    return (make_run(tmp_path / "wheel", wheel, programs),
            make_run(tmp_path / "tree", tree, programs[:3] + [""], tree=True))


def test_compare_counts_and_reads_the_programs_from_each_runs_cache(pair):
    result = fidelity.compare(*pair)
    assert (result.cells, result.agree, len(result.disagreements)) == (4, 2, 2)
    assert result.counts() == {"verdict-same-program": 1, "unexecuted-at-tree": 1}
    assert [d.reason for d in result.unexpected] == ["verdict-same-program"]
    # the fourth cell's tree side has no cache entry: 3 programs compared, all equal
    assert (result.programs_compared, result.programs_equal) == (3, 3)
    assert (result.executed_both, result.verdicts_equal) == (3, 2)
    first = result.disagreements[0]
    assert (first.case_id, first.wheel_program) == (case(5).case_id, "3" * 12)
    assert result.tree == "executorch e4d02f41f790 over 1.5.1"


def test_entries_keyed_by_a_worker_whose_harness_source_moved_mid_run_are_found(tmp_path):
    # the header has the parent's stages digest; a worker started after the source changed
    # keyed its entries with this process's (the checkout as it is now)
    wheel = make_run(tmp_path / "w", [cell()], ["1" * 64], pipeline=versions.pipeline_digest())
    tree = make_run(tmp_path / "t", [cell()], ["2" * 64], tree=True)
    result = fidelity.compare(wheel, tree)
    assert (result.programs_compared, result.counts()) == (1, {"program-bytes": 1})


def test_cli_writes_the_three_files_and_exits_1_for_a_disagreement_not_by_design(pair, tmp_path,
                                                                                   capsys):
    out = tmp_path / "out"
    assert main(["fidelity", str(pair[0]), str(pair[1]), "--out", str(out)]) == 1
    said = capsys.readouterr().out
    assert "verdict-same-program 1" in said and "unexecuted-at-tree 1 (by design)" in said
    rows = (out / "fidelity.csv").read_text().splitlines()
    assert len(rows) == 3 and rows[0].startswith("case_id,backend,fixes,reason")
    data = json.loads((out / "fidelity.json").read_text())
    assert data["counts"] == {"verdict-same-program": 1, "unexecuted-at-tree": 1}
    assert "| unexecuted-at-tree | 1 | yes |" in (out / "fidelity.md").read_text()


def test_a_reason_with_a_pipe_keeps_its_markdown_row_whole(tmp_path):
    wheel = make_run(tmp_path / "w", [cell(max_abs=0.001)], ["1" * 64])
    tree = make_run(tmp_path / "t", [cell(max_abs=0.002)], ["1" * 64], tree=True)
    fidelity.write(fidelity.compare(wheel, tree), tmp_path / "o")
    row = next(r for r in (tmp_path / "o" / "fidelity.md").read_text().splitlines()
               if r.startswith("| numbers |"))
    assert "max\\|d\\|" in row and row.replace("\\|", "").count("|") == 6


def test_only_by_design_differences_exit_0(tmp_path):
    wheel = make_run(tmp_path / "w", [cell("xnnpack")], ["1" * 64])
    tree = make_run(tmp_path / "t", [cell("xnnpack", "NO_RUNTIME", message=XNN_DESIGN)],
                    ["1" * 64], tree=True)
    assert main(["fidelity", str(wheel), str(tree), "--out", str(tmp_path / "o")]) == 0


def bad(capsys, tmp_path, *argv) -> str:
    out = tmp_path / "out"
    assert main(["fidelity", *map(str, argv), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("convconf: error: fidelity: ")
    assert not out.exists()  # nothing written
    return err[0]


def test_a_folder_that_is_not_a_run_is_one_line_exit_2(pair, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert "not a convconf run folder" in bad(capsys, tmp_path, tmp_path / "empty", pair[1])


def test_different_case_sets_are_one_line_exit_2(tmp_path, capsys):
    wheel = make_run(tmp_path / "w", [cell(k=3), cell(k=5)])
    tree = make_run(tmp_path / "t", [cell(k=3), cell(k=7)], tree=True)
    line = bad(capsys, tmp_path, wheel, tree)
    assert "different case sets: 1 only in" in line and case(5).case_id in line


def test_different_lanes_are_one_line_exit_2(tmp_path, capsys):
    wheel = make_run(tmp_path / "w", [cell(k=3), cell("xnnpack", k=3)])
    tree = make_run(tmp_path / "t", [cell(k=3)], tree=True)
    assert "different lanes" in bad(capsys, tmp_path, wheel, tree)


def test_the_runs_in_the_wrong_order_are_one_line_exit_2(pair, tmp_path, capsys):
    assert "the first run must be on a release's own wheel" in bad(capsys, tmp_path, pair[1],
                                                                   pair[0])
    assert "not a run at an ExecuTorch tree" in bad(capsys, tmp_path, pair[0], pair[0])
