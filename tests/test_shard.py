"""--shard K/N and `harness merge`: a merged 2-shard run equals the unsharded run cell for cell."""

import json
import shutil
import random
import subprocess
import sys

import pandas as pd
import pytest

from harness.run import shard
from harness.generation.generate import generate


def harness(*args):
    return subprocess.run([sys.executable, "-m", "harness", *map(str, args)], capture_output=True,
                          text=True, timeout=900)


def one_error_line(proc, *words):
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("convconf: error: "), proc.stderr
    for w in words:
        assert w in lines[0], lines[0]


def test_assignment_is_a_partition_balanced_and_independent_of_order():
    cases = generate(200, 6)
    owner = shard.assign(cases, 4, lanes=4)
    assert set(owner) == {c.case_id for c in cases} and set(owner.values()) == {1, 2, 3, 4}
    shuffled = cases[:]
    random.Random(1).shuffle(shuffled)
    assert shard.assign(shuffled, 4, lanes=4) == owner  # the same on every machine
    load = {k: sum(shard.expected_cost(c, 4) for c in cases if owner[c.case_id] == k)
            for k in (1, 2, 3, 4)}
    assert max(load.values()) / min(load.values()) < 1.05, load
    picked = [shard.select(cases, f"{k}/4", 4) for k in (1, 2, 3, 4)]
    assert sum(map(len, picked)) == len(cases) and set().union(*picked) == set(owner)


@pytest.mark.parametrize("bad", ["0/2", "3/2", "2", "a/b"])
def test_bad_shard_is_one_line(tmp_path, bad):
    one_error_line(harness("run", "--out", tmp_path / "r", "--max-examples", "2",
                           "--shard", bad), "--shard")
    assert not (tmp_path / "r").exists()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One small run three ways: whole, and as shards 1/2 and 2/2 (both lanes, fixes, Vulkan
    executing when the plug-in is built), sharing one cache as a CI fleet would not need to."""
    root = tmp_path_factory.mktemp("shards")
    common = ["--max-examples", "6", "--seed", "5", "--fixes", "all", "--no-progress",
              "--no-report", "--cache", root / "cache", "-j", "1"]
    for name, extra in (("whole", []), ("s1", ["--shard", "1/2"]), ("s2", ["--shard", "2/2"])):
        proc = harness("run", "--out", root / name, *common, *extra)
        assert proc.returncode == 0, proc.stderr[-2000:]
    return root


def test_two_shards_merged_equal_the_unsharded_run(runs):
    s1 = pd.read_csv(runs / "s1" / "matrix.csv")
    s2 = pd.read_csv(runs / "s2" / "matrix.csv")
    assert len(s1) and len(s2) and not set(s1.case_id) & set(s2.case_id)  # whole cases split
    # as CI does: each shard's folder downloaded elsewhere (an artifact) before the merge
    moved = runs / "downloaded"
    for shard in ("s1", "s2"):
        shutil.copytree(runs / shard, moved / shard)
    proc = harness("merge", moved / "s1", moved / "s2", "--out", runs / "merged")
    assert proc.returncode == 0, proc.stderr
    assert "2 shards merged" in proc.stdout
    whole = pd.read_csv(runs / "whole" / "matrix.csv")
    merged = pd.read_csv(runs / "merged" / "matrix.csv")
    cols = ["case_id", "backend", "fixes", "status", "message", "max_abs_error", "predicted"]
    assert list(merged.case_id) == list(whole.case_id)  # the unsharded order, too
    pd.testing.assert_frame_equal(merged[cols], whole[cols])
    header = json.loads((runs / "merged" / "run.json").read_text())
    assert header["shard"] is None and set(header["shards"]) == {"1/2", "2/2"}
    for derived in ("report.html", "findings.json", "junit.xml"):
        assert (runs / "merged" / derived).exists()


def test_merge_refuses_what_is_not_one_run(runs, tmp_path):
    one_error_line(harness("merge", runs / "s1", "--out", tmp_path / "a"), "missing [2]")
    one_error_line(harness("merge", runs / "s1", runs / "whole", "--out", tmp_path / "b"),
                   "not a shard")
    other = tmp_path / "s2-other"
    subprocess.run(["cp", "-r", runs / "s2", other], check=True)
    header = json.loads((other / "run.json").read_text())
    (other / "run.json").write_text(json.dumps({**header, "seed": 99}))
    one_error_line(harness("merge", runs / "s1", other, "--out", tmp_path / "c"), "seed")
    (other / "run.json").write_text(json.dumps(header))
    lines = (other / "journal.jsonl").read_text().splitlines(keepends=True)
    (other / "journal.jsonl").write_text("".join(lines[:-1]))  # a shard killed before its end
    one_error_line(harness("merge", runs / "s1", other, "--out", tmp_path / "d"),
                   "incomplete", "--resume")
    for name in "abcd":
        assert not (tmp_path / name / "matrix.csv").exists()
    one_error_line(harness("merge", runs / "s1", runs / "s2", "--out", runs / "whole"),
                   "already holds a run")


def test_the_nightly_artifact_flow_on_one_machine(runs, vulkan_runtime, tmp_path):
    """nightly.yml's jobs on one machine, each on its own copy of what it downloads: the shards'
    folders (artifacts) merged; the merged run downloaded again, bundled; run.sh on the bundle
    alone (the GPU job; lavapipe here, no Python on PATH); the merged run downloaded a third time
    and the device results ingested into it; its report. The result is the unsharded run cell for
    cell, and the device lane has the in-process Vulkan statuses."""
    def download(src, dst):  # an artifact: a copy at another path, file modes not kept
        shutil.copytree(src, dst, copy_function=shutil.copyfile)
        return dst

    shards = [download(runs / s, tmp_path / "merge-job" / s) for s in ("s1", "s2")]
    merged = tmp_path / "merge-job" / "run"
    proc = harness("merge", *shards, "--out", merged)
    assert proc.returncode == 0, proc.stderr
    bundled = download(merged, tmp_path / "gpu-bundle-job" / "run")
    proc = harness("bundle", bundled, "--out", tmp_path / "gpu-bundle-job" / "bundle")
    assert proc.returncode == 0, proc.stderr
    gpu = tmp_path / "gpu-job"
    shutil.copytree(tmp_path / "gpu-bundle-job" / "bundle", gpu / "bundle")  # the tarball keeps modes
    device = subprocess.run(["sh", str(gpu / "bundle" / "run.sh"), str(gpu / "results")],
                            capture_output=True, text=True, timeout=900,
                            env={"PATH": "/usr/bin:/bin"})
    assert device.returncode == 0, device.stderr
    final = download(merged, tmp_path / "gpu-ingest-job" / "run")
    results = download(gpu / "results", tmp_path / "gpu-ingest-job" / "results")
    proc = harness("ingest", final, results, "--device-name", "lavapipe")
    assert proc.returncode == 0, proc.stderr
    proc = harness("report", final)
    assert proc.returncode == 0, proc.stderr

    whole = pd.read_csv(runs / "whole" / "matrix.csv", keep_default_na=False)
    after = pd.read_csv(final / "matrix.csv", keep_default_na=False)
    cols = ["case_id", "backend", "fixes", "status", "message", "max_abs_error", "predicted"]
    local = after[after.backend != "vulkan@lavapipe"].reset_index(drop=True)
    pd.testing.assert_frame_equal(local[cols], whole[cols])
    lowered = whole[(whole.backend == "vulkan") & ~whole.status.isin(["LOWER_ERROR", "INVALID"])]
    vulkan = {(r.case_id, r.fixes): r.status for r in lowered.itertuples()}  # a program to bundle
    there = after[after.backend == "vulkan@lavapipe"]
    assert len(there) == len(vulkan) > 0
    assert {(r.case_id, r.fixes): r.status for r in there.itertuples()} == vulkan
    page = (final / "report.html").read_text()
    assert "vulkan@lavapipe" in page and "llvmpipe" in page
