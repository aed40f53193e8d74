"""``harness bisect`` / ``bisect-step`` (issue 38). CI has no ExecuTorch history: the driver is
tested on small git repositories built here (a package whose behaviour flips at a known commit,
one commit that cannot be evaluated), the step on the shipped source tarballs, and the real
history only where $CONVCONF_ET_GIT names an ExecuTorch repository."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROBE = 'python -c "import pkg.calc as c; print(c.conv())"'
SEED_CASES = ROOT / "cases" / "xnnpack_conv1d_same_even.json"
SEED_CASE = "conv1d_i4o4_k4_s1_psame_d1_g1_b1_x1x4x16_q8t-aa19df26"
TARBALLS = ROOT.parent / "shared" / "executorch-src"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def make_repo(where: Path, n: int = 12, flip: int = 7, broken: int | None = 4,
              before: str = "PASS", after: str = "MISMATCH") -> Path:
    """Commits c1..cN of a tiny package: conv() says ``before`` until c<flip>, ``after`` from
    it; c<broken> does not import (a step there must be a skip)."""
    repo = where / "repo"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "t")
    (repo / "pkg").mkdir()
    (repo / "pkg" / "__init__.py").write_text("")
    for i in range(1, n + 1):
        body = f"def conv():\n    return {before if i < flip else after!r}\n"
        (repo / "pkg" / "calc.py").write_text("def conv(:\n" if i == broken else body)
        (repo / "n.txt").write_text(f"{i}\n")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", f"commit {i} (#{100 + i})")
        _git(repo, "tag", f"c{i}")
    return repo


def harness(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=600)


def bisect(repo: Path, out: Path, good="c1", bad="c12", *extra) -> subprocess.CompletedProcess:
    return harness("bisect", "--probe", PROBE, "--source", str(repo), "--good", good, "--bad", bad,
                   "--out", str(out), *extra)


def test_regression_first_bad_commit_and_bisect_json(tmp_path):
    repo = make_repo(tmp_path, flip=7, broken=4)
    done = bisect(repo, tmp_path / "out")
    assert done.returncode == 0, done.stdout + done.stderr
    c7 = _git(repo, "rev-parse", "c7")
    assert f"first bad commit: {c7} commit 7 (#107)" in done.stdout, done.stdout
    result = json.loads((tmp_path / "out" / "bisect.json").read_text())
    assert result["direction"] == "regression"
    assert result["terms"] == {"old": "good", "new": "bad"}
    assert result["good"]["commit"] == _git(repo, "rev-parse", "c1")
    assert (result["good"]["outcome"], result["bad"]["outcome"]) == ("PASS", "MISMATCH")
    first = result["first_commit"]
    assert first["commit"] == c7 and first["pr"] == 107 and first["subject"] == "commit 7 (#107)"
    assert first["date"] and "files" in first
    assert result["commits"] == 11
    assert result["evaluated_steps"] <= math.ceil(math.log2(11)) + 2
    for s in result["steps"]:  # every step: commit, outcome, status, message, seconds, skip
        assert {"commit", "outcome", "status", "message", "seconds", "skip_reason", "verdict",
                "row", "rests_on"} <= set(s)
        assert s["verdict"] in ("old", "new", "skip")
    assert len(list((tmp_path / "out" / "steps").glob("*.json"))) == len(result["steps"])
    page = (tmp_path / "out" / "bisect.html").read_text()
    assert c7[:12] in page and "#107" in page
    assert "git bisect start" in (tmp_path / "out" / "git-bisect.log").read_text()
    # the source repository is only read: no bisect state left in it
    assert not (repo / ".git" / "BISECT_LOG").exists()
    assert not (repo / ".git" / "refs" / "bisect").exists()


def test_a_commit_that_does_not_import_is_skipped_with_its_reason(tmp_path):
    repo = make_repo(tmp_path, flip=7, broken=6)  # the skip sits right before the flip
    done = bisect(repo, tmp_path / "out", "c1", "c12")
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads((tmp_path / "out" / "bisect.json").read_text())
    skipped = [s for s in result["steps"] if s["verdict"] == "skip"]
    if result["first_commit"] is None:  # git could not decide between c6 and c7: a range
        assert {c["commit"] for c in result["range"]} == {_git(repo, "rev-parse", "c6"),
                                                        _git(repo, "rev-parse", "c7")}
        assert "skipped steps leave a range" in done.stdout, done.stdout
        assert skipped and "SyntaxError" in skipped[0]["skip_reason"]
    else:  # git never needed c6
        assert result["first_commit"]["commit"] == _git(repo, "rev-parse", "c7")


def test_skip_range_is_printed(tmp_path):
    repo = make_repo(tmp_path, n=6, flip=4, broken=3)
    # c2 good, c3 broken, c4 bad: git must skip c3 and answer with the range c3..c4
    done = bisect(repo, tmp_path / "out", "c2", "c4")
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads((tmp_path / "out" / "bisect.json").read_text())
    assert result["first_commit"] is None
    want = {_git(repo, "rev-parse", "c3"), _git(repo, "rev-parse", "c4")}
    assert {c["commit"] for c in result["range"]} == want
    assert "first bad commit is one of 2" in done.stdout, done.stdout
    (skip,) = [s for s in result["steps"] if s["verdict"] == "skip"]
    assert skip["outcome"] is None and "SyntaxError" in skip["skip_reason"]


def test_fix_direction(tmp_path):
    repo = make_repo(tmp_path, flip=9, broken=None, before="NOT_DELEGATED", after="PASS")
    done = bisect(repo, tmp_path / "out")
    assert done.returncode == 0, done.stdout + done.stderr
    c9 = _git(repo, "rev-parse", "c9")
    assert f"first fixed commit: {c9} commit 9 (#109)" in done.stdout, done.stdout
    result = json.loads((tmp_path / "out" / "bisect.json").read_text())
    assert result["direction"] == "fix" and result["terms"] == {"old": "broken", "new": "fixed"}


def test_bisect_step_by_hand_exits_0_1_125(tmp_path):
    repo = make_repo(tmp_path, flip=7, broken=4)
    common = ["bisect-step", "--probe", PROBE, "--source", str(repo), "--old-outcome", "PASS",
              "--new-outcome", "MISMATCH"]
    assert harness(*common, "--commit", "c2").returncode == 0
    assert harness(*common, "--commit", "c9").returncode == 1
    skipped = harness(*common, "--commit", "c4")
    assert skipped.returncode == 125 and "SyntaxError" in skipped.stderr, skipped.stderr


@pytest.mark.parametrize("case", ["not-a-repo", "unknown-ref", "same-outcome", "reversed",
                                  "unknown-backend", "fix-not-in-lane", "unknown-case"])
def test_bad_input_is_one_line_exit_2(tmp_path, case):
    repo = make_repo(tmp_path, flip=7, broken=4)
    out = tmp_path / "out"
    if case == "not-a-repo":
        (tmp_path / "plain").mkdir()
        done = bisect(tmp_path / "plain", out)
    elif case == "unknown-ref":
        done = bisect(repo, out, "c1", "no-such-tag")
    elif case == "same-outcome":
        done = bisect(repo, out, "c1", "c3")
    elif case == "reversed":
        done = bisect(repo, out, "c12", "c1")
    else:
        cell = {"unknown-backend": ["--case", SEED_CASE, "--backend", "tpu"],
                "fix-not-in-lane": ["--case", SEED_CASE, "--backend", "xnnpack", "--fixes",
                                    "vulkan-conv-padding"],
                "unknown-case": ["--case", "no-such-case", "--backend", "xnnpack"]}[case]
        done = harness("bisect", "--cases", str(SEED_CASES), *cell, "--source", str(repo),
                       "--good", "c1", "--bad", "c12", "--out", str(out))
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("convconf: error: "), done.stderr
    assert not (out / "bisect.json").exists()


def test_direction_and_parse():
    from harness.run import bisect as b

    assert b.direction("NOT_DELEGATED", "DELEGATED") == "fix"
    assert b.direction("PASS", "RUNTIME_ERROR") == "regression"
    sha = "a" * 40
    assert b._parse_result(f"{sha} is the first fixed commit\n", "fixed") == (sha, [])
    text = ("There are only 'skip'ped commits left to test.\nThe first bad commit could be any "
            f"of:\n{'b' * 40}\n{'c' * 40}\nWe cannot bisect more!\n")
    assert b._parse_result(text, "bad") == (None, ["b" * 40, "c" * 40])


def test_pr_number_from_subject():
    from harness.runtimes.git_source import pr_number

    assert pr_number("Fix quantized Conv1d same padding (#20734)") == 20734
    assert pr_number("Fix XNN PreLU use after free (#21480) (#21845)") == 21845
    assert pr_number("no pr here") is None


@pytest.mark.skipif(not TARBALLS.is_dir(), reason="no shared/executorch-src tarballs here")
def test_step_on_a_shipped_source_tarball_is_a_skip_with_its_reason(tmp_path):
    """The tarballs hold the Vulkan runtime's source only (no exir/): committed as a
    repository, a step there cannot lay a Python side over the wheel -- a skip saying so, never
    a verdict; and the commit's Vulkan source exports as a tree the runtime build reads."""
    from harness.runtimes import git_source, source

    tarball = sorted(TARBALLS.glob("executorch-src-v1.4.1-*.tar.gz"))[0]
    repo = tmp_path / "et"
    repo.mkdir()
    with tarfile.open(tarball) as tf:
        tf.extractall(repo, filter="data")
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "t")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "v1.4.1 Vulkan runtime source (#1)")
    done = harness("bisect-step", "--cases", str(SEED_CASES), "--case", SEED_CASE, "--backend",
                   "xnnpack", "--source", str(repo), "--commit", "HEAD", "--record",
                   str(tmp_path / "steps"))
    assert done.returncode == 125, done.stdout + done.stderr
    (rec,) = (tmp_path / "steps").glob("*.json")
    step = json.loads(rec.read_text())
    assert step["verdict"] == "skip" and "exir" in step["skip_reason"], step
    r = git_source.Repo(repo)
    head = r.rev("HEAD")
    tree, written = git_source.vulkan_tree(r, head, tmp_path / "vk" / "executorch")
    assert written > 100
    src = source._from_tree(tree)
    assert src.commit == head and src.version_txt.startswith("1.4")
    again = git_source.vulkan_tree(r, head, tmp_path / "vk" / "executorch")[1]
    assert again == 0  # unchanged files are not rewritten: an incremental build stays incremental


ET_GIT = os.environ.get("CONVCONF_ET_GIT")


@pytest.mark.slow
@pytest.mark.skipif(not ET_GIT, reason="needs ExecuTorch's git history: set CONVCONF_ET_GIT to "
                    "a clone or bare mirror of pytorch/executorch")
def test_the_seed_fix_commit_and_its_parent(tmp_path):
    """#20734 (10d3009521) made the quantized Conv1d 'same' even-kernel conv delegated; its
    parent leaves it outside XNNPACK. Lowering stage: the commit's Python side only."""
    common = ["bisect-step", "--cases", str(SEED_CASES), "--case", SEED_CASE, "--backend",
              "xnnpack", "--source", ET_GIT, "--stage", "lowering", "--old-outcome",
              "NOT_DELEGATED", "--new-outcome", "DELEGATED"]
    fixed = harness(*common, "--commit", "10d3009521b0610ba9ce1bdb55ea662146129a97")
    assert fixed.returncode == 1, fixed.stderr
    parent = harness(*common, "--commit", "10d3009521b0610ba9ce1bdb55ea662146129a97~1")
    assert parent.returncode == 0, parent.stderr


# --- the bisect build tree: seeded from the stock build tree, built at its slot ---------------

def _vk_repo(where: Path) -> Path:
    """Two commits of a Vulkan runtime source: c2 changes one .cpp."""
    repo = where / "et"
    (repo / "backends/vulkan/runtime").mkdir(parents=True)
    (repo / "backends/vulkan/serialization").mkdir(parents=True)
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "t")
    (repo / "version.txt").write_text("1.5.0\n")
    (repo / "backends/vulkan/serialization/schema.fbs").write_text("table VkGraph {}\n")
    (repo / "backends/vulkan/runtime/same.cpp").write_text("int same;\n")
    for i in (1, 2):
        (repo / "backends/vulkan/runtime/moved.cpp").write_text(f"int moved = {i};\n")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", f"c{i} (#{i})")
        _git(repo, "tag", f"c{i}")
    return repo


@pytest.fixture
def fake_stock(tmp_path, monkeypatch):
    """A cache with a stock plug-in entry (source.tar.gz of c1, old mtimes) and its build tree
    parked as <name>-stock while a patched tree holds the slot; builds recorded, not run."""
    from types import SimpleNamespace

    from harness.runtimes import git_source, toolchain, vulkan, wheel as wheel_mod

    repo = _vk_repo(tmp_path)
    cache = tmp_path / "cache"
    name = "9.9.9-" + _git(repo, "rev-parse", "c1")[:12]
    entry = cache / "runtimes" / name
    entry.mkdir(parents=True)
    r = git_source.Repo(repo)
    src, _ = git_source.vulkan_tree(r, r.rev("c1"), tmp_path / "stocksrc" / "executorch")
    old = 1_600_000_000
    with tarfile.open(entry / "source.tar.gz", "w:gz") as tf:
        for p in sorted(src.rglob("*")):
            if p.is_file():
                info = tf.gettarinfo(str(p), arcname=str(p.relative_to(src)))
                info.mtime = old
                with open(p, "rb") as fh:
                    tf.addfile(info, fh)
    build = cache / "runtimes" / "build"
    stock_tree = build / f"{name}-stock"
    (stock_tree / "cmake").mkdir(parents=True)
    (stock_tree / "native").mkdir()
    (stock_tree / "cmake" / "CMakeCache.txt").write_text(
        f"CMAKE_HOME_DIRECTORY:INTERNAL={build / name / 'native'}\n")
    (stock_tree / "cmake" / "obj.o").write_text("stock object\n")
    os.utime(stock_tree / "cmake" / "obj.o", (old + 10, old + 10))
    (stock_tree / vulkan.TREE_OWNER).write_text(name + "\n")
    slot = build / name
    (slot / "cmake").mkdir(parents=True)
    (slot / vulkan.TREE_OWNER).write_text(f"{name}-pdeadbeef\n")
    manifest = SimpleNamespace(executorch_version="9.9.9", source_commit=r.rev("c1"),
                               source_copy=entry / "source.tar.gz")
    wheel = SimpleNamespace(version="9.9.9", git_version="f" * 40, root=tmp_path)
    calls = []

    def compile_plugin(work, wheel_, tc, jobs, log=print, target=None):
        owner = (work / vulkan.TREE_OWNER).read_text().strip()
        srcs = work / "src" / "executorch" / "backends" / "vulkan" / "runtime"
        calls.append({"work": work, "owner": owner,
                      "mtimes": {p.name: p.stat().st_mtime for p in srcs.glob("*.cpp")},
                      "obj": (work / "cmake" / "obj.o").stat().st_mtime
                      if (work / "cmake" / "obj.o").exists() else None})
        if getattr(compile_plugin, "fail", False):
            raise git_source.RuntimeBuildError("ninja failed (exit 1): error: boom")
        (work / "cmake").mkdir(exist_ok=True)
        (work / "cmake" / vulkan.LIBRARY).write_text(f"built from {owner}\n")
        return {"configure": 0.0, "shaders": 0.0, "compile": 0.0}

    monkeypatch.setattr(vulkan, "installed", lambda cache=None, patches=(): manifest)
    monkeypatch.setattr(vulkan, "compile_plugin", compile_plugin)
    monkeypatch.setattr(vulkan, "require_tools", lambda cache=None: None)
    monkeypatch.setattr(vulkan, "registers", lambda lib: "")
    monkeypatch.setattr(toolchain, "ensure_next_release_tools", lambda root, log=print: None)
    monkeypatch.setattr(wheel_mod, "installed", lambda: wheel)
    return SimpleNamespace(repo=r, cache=str(cache), name=name, slot=slot, stock=stock_tree,
                           calls=calls, compile=compile_plugin, old=old)


def test_bisect_tree_is_seeded_from_the_stock_tree_and_built_at_its_slot(fake_stock):
    from harness.runtimes import git_source, vulkan

    f = fake_stock
    log = []
    built = git_source.build_vulkan(f.repo, f.repo.rev("c2"), f.cache, log=log.append)
    (call,) = f.calls
    # built at the stock slot (the path its objects' commands name), as its own set
    assert call["work"] == f.slot and call["owner"] == f"{f.name}-bisect"
    assert call["obj"] == f.old + 10  # the stock objects, mtimes kept
    # unchanged sources keep the stock tarball's mtime (older than the objects): not recompiled;
    # the file the commit changed is newer: recompiled
    assert call["mtimes"]["same.cpp"] == f.old and call["mtimes"]["moved.cpp"] > f.old + 10
    assert built.tree.startswith("seeded from the stock build tree") and built.files_changed >= 1
    assert any("seeded from the stock tree" in line for line in log)
    # afterwards: the slot holds what it held (the patched tree), the stock tree is untouched,
    # the bisect tree rests in the bisect root, pinned to the slot
    assert (f.slot / vulkan.TREE_OWNER).read_text().strip() == f"{f.name}-pdeadbeef"
    assert (f.stock / "cmake" / "obj.o").read_text() == "stock object\n"
    root = git_source.bisect_root(f.cache) / "vulkan" / "9.9.9"
    assert (root / "tree" / git_source.PINNED).read_text().strip() == str(f.slot)
    assert not (root / git_source.SWAP).exists()
    assert not list(f.slot.parent.glob("*.bisect-aside"))
    assert Path(built.library).read_text() == f"built from {f.name}-bisect\n"
    # the next commit: the same tree, in place (no second seed), only what moved is rewritten
    again = git_source.build_vulkan(f.repo, f.repo.rev("c1"), f.cache, log=log.append)
    assert again.tree == "in place" and again.files_changed >= 1 and len(f.calls) == 2
    assert f.calls[1]["work"] == f.slot and f.calls[1]["mtimes"]["same.cpp"] == f.old
    # a commit built once is not built again
    assert git_source.build_vulkan(f.repo, f.repo.rev("c1"), f.cache).tree == "cached"


def test_a_failed_bisect_build_puts_the_slot_back(fake_stock):
    from harness.runtimes import git_source, vulkan

    f = fake_stock
    f.compile.fail = True
    with pytest.raises(git_source.RuntimeBuildError):
        git_source.build_vulkan(f.repo, f.repo.rev("c2"), f.cache, log=lambda s: None)
    assert (f.slot / vulkan.TREE_OWNER).read_text().strip() == f"{f.name}-pdeadbeef"
    root = git_source.bisect_root(f.cache) / "vulkan" / "9.9.9"
    assert (root / "tree" / "cmake").is_dir() and not (root / git_source.SWAP).exists()


def test_a_swap_left_by_a_killed_build_is_undone(fake_stock):
    """Killed mid-build: the bisect tree in the slot, the slot's tree aside, the journal
    naming both; the next bisect build puts them back before anything else."""
    from harness.runtimes import git_source, vulkan

    f = fake_stock
    git_source.build_vulkan(f.repo, f.repo.rev("c1"), f.cache, log=lambda s: None)
    root = git_source.bisect_root(f.cache) / "vulkan" / "9.9.9"
    aside = f.slot.with_name(f.slot.name + ".bisect-aside")
    os.rename(f.slot, aside)
    os.rename(root / "tree", f.slot)
    (root / git_source.SWAP).write_text(json.dumps(
        {"slot": str(f.slot), "owner": f"{f.name}-bisect", "aside": str(aside)}))
    git_source.build_vulkan(f.repo, f.repo.rev("c2"), f.cache, log=lambda s: None)
    assert (f.slot / vulkan.TREE_OWNER).read_text().strip() == f"{f.name}-pdeadbeef"
    assert not aside.exists() and (root / "tree" / "cmake").is_dir()
    assert f.calls[-1]["work"] == f.slot and f.calls[-1]["owner"] == f"{f.name}-bisect"


def test_without_a_stock_build_tree_the_bisect_tree_is_cold_and_built_in_place(fake_stock):
    import shutil

    from harness.runtimes import git_source

    f = fake_stock
    shutil.rmtree(f.stock)
    built = git_source.build_vulkan(f.repo, f.repo.rev("c2"), f.cache, log=lambda s: None)
    root = git_source.bisect_root(f.cache) / "vulkan" / "9.9.9"
    assert built.tree.startswith("cold") and f.calls[0]["work"] == root / "tree"
    assert (root / "tree" / git_source.PINNED).read_text().strip() == str(root / "tree")


# --- naming the cell from a run folder; the run report links bisects inside it ---------------

def _run_folder(where: Path) -> tuple[Path, dict]:
    from harness.spec import ConvCase

    run = where / "run"
    run.mkdir()
    case = ConvCase(dim=2, in_channels=3, out_channels=8, kernel_size=3, input_shape=(1, 3, 8, 8),
                    padding="valid")
    (run / "cases.json").write_text(json.dumps([case.to_dict()]))
    (run / "findings.json").write_text(json.dumps({"cells_not_pass": 1, "findings": [
        {"id": "F-1234abcd", "backend": "vulkan", "status": "RUNTIME_ERROR",
         "example": {"case_id": case.case_id, "backend": "vulkan", "fixes": "",
                     "message": "make_ivec2", "case": case.to_dict()}}]}))
    return run, case.to_dict() | {"case_id": case.case_id}


@pytest.mark.parametrize("how", ["finding", "case"])
def test_the_cell_named_from_a_run_folder(tmp_path, how):
    """--run DIR --finding F-ID (case and lane from the finding's representative) or --run DIR
    --case ID --backend NAME: the step reads the case from a one-case file it writes (here the
    tiny repository has no exir/: a skip saying so, the cell already resolved)."""
    run, case = _run_folder(tmp_path)
    repo = make_repo(tmp_path)
    name = ["--finding", "F-1234"] if how == "finding" else ["--case", case["case_id"][:20],
                                                              "--backend", "vulkan"]
    done = harness("bisect-step", "--run", str(run), *name, "--source", str(repo), "--commit",
                   "c3", "--work", str(tmp_path / "w"))
    assert done.returncode == 125, done.stdout + done.stderr
    assert "exir" in done.stderr
    (written,) = json.loads((tmp_path / "w" / "cell.json").read_text())
    assert written["padding"] == "valid" and written["input_shape"] == [1, 3, 8, 8]


@pytest.mark.parametrize("args, said", [
    (["--finding", "F-ffff"], "no findings 'F-ffff'"),
    (["--case", "nope", "--backend", "vulkan"], "no cases 'nope'"),
    (["--finding", "F-1234", "--backend", "xnnpack"], "lane vulkan"),
    (["--finding", "F-1234", "--cases", "x.json"], "no --cases or --probe"),
    ([], "--finding F-ID or --case ID"),
])
def test_a_bad_run_cell_is_one_line_exit_2(tmp_path, args, said):
    run, _ = _run_folder(tmp_path)
    repo = make_repo(tmp_path)
    done = harness("bisect", "--run", str(run), *args, "--source", str(repo), "--good", "c1",
                   "--bad", "c12", "--out", str(tmp_path / "out"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert said in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_the_run_report_links_a_bisect_inside_the_run_folder(tmp_path):
    from harness.results import bisect_page

    repo = make_repo(tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    done = bisect(repo, run / "bisect-probe")
    assert done.returncode == 0, done.stderr
    (found,) = bisect_page.found_in(run)
    assert found == run / "bisect-probe"
    html = bisect_page.links_html(run)
    assert 'href="bisect-probe/bisect.html"' in html and "first bad commit" in html
    assert "(#107)" in html
    assert bisect_page.links_html(tmp_path / "empty" if (tmp_path / "empty").mkdir() is None
                                  else tmp_path) == ""


VK_CELL = {"dim": 2, "in_channels": 1024, "out_channels": 128, "kernel_size": 3, "padding": 1,
           "input_shape": [1, 1024, 7, 7]}


@pytest.mark.slow
@pytest.mark.skipif(not ET_GIT, reason="needs ExecuTorch's git history: set CONVCONF_ET_GIT to "
                    "a clone or bare mirror of pytorch/executorch")
def test_vulkan_first_commit_and_its_parent_with_plugins_built_from_each(tmp_path):
    """#20190 (caeb005e08) routes a SlidingWindow conv2d with C_out >= 128 to im2col + GEMM:
    Conv2d(1024, 128, 3, padding=1) on 1x1024x7x7 goes from PASS (direct conv2d.glsl, its
    parent fd2cf8842e) to MISMATCH (1 of 6272 outputs past the fp32 tolerance: the GEMM sums
    its 9216-long dot products in another order) on lavapipe. Execution stage: each side runs
    on a plug-in built from its own commit (the bisect build tree, seeded from the stock one)."""
    from harness.runtimes import RuntimeBuildError, vulkan

    try:
        vulkan.require_tools()
    except RuntimeBuildError as e:
        pytest.skip(str(e))
    cases = tmp_path / "cell.json"
    cases.write_text(json.dumps([VK_CELL]))
    common = ["bisect-step", "--cases", str(cases), "--backend", "vulkan", "--source", ET_GIT,
              "--stage", "execution", "--old-outcome", "PASS", "--new-outcome", "MISMATCH",
              "--record", str(tmp_path / "steps")]
    first = harness(*common, "--commit", "caeb005e080d7c5716fafc20f2b897ee597895fe")
    assert first.returncode == 1, first.stderr
    parent = harness(*common, "--commit", "caeb005e080d7c5716fafc20f2b897ee597895fe~1")
    assert parent.returncode == 0, parent.stderr
    steps = [json.loads(p.read_text()) for p in sorted((tmp_path / "steps").glob("*.json"))]
    assert [s["outcome"] for s in steps] == ["MISMATCH", "PASS"]
    assert all("Vulkan plug-in built from" in s["rests_on"]["native"] for s in steps)


def test_a_split_findings_first_part_is_named_by_its_exact_id(tmp_path):
    """F-x (a split finding's first part) is a prefix of its other parts' F-x.yyyy: the exact id
    picks it; a prefix of both is refused naming both."""
    run, case = _run_folder(tmp_path)
    data = json.loads((run / "findings.json").read_text())
    part = json.loads(json.dumps(data["findings"][0]))
    part["id"] = "F-1234abcd.9f00"
    part["example"]["backend"] = "xnnpack"
    data["findings"].append(part)
    (run / "findings.json").write_text(json.dumps(data))
    repo = make_repo(tmp_path)
    picked = harness("bisect-step", "--run", str(run), "--finding", "F-1234ABCD", "--source",
                     str(repo), "--commit", "c3", "--work", str(tmp_path / "w"))
    assert picked.returncode == 125, picked.stdout + picked.stderr  # resolved: the vulkan cell
    refused = harness("bisect", "--run", str(run), "--finding", "F-1234", "--source", str(repo),
                      "--good", "c1", "--bad", "c12", "--out", str(tmp_path / "out"))
    assert refused.returncode == 2
    assert "F-1234abcd, F-1234abcd.9f00" in refused.stderr, refused.stderr
