"""``harness run --executorch REF --source GITDIR`` / ``--executorch-tree DIR`` (issue 50): a run at
an ExecuTorch commit or working tree. CI has no ExecuTorch history: the trees here are built by
the tests (a git repository whose exir/ and backends/ are the installed wheel's own Python, so
its Python imports against the wheel), the real history only where a bisect test names it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.run import at_tree
from harness.runtimes import git_source, tree as tree_mod
from harness.runtimes.tree import EtTree, TreeError

ROOT = Path(__file__).resolve().parents[1]
XNN_CASES = ROOT / "cases" / "short_int_lists_2d.json"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def fake_tree(where: Path, exir_init: str = "", git: bool = True) -> Path:
    """The smallest folder that is an ExecuTorch tree: exir/, backends/ (a Vulkan runtime file
    too), version.txt; a git repository with one commit unless ``git`` is False."""
    t = where / "executorch"
    (t / "exir").mkdir(parents=True)
    (t / "exir" / "__init__.py").write_text(exir_init)
    (t / "backends" / "vulkan" / "runtime").mkdir(parents=True)
    (t / "backends" / "__init__.py").write_text("")
    (t / "backends" / "vulkan" / "runtime" / "conv.glsl").write_text("void main() {}\n")
    (t / "backends" / "vulkan" / "partition.py").write_text("X = 1\n")
    (t / "version.txt").write_text("9.9.9\n")
    if git:
        _git(t, "init", "-q")
        _git(t, "config", "user.email", "t@example.com")
        _git(t, "config", "user.name", "t")
        _git(t, "add", "-A")
        _git(t, "commit", "-q", "-m", "the tree (#7)")
    return t


def wheel_tree(where: Path) -> Path:
    """An ExecuTorch tree whose Python side is the installed wheel's own (exir/, backends/
    Python and data files), committed: its lowerings are the wheel's."""
    root = git_source.wheel_root()
    t = where / "executorch"
    for top in git_source.OVERLAID:
        shutil.copytree(root / top, t / top, ignore=lambda d, names: [
            n for n in names if (Path(d) / n).is_file() and not n.endswith(
                git_source.DATA_SUFFIXES)] + ["__pycache__"])
    (t / "version.txt").write_text("1.5.1\n")
    _git(t, "init", "-q")
    _git(t, "config", "user.email", "t@example.com")
    _git(t, "config", "user.name", "t")
    _git(t, "add", "-A")
    _git(t, "commit", "-q", "-m", "the wheel's Python (#1)")
    return t


def harness(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def existing_run(where: Path) -> tuple[Path, dict]:
    """A run folder that already holds something: what is in it, byte for byte."""
    out = where / "run"
    out.mkdir()
    (out / "journal.jsonl").write_text('{"x": 1}\n')
    (out / "keep.txt").write_text("mine\n")
    return out, {p.name: p.read_bytes() for p in out.iterdir()}


def _one_error_line(done) -> str:
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(lines) == 1 and lines[0].startswith("convconf: error: "), done.stderr
    return lines[0]


# --- bad input: one line, exit 2, nothing written into the run folder --------------------------

def test_a_folder_that_is_not_executorch_is_one_line_and_leaves_the_run_folder(tmp_path):
    out, before = existing_run(tmp_path)
    (tmp_path / "notet").mkdir()
    done = harness("run", "--executorch-tree", str(tmp_path / "notet"), "--out", str(out),
                   "--overwrite", "--backends", "xnnpack", "--max-examples", "0")
    line = _one_error_line(done)
    assert "is not an ExecuTorch source tree" in line and "exir/__init__.py" in line
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_an_unknown_ref_is_one_line_and_leaves_the_run_folder(tmp_path):
    t = fake_tree(tmp_path)
    out, before = existing_run(tmp_path)
    done = harness("run", "--executorch", "no-such-ref", "--source", str(t), "--out", str(out),
                   "--overwrite", "--backends", "xnnpack", "--max-examples", "0")
    assert "'no-such-ref' is not a commit" in _one_error_line(done)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_a_tree_whose_python_does_not_import_is_one_line_and_leaves_the_run_folder(tmp_path):
    t = fake_tree(tmp_path, exir_init="raise ImportError('exir needs a newer wheel')\n")
    out, before = existing_run(tmp_path)
    done = harness("run", "--executorch-tree", str(t), "--out", str(out), "--overwrite",
                   "--backends", "xnnpack", "--max-examples", "0", "--cache",
                   str(tmp_path / "cache"))
    line = _one_error_line(done)
    assert "does not import against the installed executorch" in line
    assert "exir needs a newer wheel" in line
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_option_combinations_are_one_line(tmp_path):
    t = fake_tree(tmp_path)
    done = harness("run", "--executorch", "HEAD", "--out", str(tmp_path / "o"))
    assert "needs --source GITDIR" in _one_error_line(done)
    done = harness("run", "--executorch", "HEAD", "--source", str(t), "--executorch-tree",
                   str(t), "--out", str(tmp_path / "o"))
    assert "exclude each other" in _one_error_line(done)
    assert not (tmp_path / "o").exists()


# --- the tree: commit, dirty, digests --------------------------------------------------------

def test_a_checkout_names_its_commit_and_says_dirty_with_the_changed_files(tmp_path):
    t = fake_tree(tmp_path)
    head = _git(t, "rev-parse", "HEAD")
    clean = tree_mod.from_checkout(t)
    assert (clean.commit, clean.dirty, clean.changed) == (head, False, [])
    assert clean.label == head[:12] and clean.subject == "the tree (#7)"
    (t / "backends" / "vulkan" / "runtime" / "conv.glsl").write_text("void main() { }\n")
    dirty = tree_mod.from_checkout(t)
    assert dirty.dirty is True and dirty.label == f"{head[:12]} (dirty)"
    assert dirty.changed == ["backends/vulkan/runtime/conv.glsl"]
    shutil.rmtree(t / ".git")
    unknown = tree_mod.from_checkout(t)
    assert unknown.dirty is None and "changes unknown" in unknown.label


def test_a_ref_is_exported_from_a_bare_repository(tmp_path):
    t = fake_tree(tmp_path)
    first = _git(t, "rev-parse", "HEAD")
    (t / "exir" / "__init__.py").write_text("# second\n")
    _git(t, "commit", "-q", "-am", "second (#8)")
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(t), str(bare)], check=True)
    got = tree_mod.from_ref(bare, first[:8], tmp_path / "scratch")
    assert got.commit == first and got.ref == first[:8] and got.dirty is False
    assert (Path(got.path) / "exir" / "__init__.py").read_text() == ""  # the commit's, not HEAD's
    with pytest.raises(TreeError, match="is not a commit"):
        tree_mod.from_ref(bare, "v0.0.0", tmp_path / "scratch")


def test_the_python_digest_moves_with_python_only_and_the_vulkan_digest_with_the_runtime(tmp_path):
    t = fake_tree(tmp_path, git=False)

    def digests():
        return (git_source.files_digest(t, git_source.python_files(t)),
                git_source.files_digest(t, git_source.vulkan_files(t)))

    py0, vk0 = digests()
    (t / "backends" / "vulkan" / "runtime" / "conv.glsl").write_text("// shader edit\n")
    py1, vk1 = digests()
    assert py1 == py0 and vk1 != vk0  # a shader change lowers nothing again
    (t / "backends" / "vulkan" / "partition.py").write_text("X = 2\n")
    py2, vk2 = digests()
    assert py2 != py1 and vk2 == vk1  # a partitioner change builds no plug-in


def test_the_overlay_holds_the_trees_python_and_links_the_rest_of_the_wheel(tmp_path):
    t = fake_tree(tmp_path, git=False)
    (t / "exir" / "native.cpp").write_text("int x;\n")  # not Python: not overlaid
    ov = git_source.overlay_from_dir(t, tmp_path / "ov")
    pkg = ov / "executorch"
    assert (pkg / "exir" / "__init__.py").is_file() and not (pkg / "exir" / "native.cpp").exists()
    assert (pkg / "backends" / "vulkan" / "partition.py").read_text() == "X = 1\n"
    wheel = git_source.wheel_root()
    linked = {p.name for p in pkg.iterdir() if p.is_symlink()}
    assert linked == {p.name for p in wheel.iterdir()} - {"exir", "backends", "__pycache__"}
    assert json.loads((ov / "OVERLAY.json").read_text())["tree"] == str(t)


# --- what a verdict rests on ------------------------------------------------------------------

def _tree(**kw) -> EtTree:
    base = dict(path="/t", commit="a" * 40, dirty=True, wheel="executorch 1.5.1 (3b6068392324)",
                native={"xnnpack": ""}, kernels_moved=[], vulkan_plugin="/p.so")
    return EtTree(**{**base, **kw})


def test_a_verdict_is_the_trees_only_where_the_native_side_it_runs_on_is_the_trees():
    t = _tree()
    assert t.unfaithful("xnnpack") == "" and t.unfaithful("vulkan") == ""
    assert t.rests_on("vulkan") == "Python aaaaaaaaaaaa (dirty); Vulkan plug-in from " \
                                   "aaaaaaaaaaaa (dirty)"
    assert "xnnpack runtime, = aaaaaaaaaaaa (dirty)'s" in t.rests_on("xnnpack")
    # ops outside the delegate run the wheel's kernels: only the moved ones make it unfaithful
    moved = _tree(kernels_moved=["kernels/portable/cpu/op_slice_copy.cpp"])
    assert moved.unfaithful("vulkan", {"aten.add.Tensor": 1}) == ""
    assert "op_slice_copy.cpp" in moved.unfaithful("vulkan", {"aten.slice_copy.Tensor": 1})
    unknown = _tree(kernels_moved=None, source="/repo")
    assert "cannot tell" in unknown.unfaithful("xnnpack", {"aten.add.Tensor": 1})
    assert unknown.unfaithful("xnnpack", {}) == ""  # nothing outside the delegate
    # the wheel's XNNPACK runtime not shown equal; no plug-in; runtime patches; the schema
    assert "differs" in _tree(native={"xnnpack": "differs"}).unfaithful("xnnpack")
    assert "(unverified)" in _tree(native={"xnnpack": "differs"}).rests_on("xnnpack")
    assert "no Vulkan plug-in" in _tree(vulkan_plugin="", vulkan_problem="x").unfaithful("vulkan")
    assert "runtime patches" in t.unfaithful("vulkan", patched=True)
    assert "schema" in _tree(schema_moved=["schema/program.fbs"]).unfaithful("xnnpack")
    assert t.unfaithful("vulkan@h200") == ""  # ingested device results: judged where they ran


def test_kernel_paths_of_edge_ops():
    assert tree_mod.kernel_paths(["aten.slice_copy.Tensor"]) == [
        "kernels/portable/cpu/op_slice_copy.cpp", "kernels/quantized/cpu/op_slice_copy.cpp"]
    assert "kernels/quantized/cpu/op_quantize.cpp" in tree_mod.kernel_paths(
        ["quantized_decomposed.quantize_per_tensor.default"])


def test_the_tree_options_are_left_out_of_the_inner_run():
    argv = ["run", "--executorch", "v1", "--source=/g", "--out", "o", "--executorch-tree", "d",
            "--cases", "a.json"]
    assert at_tree.inner_argv(argv) == ["run", "--out", "o", "--cases", "a.json"]


def test_the_record_round_trips_and_the_header_names_the_commit(tmp_path):
    from harness.header import RunHeader

    t = _tree()
    back = EtTree.from_dict(json.loads(t.save(tmp_path / "t.json").read_text()))
    assert back == t
    h = RunHeader(versions={"executorch": "1.5.1"}, executorch_tree=t.to_dict())
    assert h.executorch_label == "executorch aaaaaaaaaaaa (dirty) over 1.5.1"
    assert RunHeader(versions={"executorch": "1.5.1"}).executorch_label == "executorch 1.5.1"


# --- a real run at a tree (the wheel's own Python, committed) ------------------------------

@pytest.mark.slow
def test_a_run_at_a_tree_lowers_with_its_python_and_says_what_each_cell_rests_on(tmp_path):
    import pandas as pd

    t = wheel_tree(tmp_path)
    head = _git(t, "rev-parse", "HEAD")
    out = tmp_path / "run"
    done = harness("run", "--executorch-tree", str(t), "--backends", "xnnpack", "--cases",
                   str(XNN_CASES), "--max-examples", "0", "-j", "1", "--out", str(out),
                   "--no-progress", "--no-report", "--cache", str(tmp_path / "cache"))
    assert done.returncode == 0, done.stdout + done.stderr
    header = json.loads((out / "run.json").read_text())
    assert header["executorch_tree"]["commit"] == head
    assert header["executorch_tree"]["label"] == head[:12]
    assert header["cache_dir"].startswith(str(tmp_path / "cache" / "trees" / "lowered"))
    df = pd.read_csv(out / "matrix.csv")
    assert len(df) == 4 and df["rests_on"].str.startswith(f"Python {head[:12]};").all()
    # the wheel's commit is not in this repository: nothing executed is claimed for the tree
    executed = df[~df["status"].isin(["LOWER_ERROR", "INVALID", "NOT_DELEGATED"])]
    assert (executed["status"] == "NO_RUNTIME").all()
    assert executed["message"].str.contains("cannot tell whether").all()


# --- harness bisect --run-diff ----------------------------------------------------------------

def test_flipped_cells_with_one_lane_status_pair_and_culprit_are_one_flip():
    import pandas as pd

    from harness.run.bisect_flips import group

    rows = [  # case, backend, fixes, old, new, change, component_new
        ("a", "vulkan", "", "PASS", "MISMATCH", "regressed", "delegate:vulkan:conv2d_dw"),
        ("b", "vulkan", "", "PASS", "MISMATCH", "regressed", "delegate:vulkan:conv2d_dw"),
        ("c", "vulkan", "", "PASS", "MISMATCH", "regressed", "delegate:vulkan:conv2d"),
        ("d", "xnnpack", "", "NO_RUNTIME", "NOT_DELEGATED", "unexecuted", "partitioner"),
        ("e", "vulkan", "vk-x", "PASS", "MISMATCH", "regressed", "delegate:vulkan:conv2d_dw"),
        ("f", "vulkan", "", "PASS", "PASS", "same", ""),
    ]
    table = pd.DataFrame(rows, columns=["case_id", "backend", "fixes", "old", "new", "change",
                                        "component_new"])
    flips = group(table)
    assert [(f.lane, f.cells) for f in flips] == [
        ("vulkan", ["a", "b"]), ("vulkan", ["c"]), ("vulkan+vk-x", ["e"]), ("xnnpack", ["d"])]
    assert "a (+1 more) [vulkan] PASS -> MISMATCH: not bisected" in flips[0].line()
    flips[0].first_commit = {"commit": "f" * 40, "subject": "Route conv (#20190)", "pr": 20190}
    flips[0].direction = "regression"
    assert flips[0].line().endswith("ffffffffffff Route conv (#20190), regression")


def test_run_diff_needs_two_runs_at_clean_commits(tmp_path):
    from harness.runfolder import RunFolder

    runs = []
    for name, tree in (("wheel", None), ("dirty", {"commit": "a" * 40, "dirty": True,
                                                  "label": "aaaaaaaaaaaa (dirty)"})):
        d = tmp_path / name
        d.mkdir()
        RunFolder(d).write_header({"run_id": name, "versions": {"executorch": "1.5.1"},
                                   "executorch_tree": tree})
        runs.append(d)
    t = fake_tree(tmp_path)
    done = harness("bisect", "--run-diff", str(runs[0]), str(runs[1]), "--source", str(t),
                   "--out", str(tmp_path / "b"))
    assert "is not a run at an ExecuTorch commit" in _one_error_line(done)
    done = harness("bisect", "--run-diff", str(runs[1]), str(runs[1]), "--source", str(t),
                   "--out", str(tmp_path / "b"))
    assert "uncommitted changes are in no commit" in _one_error_line(done)
    done = harness("bisect", "--run-diff", str(runs[1]), str(tmp_path / "nope"), "--source",
                   str(t), "--out", str(tmp_path / "b"))
    assert "not a run folder" in _one_error_line(done)


REFUSE_CONV = ("        kernel_node = get_input_node(node, 1)\n"
               "        kernel_shape = get_shape(kernel_node)\n")


@pytest.mark.slow
def test_runs_at_two_commits_diff_and_every_flip_bisects_to_its_commit(tmp_path):
    """A repository of the wheel's Python: c2 makes XNNPACK's partitioner refuse every conv
    (a real lowering change), c3 touches nothing a lowering reads. Runs at c1 and c3, their
    diff, and --run-diff naming c2."""
    import pandas as pd

    t = wheel_tree(tmp_path)
    c1 = _git(t, "rev-parse", "HEAD")
    gemm = t / "backends" / "xnnpack" / "partition" / "config" / "gemm_configs.py"
    text = gemm.read_text()
    assert text.count(REFUSE_CONV) == 1
    gemm.write_text(text.replace(REFUSE_CONV, "        return False  # refuse every conv\n"
                                 + REFUSE_CONV))
    _git(t, "commit", "-q", "-am", "XNNPACK: refuse convs (#2)")
    c2 = _git(t, "rev-parse", "HEAD")
    (t / "version.txt").write_text("1.5.2\n")
    _git(t, "commit", "-q", "-am", "bump (#3)")
    cases = tmp_path / "one.json"
    cases.write_text(json.dumps(json.loads(XNN_CASES.read_text())[:1]))
    for ref in ("HEAD~2", "HEAD"):
        done = harness("run", "--executorch", ref, "--source", str(t), "--backends", "xnnpack",
                       "--cases", str(cases), "--max-examples", "0", "-j", "1", "--out",
                       str(tmp_path / ref.replace("~", "-")), "--no-progress", "--no-report",
                       "--cache", str(tmp_path / "cache"))
        assert done.returncode == 0, done.stdout + done.stderr
    old, new = tmp_path / "HEAD-2", tmp_path / "HEAD"
    got = pd.read_csv(new / "matrix.csv")["status"].tolist()
    assert got == ["NOT_DELEGATED"]  # harness-made: the test's own commit c2 refuses every conv
    done = harness("diff", str(old), str(new))
    said = " ".join(done.stdout.split())  # the console wraps long lines
    assert f"executorch {c1[:12]} over 1.5.1 ->" in said, done.stdout
    done = harness("bisect", "--run-diff", str(old), str(new), "--source", str(t), "--out",
                   str(tmp_path / "b"), "--cache", str(tmp_path / "cache"))
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((tmp_path / "b" / "bisect.json").read_text())
    (flip,) = summary["flips"]
    assert flip["first_commit"]["commit"] == c2 and flip["direction"] == "regression"
    assert flip["stage"] == "lowering"
    # c2 against its parent c1 alone (c1 is the --good end: no step more)
    assert flip["confirmed"] == f"{c1[:12]} DELEGATED, {c2[:12]} NOT_DELEGATED"
    assert f"{c2[:12]} XNNPACK: refuse convs (#2), regression" in done.stdout
    assert json.loads((new / "flips.json").read_text())["flips"][0]["line"] == flip["line"]


def test_resuming_a_run_at_a_tree_whose_overlay_is_gone_is_one_line(tmp_path):
    out, before = existing_run(tmp_path)
    _tree(python_digest="0" * 16).save(out / at_tree.RECORD)
    before[at_tree.RECORD] = (out / at_tree.RECORD).read_bytes()
    done = harness("run", "--resume", str(out), "--cache", str(tmp_path / "cache"))
    line = _one_error_line(done)
    assert "the overlay of aaaaaaaaaaaa (dirty)" in line and "is gone" in line
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_the_report_names_the_tree_and_shows_the_flips_on_top(tmp_path):
    from harness.record import CellResult
    from harness.results import matrix, report
    from harness.runfolder import RunFolder
    from harness.spec import load_cases

    case = load_cases(XNN_CASES)[0]
    t = _tree(subject="the tree (#7)", changed=["backends/vulkan/runtime/conv.glsl"])
    folder = RunFolder(tmp_path)
    folder.write_cases([case])
    folder.write_header({"run_id": "r", "versions": {"executorch": "1.5.1"},
                         "backends": ["xnnpack"], "executorch_tree": t.to_dict()})
    row = CellResult(case, "xnnpack", status="NO_RUNTIME", message="cannot tell",
                     rests_on=t.rests_on("xnnpack"))
    matrix.write(matrix.frame([row.to_row()]), tmp_path)
    flip = {"cells": [case.case_id, "b"], "lane": "xnnpack", "old": "NOT_DELEGATED",
            "new": "NO_RUNTIME", "direction": "fix", "range": [], "error": "",
            "first_commit": {"commit": "f" * 40, "subject": "Fix conv (#20734)", "pr": 20734}}
    (tmp_path / "flips.json").write_text(json.dumps(
        {"old_run": {"label": "executorch e2f18eb23c45 over 1.5.1"}, "flips": [flip]}))
    html = report.write(tmp_path).read_text()
    assert "<title>convconf report: executorch aaaaaaaaaaaa (dirty) over 1.5.1</title>" in html
    assert "At ExecuTorch aaaaaaaaaaaa (dirty)</b> (the tree (#7))" in html
    assert "Uncommitted: backends/vulkan/runtime/conv.glsl" in html
    top = html[html.index('id="commit-flips"'):html.index('id="summary"')]
    assert "Flips since executorch e2f18eb23c45 over 1.5.1" in top
    assert "(+1 more)" in top and "<code>ffffffffffff</code> Fix conv (#20734)" in top
    # bisect --run-diff's table: cells that flip for one commit are one line, lanes together
    line = {**flip, "cells": [case.case_id, "b", "c"], "lanes": ["xnnpack", "xnnpack+fx"],
            "changes": ["NOT_DELEGATED -> NO_RUNTIME", "NOT_DELEGATED -> PASS"]}
    (tmp_path / "flips.json").write_text(json.dumps(
        {"old_run": {"label": "executorch e2f18eb23c45 over 1.5.1"}, "flips": [flip, flip],
         "commits": [line]}))
    html = report.write(tmp_path).read_text()
    top = html[html.index('id="commit-flips"'):html.index('id="summary"')]
    assert top.count('<tr class="flip">') == 1 and "(+2 more)" in top
    assert "xnnpack, xnnpack+fx" in top
    assert "NOT_DELEGATED &rarr; NO_RUNTIME; NOT_DELEGATED &rarr; PASS" in top
