"""``harness upstream`` (issue 47): on hand-built run folders (real records, real findings, no
execution), the drafts are for unreported findings only, silent wrong values first and most
cells first; each repro is short, states its status, carries no contract check it does not
need and no local path; the one fix is named from its single-fix lane, a lane of several
fixes never; issue.md links no local file. One slow test runs a repro alone."""

import json
import os
import re
import subprocess
import sys

import pytest

from harness.record import CellResult
from harness.results import matrix, repro, upstream
from harness.runfolder import RunFolder
from harness.spec import ConvCase

DW = ConvCase(dim=2, in_channels=4, out_channels=4, groups=4, kernel_size=7, padding=3,
              input_shape=(1, 4, 8, 8))
DW2 = ConvCase(dim=2, in_channels=8, out_channels=8, groups=8, kernel_size=7, padding=3,
               input_shape=(1, 8, 8, 8))
GROUPED = ConvCase(dim=2, in_channels=4, out_channels=4, groups=2, kernel_size=3, padding=1,
                   input_shape=(1, 4, 8, 8))
PW_GROUPS = ConvCase(dim=1, in_channels=4, out_channels=4, kernel_size=1, groups=2,
                     input_shape=(1, 4, 7))
VALID = ConvCase(dim=2, in_channels=3, out_channels=4, kernel_size=3, padding="valid",
                 input_shape=(1, 3, 8, 8))
CONTROL = ConvCase(dim=2, in_channels=4, out_channels=8, kernel_size=3, padding=1,
                   input_shape=(1, 4, 8, 8))
LOCAL = "/root/.cache/convconf/runtimes/build/1.5.1-cff6f4dd32e6/src/executorch"
PW_MSG = (f"[{LOCAL}/backends/vulkan/runtime/graph/ops/impl/Conv1dPW.cpp:220] conv1d_pw only "
          "supports groups=1")
IVEC2 = (f"Exception raised from make_ivec2 at {LOCAL}/backends/vulkan/runtime/utils/VecUtils.h:"
         "367: (ints.size() == 2) is false!")
DW_FIX, PAD_FIX, GROUP_FIX = ("vk-conv2d-dw-edge-filter-index", "vk-dw-edge-pad",
                              "vk-conv2d-grouped-unaligned-channels")


def cell(case, status, fixes="", message="", pattern=""):
    return CellResult(case=case, backend="vulkan", fixes=fixes, status=status, message=message,
                      error_pattern=pattern, max_abs_error=1.5 if status == "MISMATCH" else None,
                      tolerance=1e-4 if status == "MISMATCH" else None)


@pytest.fixture
def run_dir(tmp_path):
    """A --fixes each run as it would come back: two dw cells wrong at the right edge (two
    single fixes clear them, a third does nothing, the lane of all fixes too), one grouped
    cell wrong, one conv1d refused (no fix), the make_ivec2 bug (reported upstream: no
    draft), a control that passes everywhere."""
    edge = "right edge 3 cols · all channels · all batches"
    cells = [cell(DW, "MISMATCH", pattern=edge), cell(DW2, "MISMATCH", pattern=edge),
             cell(GROUPED, "MISMATCH", pattern="every other channel"),
             cell(PW_GROUPS, "RUNTIME_ERROR", message=PW_MSG),
             cell(VALID, "RUNTIME_ERROR", message=IVEC2), cell(CONTROL, "PASS")]
    for fx in (DW_FIX, PAD_FIX, GROUP_FIX, f"{DW_FIX},{GROUP_FIX},{PAD_FIX}"):
        for c in list(cells[:6]):
            right = (c.case in (DW, DW2) and fx != GROUP_FIX) or (c.case == GROUPED and
                                                                  GROUP_FIX in fx)
            status = "PASS" if right or c.status == "PASS" else c.status
            cells.append(cell(c.case, status, fx, "" if status == "PASS" else c.message,
                              "" if status == "PASS" else c.error_pattern))
    matrix.write(matrix.frame([c.to_row() for c in cells]), tmp_path)
    folder = RunFolder(tmp_path)
    folder.write_cases([DW, DW2, GROUPED, PW_GROUPS, VALID, CONTROL])
    folder.write_header({"versions": {"executorch": "1.5.1", "torch": "2.13.0"},
                         "python": "3.11.2", "vulkan": {"source_commit": "cff6f4dd32e6"},
                         "vulkan_runtime": f"{LOCAL}/libexecutorch_backend_vulkan.so"})
    return tmp_path


def test_drafts_only_unreported_silent_first_most_cells_first(run_dir, tmp_path):
    drafts = upstream.write(run_dir, tmp_path / "up")
    statuses = [(d.finding.status, d.stock_cells) for d in drafts]
    assert statuses == [("MISMATCH", 2), ("MISMATCH", 1), ("RUNTIME_ERROR", 1)]
    assert not any("make_ivec2" in d.detail for d in drafts)  # #22774 tracks it: no draft
    index = (tmp_path / "up" / "index.md").read_text()
    rows = [ln for ln in index.splitlines() if ln.startswith("| [")]
    assert [r.split("|")[3].strip() for r in rows] == ["MISMATCH", "MISMATCH", "RUNTIME_ERROR"]
    for d in drafts:
        names = sorted(p.name for p in (tmp_path / "up" / d.folder).iterdir())
        assert names == ["issue.md", "patch.diff", "repro.py", "validation.log"]


def test_the_one_fix_from_single_fix_lanes_never_a_lane_list(run_dir, tmp_path):
    dw, grouped, pw = upstream.write(run_dir, tmp_path / "up")
    assert [e.fix for e in dw.single_fixes] == [DW_FIX, PAD_FIX]
    assert {e.fix for e in dw.effects if not e.cleared} == {GROUP_FIX}
    assert dw.patch_from == DW_FIX  # the runtime fix's ExecuTorch diff, validated
    assert dw.validated and dw.patch.startswith(f"{DW_FIX}:") and "--- " in dw.patch
    assert [e.fix for e in grouped.single_fixes] == [GROUP_FIX]
    assert pw.single_fixes == [] and pw.patch_from == "" and "no upstream patch yet" in pw.patch
    md = dw.issue
    assert f"**clears it alone**: `{DW_FIX}` [runtime]: 2/2 cells right" in md
    assert f"**the one fix**: `{GROUP_FIX}`" in grouped.issue
    assert "," not in "".join(re.findall(r"`(vk-[^`]*)`", md))  # no lane of several fixes
    log = (tmp_path / "up" / dw.folder / "validation.log").read_text()
    assert f"fix {DW_FIX} [runtime]: 2/2 right; VALIDATED" in log
    assert f"{DW.case_id}: MISMATCH -> PASS" in log


def test_repro_is_short_states_its_status_and_carries_only_what_the_bug_needs(run_dir, tmp_path):
    drafts = upstream.write(run_dir, tmp_path / "up")
    lengths = [d.repro_lines for d in drafts]
    assert max(lengths) <= 30, lengths
    for d in drafts:
        code = (tmp_path / "up" / d.folder / "repro.py").read_text()
        compile(code, "repro.py", "exec")
        assert "harness" not in code and "make_ivec2" not in code.split('"""')[2]
        assert "READ_AS_IVEC2" not in code and "PREDICTED" not in code
        assert f"Stated status: {d.stated}" in code
        assert 'print("STATUS:"' in code or 'STATUS: RUNTIME_ERROR' in code
    mismatch = drafts[0].repro
    assert "expected {expected.flatten()[i]" in mismatch and "actual {actual.flatten()[i]" in mismatch
    assert "try:" not in mismatch  # nothing to catch for a silent wrong value
    refused = drafts[2].repro
    assert "except RuntimeError" in refused and "STATUS: RUNTIME_ERROR" in refused


def test_minimal_script_quantized_sets_up_as_executorch_docs_do():
    q = ConvCase(dim=2, in_channels=4, out_channels=8, kernel_size=3, padding=1,
                 input_shape=(2, 4, 8, 8), quant="int8_per_channel")
    code = repro.minimal_script(q, "xnnpack", "MISMATCH", "max|d|=3")
    assert "import executorch.kernels.quantized" in code and "XnnpackPartitioner" in code
    assert "VULKAN_RUNTIME" not in code  # XNNPACK ships in the wheel: no loader
    assert repro.code_lines(code) <= 30
    compile(code, "repro.py", "exec")


def test_issue_md_has_no_local_path_and_attaches_the_picture(run_dir, tmp_path):
    drafts = upstream.write(run_dir, tmp_path / "up")
    for d in drafts:
        md = (tmp_path / "up" / d.folder / "issue.md").read_text()
        assert not re.search(r"(/root|/home|/tmp|/work|~/)", md), d.folder
        assert str(run_dir) not in md and str(tmp_path) not in md
        for link in re.findall(r"!\[[^]]*\]\(([^)]+)\)", md):
            assert link == "picture.png"  # a file of the folder, attached with the issue
    pw = drafts[2].issue
    assert "backends/vulkan/runtime/graph/ops/impl/Conv1dPW.cpp:220" in pw
    assert upstream.scrub(IVEC2).startswith(
        "Exception raised from make_ivec2 at backends/vulkan/runtime/utils/VecUtils.h:367")


def test_root_cause_links_the_source_line_at_its_commit(run_dir, tmp_path):
    drafts = upstream.write(run_dir, tmp_path / "up")
    dw = drafts[0]
    (src,) = dw.sources
    assert src.url == (f"https://github.com/pytorch/executorch/blob/{src.commit}/{src.path}"
                       f"#L{src.line}")
    assert src.url in dw.issue and src.anchor in dw.issue
    text = "a\nb\n" + src.anchor + "\n"
    assert upstream.locate(text, src.anchor) == 3


def test_bad_input_is_one_line_and_nothing_overwritten(run_dir, tmp_path, capsys):
    """The command's own entry point (harness.cli.main, what ``python -m harness`` runs)."""
    from harness.cli import main

    keep = tmp_path / "mine"
    keep.mkdir()
    (keep / "notes.txt").write_text("mine")
    codes, errors = [], []
    for args in ([str(run_dir), "--out", str(keep)], [str(tmp_path / "nope"), "--out",
                                                      str(tmp_path / "o")]):
        codes.append(main(["upstream", *args]))
        errors.append([ln for ln in capsys.readouterr().err.splitlines() if ln.strip()])
    assert codes == [2, 2]
    assert [len(e) for e in errors] == [1, 1], errors
    assert all(e[0].startswith("convconf: error: ") for e in errors)
    assert "not an upstream drafts folder" in errors[0][0] and "cannot read" in errors[1][0]
    assert (keep / "notes.txt").read_text() == "mine"
    assert not (tmp_path / "o").exists()
    assert main(["upstream", str(run_dir), "--out", str(tmp_path / "up")]) == 0
    assert "3 draft(s)" in capsys.readouterr().out


@pytest.mark.slow
def test_a_repro_alone_prints_its_stated_status(run_dir, tmp_path, vulkan_runtime):
    """The dw right-edge repro in a fresh process with no convconf on its path, the plug-in
    from $VULKAN_RUNTIME: it prints the status the draft states."""
    drafts = upstream.write(run_dir, tmp_path / "up")
    where = tmp_path / "up" / drafts[0].folder
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["VULKAN_RUNTIME"] = str(vulkan_runtime.library)
    proc = subprocess.run([sys.executable, "-I", "repro.py"], capture_output=True, text=True,
                          timeout=600, cwd=where, env=env)
    status = [ln for ln in proc.stdout.splitlines() if ln.startswith("STATUS:")]
    assert status == ["STATUS: MISMATCH"], proc.stdout + proc.stderr
    assert re.search(r"expected \S+, actual \S+ at flat index", proc.stdout)


def test_run_one_reads_the_status_a_script_prints_alone():
    """--run-repros' runner: the STATUS line, a process that dies is CRASH, none printed is '?';
    the plug-in comes by $VULKAN_RUNTIME as given."""
    from harness.run.upstream import run_one

    said = run_one('import os\nprint("hello")\nprint("STATUS: MISMATCH (max|d|=2)")\n'
                   'print(os.environ.get("VULKAN_RUNTIME"))', "/x/lib.so")
    died = run_one("import os\nos.abort()", None)
    mute = run_one("print('no status')", None)
    assert said == ("MISMATCH", "hello\nSTATUS: MISMATCH (max|d|=2)\n/x/lib.so")
    assert died[0] == "CRASH"
    assert mute == ("?", "no status")


def test_a_graph_fix_brings_its_upstream_diff_a_fix_that_clears_nothing_none():
    tconv = upstream.FixEffect("vk-tconv-dilation", "graph", "", "", 2, 2,
                               (("NOT_DELEGATED", 2),), (), (), 0)
    nothing = upstream.FixEffect("vk-dw-edge-pad", "graph", "", "", 2, 0, (("MISMATCH", 2),),
                                 (), (), 0)
    text, fix = upstream.patch_for([tconv])
    assert fix == "vk-tconv-dilation" and "--- a/backends/vulkan/op_registry.py" in text
    assert upstream.patch_for([nothing]) == (
        "# no upstream patch yet: no single fix of this run clears it\n", "")


def test_a_fix_that_leaves_a_cell_as_it_was_clears_nothing_and_not_delegated_is_no_draft(tmp_path):
    """NOT_DELEGATED is right values: a fix lane still NOT_DELEGATED did nothing, and a finding
    of right values the partitioner left out is no upstream bug report."""
    from harness.results import findings

    left = "outside the vulkan delegate: aten.convolution.default"
    cells = [cell(DW, "NOT_DELEGATED", message=left), cell(DW, "NOT_DELEGATED", DW_FIX, left),
             cell(GROUPED, "MISMATCH", pattern="every other channel"),
             cell(GROUPED, "MISMATCH", DW_FIX, pattern="every other channel")]
    found = {f.status: f for f in findings.find(cells)}
    (nd,) = upstream.fix_effects(found["NOT_DELEGATED"], cells)
    assert (nd.tried, nd.cleared, nd.clears) == (1, 0, False)
    matrix.write(matrix.frame([c.to_row() for c in cells]), tmp_path)
    RunFolder(tmp_path).write_cases([DW, GROUPED])
    RunFolder(tmp_path).write_header({"versions": {"executorch": "1.5.1"}})
    assert [d.finding.status for d in upstream.build(tmp_path)] == ["MISMATCH"]
