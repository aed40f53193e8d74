"""Bisect steps share lowerings (issue 50): a step at a commit whose Python side (the files a
lowering reads) was lowered before, by an earlier step or by a run at a tree of that Python
digest, is served from ``<cache>/trees/lowered/<python digest>``, not lowered again. CI has no
ExecuTorch history: the trees are built here (test_run_at_tree's)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.run import at_tree
from harness.run.bisect_step import (CellEvaluator, CellSpec, lowered_dir, overlay_and_digest,
                                     vulkan_source)
from harness.runtimes import git_source
from harness.runtimes.git_source import Repo

from test_run_at_tree import XNN_CASES, fake_tree, wheel_tree


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def test_a_steps_python_digest_is_the_run_at_a_trees_and_so_is_its_lowering_folder(tmp_path):
    t = fake_tree(tmp_path)
    (t / "exir" / "passes.py").write_text("P = 1\n")
    (t / "backends" / "vulkan" / "runtime" / "conv.glsl").write_text("void main() {}\n")
    _git(t, "add", "-A")
    _git(t, "commit", "-q", "-m", "more (#8)")
    repo, cache = Repo(t), str(tmp_path / "cache")
    commit = repo.rev("HEAD")
    tree = at_tree.read_tree("HEAD", str(t), None, cache)
    ov, digest = overlay_and_digest(repo, commit, tmp_path / "ov", git_source.wheel_root(), cache)
    assert digest == tree.python_digest
    assert lowered_dir(digest, cache) == at_tree.lowering_cache(tree, cache)
    # the step's own overlay holds the commit's Python (no run at the tree laid one out yet)
    assert ov == tmp_path / "ov" and (ov / "executorch" / "exir" / "passes.py").is_file()
    # once a run at the tree laid its overlay out, a step at that digest uses it as it is
    shared = at_tree.overlay_for(tree, cache)
    ov2, digest2 = overlay_and_digest(repo, commit, tmp_path / "ov2", git_source.wheel_root(),
                                      cache)
    assert (ov2, digest2) == (shared, digest) and not (tmp_path / "ov2").exists()
    # a commit that changed only what a lowering does not read keeps the digest; Python moves it
    (t / "backends" / "vulkan" / "runtime" / "conv.glsl").write_text("void main() { }\n")
    _git(t, "commit", "-q", "-am", "shader (#9)")
    assert overlay_and_digest(repo, repo.rev("HEAD"), tmp_path / "ov3", None, cache)[1] == digest
    (t / "exir" / "passes.py").write_text("P = 2\n")
    _git(t, "commit", "-q", "-am", "pass (#10)")
    assert overlay_and_digest(repo, repo.rev("HEAD"), tmp_path / "ov4", None, cache)[1] != digest


def test_a_steps_vulkan_source_digest_is_the_run_at_a_trees(tmp_path):
    """A step's plug-in is kept per digest of what the build compiles, the key a run at a tree
    builds it under (plugins/src-<vulkan digest>.so): each serves the other."""
    t = fake_tree(tmp_path)
    repo, cache = Repo(t), str(tmp_path / "cache")
    tree = at_tree.read_tree("HEAD", str(t), None, cache)
    src = vulkan_source(repo, repo.rev("HEAD"), tmp_path / "vk")
    assert git_source.files_digest(src, git_source.vulkan_files(src))[:16] == tree.vulkan_digest
    assert not (src / "exir").exists()  # only what the build compiles


def test_the_step_command_carries_the_cache(tmp_path):
    spec = CellSpec(str(XNN_CASES), "x", "xnnpack")
    repo = Repo(fake_tree(tmp_path))
    assert "--cache" not in CellEvaluator(spec, repo, tmp_path).step_argv()
    argv = CellEvaluator(spec, repo, tmp_path, str(tmp_path / "c")).step_argv()
    assert argv[argv.index("--cache") + 1] == str(tmp_path / "c")


@pytest.mark.slow
def test_a_step_at_a_python_digest_lowered_before_is_served(tmp_path):
    """c1 and c2 differ only in version.txt: the step at c2 is served c1's lowering (a fresh
    evaluator: nothing remembered in the process), with c1's outcome; each (commit, stage) is
    evaluated once per evaluator."""
    t = wheel_tree(tmp_path)
    c1 = _git(t, "rev-parse", "HEAD")
    (t / "version.txt").write_text("1.5.2\n")
    _git(t, "commit", "-q", "-am", "bump (#2)")
    c2 = _git(t, "rev-parse", "HEAD")
    from harness.spec import load_cases

    case_id = load_cases(XNN_CASES)[0].case_id
    spec = CellSpec(str(XNN_CASES), case_id, "xnnpack")
    repo, cache = Repo(t), str(tmp_path / "cache")
    ev = CellEvaluator(spec, repo, tmp_path / "w1", cache)
    first = ev.evaluate(c1, "lowering")
    assert first.outcome is not None, first.skip_reason
    assert first.lowering == "lowered" and first.python_digest
    assert ev.evaluate(c1, "lowering").seconds == first.seconds  # remembered, not run again
    second = CellEvaluator(spec, repo, tmp_path / "w2", cache).evaluate(c2, "lowering")
    assert second.python_digest == first.python_digest
    assert second.lowering == "served" and second.outcome == first.outcome
    assert lowered_dir(first.python_digest, cache).is_dir()
