"""The graph fixes' upstream diffs (cases/upstream/patches/FIX.diff, issue 47) and their
validation at an ExecuTorch tree (``harness upstream --validate-at``).

Fast: every diff is the upstream form of a fix that exists, says what it changes and against
which commit, and applies to ExecuTorch main where that tree is on this machine (CI has no
ExecuTorch history: skipped there, with the reason); the verdict bookkeeping of a validation;
bad options are one line, exit 2. Slow: one diff run at main clean and patched for real."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.results import upstream
from harness.stages import fixes

MAIN = "cff6f4dd32e630945b7188512c1f2b4f102b05ad"
PATCHES = sorted(upstream.UPSTREAM_PATCHES.glob("*.diff"))
MIRROR = Path(os.environ.get("CONVCONF_ET_MIRROR", "/work/.mirror/pytorch+executorch/repo"))


def exported_main() -> Path | None:
    """ExecuTorch main's files as a run at that commit exported them, when this machine has them."""
    from harness.runtimes import cache_root

    tree = cache_root(None) / "trees" / "commits" / MAIN[:12]
    return tree if (tree / "backends" / "vulkan" / "op_registry.py").is_file() else None


def test_every_upstream_diff_is_a_fix_that_exists_and_says_what_it_changes():
    assert len(PATCHES) >= 10
    graph = {n for n in fixes.names() if fixes.get(n).kind == "graph"}
    for path in PATCHES:
        text = path.read_text()
        fix = path.stem
        assert fix in graph, f"{path.name}: no graph fix named {fix}"
        assert text.splitlines()[0].startswith(f"{fix}: "), path.name
        assert MAIN in text.split("diff --git", 1)[0], f"{path.name}: names no commit"
        changed = upstream.diff_paths(text)
        assert changed and all(p.startswith(("backends/", "exir/")) for p in changed), path.name


def test_diff_paths_and_the_executorch_tests_beside_them():
    text = (upstream.UPSTREAM_PATCHES / "vulkan-conv-padding.diff").read_text()
    assert upstream.diff_paths(text) == ["backends/vulkan/serialization/vulkan_graph_builder.py"]
    beside = upstream.tests_beside(upstream.diff_paths(text))
    assert ("backends/vulkan/test/test_serialization.py", "") in beside
    assert ("backends/vulkan/test/test_vulkan_delegate.py", "conv") in beside
    xnn = upstream.tests_beside(["backends/xnnpack/partition/config/gemm_configs.py"])
    assert [t for t, _ in xnn] == ["backends/xnnpack/test/ops/test_conv1d.py",
                                   "backends/xnnpack/test/ops/test_conv2d.py"]
    assert upstream.tests_beside(["exir/passes/foo.py"]) == []


def test_a_fixs_corpus_cases_are_its_bugs_and_its_controls():
    found = upstream.fix_cases("vk-dw-edge-pad")
    bugs = [c for c, _, bug in found if bug]
    controls = [c for c, _, bug in found if not bug]
    assert bugs and controls
    assert len({c.case_id for c, _, _ in found}) == len(found)
    for _, entry, bug in found:
        assert (entry["expect"]["vulkan"] != entry["expect"]["vulkan+vk-dw-edge-pad"]) == bug


@pytest.mark.parametrize("path", PATCHES, ids=[p.stem for p in PATCHES])
def test_each_diff_applies_to_executorch_main(path):
    tree = exported_main()
    if tree is None:
        pytest.skip(f"ExecuTorch main {MAIN[:12]} is not exported on this machine (a run with "
                    "--executorch cff6f4dd32 --source GITDIR exports it); CI has no ExecuTorch "
                    "history")
    done = subprocess.run(["git", "apply", "--check", "-"], cwd=tree, input=path.read_text(),
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_patched_tree_reads_as_the_commit_with_the_diff_uncommitted(tmp_path):
    if exported_main() is None or not MIRROR.exists():
        pytest.skip("needs ExecuTorch's history (CONVCONF_ET_MIRROR) and main exported")
    from harness.run.upstream import patched_tree
    from harness.runtimes import tree as tree_mod

    text = (upstream.UPSTREAM_PATCHES / "vk-grouped-split.diff").read_text()
    clean = patched_tree(MIRROR, MAIN[:10], text, tmp_path / "t")
    read = tree_mod.from_checkout(tmp_path / "t")
    assert clean.commit == read.commit == MAIN
    assert read.label == f"{MAIN[:12]} (dirty)"
    assert read.changed == upstream.diff_paths(text)
    with pytest.raises(tree_mod.TreeError, match="git apply"):
        patched_tree(MIRROR, MAIN[:10], text.replace("batches != 1", "batches != 7"),
                     tmp_path / "u")


def cell(cid, role, clean, patched, executed=True):
    return upstream.TreeCell(cid, role, clean, patched, executed)


def test_a_diff_is_validated_when_its_failing_cells_turn_right_and_no_control_moves():
    good = upstream.TreeValidation("vk-dw-edge-pad", "vulkan", "cff6f4dd32e6",
                                   "cff6f4dd32e6 (dirty)", (
                                       cell("a", "finding", "MISMATCH", "NOT_DELEGATED", False),
                                       cell("b", "bug", "MISMATCH", "PASS"),
                                       cell("c", "control", "PASS", "PASS")))
    assert good.validated
    assert good.summary() == ("validated at cff6f4dd32e6 (dirty): 2/2 cells failing -> "
                              "PASS/NOT_DELEGATED (NOT_DELEGATED 1/PASS 1), 1 controls unchanged")
    assert "lowered only" in "\n".join(good.lines())
    moved = upstream.TreeValidation("x", "vulkan", "m", "m (dirty)", (
        cell("a", "bug", "MISMATCH", "PASS"), cell("c", "control", "PASS", "NOT_DELEGATED")))
    half = upstream.TreeValidation("x", "vulkan", "m", "m (dirty)", (
        cell("a", "bug", "MISMATCH", "PASS"), cell("b", "finding", "RUNTIME_ERROR", "MISMATCH")))
    nothing = upstream.TreeValidation("x", "vulkan", "m", "m (dirty)", (
        cell("c", "control", "PASS", "PASS"),))
    broken = upstream.TreeValidation("x", "vulkan", "m", "m", problem="git apply: corrupt patch")
    assert not moved.validated and "1/1 controls moved" in moved.summary()
    assert not half.validated and "1/2 cells failing" in half.summary()
    assert not nothing.validated  # nothing failing at the clean tree: nothing shown
    assert not broken.validated and broken.lines() == [
        "not validated at m (patched): git apply: corrupt patch"]


def test_et_tests_line_says_what_ran_or_why_not():
    ran = upstream.EtTests("backends/xnnpack/test/ops/test_conv1d.py", "conv", 7, 0, 1)
    not_run = upstream.EtTests("backends/vulkan/test/test_vulkan_delegate.py", "conv",
                               why_not="VulkanBackend is not registered")
    assert ran.line() == "backends/xnnpack/test/ops/test_conv1d.py -k conv: 7 passed, 0 failed, 1 skipped"
    assert not_run.line().endswith("not run (VulkanBackend is not registered)")


@pytest.mark.parametrize("argv, says", [
    (["--patches", "vk-dw-edge-pad"], "--source and --patches go with --validate-at"),
    (["--validate-at", "nope", "--patches", "vk-dw-edge-pad"], "not a checkout"),
    (["--validate-at", "x", "--source", "/nonexistent/repo", "--patches", "vk-dw-edge-pad"],
     "no such repository"),
    (["--validate-at", "x", "--source", ".", "--patches", "no-such-fix"], "no fix named"),
    (["--validate-at", "x", "--source", ".", "--patches", "xnnpack-conv1d-same-even"],
     "has no upstream diff"),
    (["--validate-at", "x", "--source", "."], "RUN_DIR is required"),
])
def test_bad_validate_options_are_one_line_exit_2(tmp_path, argv, says, capsys):
    """The command's own entry point (harness.cli.main, what ``python -m harness`` runs)."""
    from harness.cli import main

    out = tmp_path / "drafts"
    assert main(["upstream", "--out", str(out), *argv]) == 2
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(lines) == 1 and says in lines[0]
    assert not out.exists()


@pytest.mark.slow
def test_a_diff_run_at_main_clean_and_patched_turns_its_cells_right(tmp_path):
    """vk-dw-edge-pad.diff for real: main exported, a Vulkan plug-in built from it (kept per
    source digest: the diff is Python only, so the patched tree reuses it), the fix's corpus
    cells run at both trees: its MISMATCH cells leave the delegate, its controls stay PASS."""
    if exported_main() is None or not MIRROR.exists():
        pytest.skip("needs ExecuTorch's history (CONVCONF_ET_MIRROR) and main exported")
    from harness.run.upstream import validate_fix

    v = validate_fix("vk-dw-edge-pad", "vulkan", MAIN[:10], MIRROR, tmp_path, et_tests=False,
                     log=lambda s: None)
    assert v.problem == "" and v.patched_at == f"{MAIN[:12]} (dirty)"
    assert "kept from an earlier build" in v.plugin  # same Vulkan sources: the same plug-in
    assert {c.role for c in v.cells} == {"bug", "control"}
    assert v.validated, "\n".join(v.lines())
    assert all(c.patched == "NOT_DELEGATED" for c in v.failing)
    assert all(c.clean == c.patched == "PASS" for c in v.cells if c.role == "control")


def test_a_drafts_validation_log_carries_the_run_at_the_tree(tmp_path):
    """A draft whose one fix is a graph fix with an upstream diff: patch.diff is that diff, and
    once run at a tree its validation.log and the index say so in place of 'not run at a tree'."""
    from harness.record import CellResult
    from harness.results import matrix
    from harness.runfolder import RunFolder
    from harness.spec import ConvCase

    dw = ConvCase(dim=2, in_channels=4, out_channels=4, groups=4, kernel_size=7, padding=3,
                  input_shape=(1, 4, 8, 8))
    edge = "right edge 3 cols · all channels · all batches"
    cells = [CellResult(case=dw, backend="vulkan", fixes=fx, status=status, error_pattern=pat,
                        max_abs_error=1.5 if status == "MISMATCH" else None,
                        tolerance=1e-4 if status == "MISMATCH" else None)
             for fx, status, pat in (("", "MISMATCH", edge), ("vk-dw-edge-pad", "PASS", ""))]
    matrix.write(matrix.frame([c.to_row() for c in cells]), tmp_path)
    RunFolder(tmp_path).write_cases([dw])
    RunFolder(tmp_path).write_header({"versions": {"executorch": "1.5.1"}})
    (d,) = upstream.build(tmp_path)
    assert d.patch_from == "vk-dw-edge-pad" and d.patch.startswith("vk-dw-edge-pad: ")
    assert "has not been run at a tree" in d.validation
    d.at_tree = upstream.TreeValidation("vk-dw-edge-pad", "vulkan", "cff6f4dd32e6",
                                        "cff6f4dd32e6 (dirty)", (
                                            cell(dw.case_id, "finding", "MISMATCH",
                                                 "NOT_DELEGATED", False),
                                            cell("c", "control", "PASS", "PASS")))
    upstream.render(d, RunFolder(tmp_path).header())
    assert "has not been run at a tree" not in d.validation
    assert ("validated at cff6f4dd32e6 (dirty): 1/1 cells failing -> PASS/NOT_DELEGATED "
            "(NOT_DELEGATED 1), 1 controls unchanged") in d.validation
    assert "not run (--no-et-tests" in d.validation
    assert "| validated (at tree) |" in upstream.index_markdown([d], "r")


def test_a_failing_control_the_diff_turns_right_is_no_move():
    v = upstream.TreeValidation("vk-channels-last-input", "vulkan", "m", "m (dirty)", (
        cell("a", "bug", "MISMATCH", "NOT_DELEGATED"),
        cell("b", "control", "MISMATCH", "NOT_DELEGATED"),
        cell("c", "control", "PASS", "PASS")))
    assert v.validated and not v.controls_moved
    assert v.summary().endswith("1 controls unchanged; also 1 failing control(s) right")


def test_repros_run_with_a_named_interpreter(tmp_path):
    """--python: each repro.py runs with that interpreter (a maintainer's fresh venv), isolated."""
    from harness.run.upstream import run_one

    script = "import sys\nprint('STATUS: PASS', sys.flags.isolated)\n"
    status, out = run_one(script, None, python=sys.executable)
    assert (status, out) == ("PASS", "STATUS: PASS 1")


@pytest.mark.parametrize("extra, said", [
    (["--python", "/nonexistent/python", "--run-repros"], "not an executable interpreter"),
    (["--python", sys.executable], "--python goes with --run-repros")])
def test_python_without_an_interpreter_or_repros_is_one_line(tmp_path, extra, said):
    done = subprocess.run([sys.executable, "-m", "harness", "upstream", str(tmp_path),
                           "--out", str(tmp_path / "drafts"), *extra],
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert said in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "drafts").exists()
