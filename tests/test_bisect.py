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
