"""Faults on purpose (issue 49): real runs disturbed while they work (two runs on one cache,
kill -9 of a lowering worker, an execution worker and the parent, a full disk under the journal
and under the cache, a corrupt cache entry). For each: no cell lost, no verdict other than an
undisturbed run's, and one clear line where the run had to stop. The machinery is
benchmarks/bench_faults.py's (the same faults, counted, with wall time); no sleeps: a fault waits
for the event it aims at. Marked ``faults``; the ones that run whole runs are ``slow`` too."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import bench_faults  # noqa: E402

pytestmark = pytest.mark.faults
SEED = 49


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    """The undisturbed run every fault is compared with (6 fp32 conv1d cases, XNNPACK, -j 1)."""
    return bench_faults.Bench(tmp_path_factory.mktemp("faults"), jobs=1, seed=SEED)


def _clean(o: bench_faults.Outcome) -> None:
    assert o.lost == 0, f"{o.fault}: {o.lost} cells lost"
    assert o.differ == [], f"{o.fault}: verdicts differ from the undisturbed run's: {o.differ}"


STORE = """
import resource, sys
from pathlib import Path
from harness.lane import Lane
from harness.stages.cache import Cache
from harness.stages.prepare import Prepared

entry, root, limit = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
meta = __import__("json").loads((entry / "meta.json").read_text())
prepared = Prepared.from_meta(Lane("xnnpack"), meta, b"x" * 4096)
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
for case in ("a", "b", "c"):  # three stores, one line
    Cache(root).store(case, prepared)
print("went on")
"""


def test_a_store_on_a_full_disk_is_skipped_in_one_line_and_leaves_no_half_entry(tmp_path):
    """RLIMIT_FSIZE below the program's size: every store fails; the process goes on, says so
    once, and the cache holds neither an entry nor a writer's temporary folder."""
    from harness.lane import Lane
    from harness.stages.cache import Cache

    entry = tmp_path / "entry"
    entry.mkdir()
    (entry / "meta.json").write_text(json.dumps({"status": "PASS", "phase": "lower"}))
    root = tmp_path / "cache"
    done = subprocess.run([sys.executable, "-c", STORE, str(entry), str(root), "2048"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "went on", done.stderr[-2000:]
    said = [ln for ln in done.stderr.splitlines() if ln.startswith("convconf:")]
    assert len(said) == 1 and "cannot store" in said[0] and "File too large" in said[0]
    assert list(root.glob("*/*")) == [] and not Cache(root).has("a", Lane("xnnpack"))


@pytest.mark.slow
@pytest.mark.parametrize("overlap", [False, True], ids=["same cases", "overlapping cases"])
def test_two_runs_on_one_cache_at_once_get_what_each_would_alone(bench, overlap):
    o = bench.concurrent(overlap)
    _clean(o)
    assert "exit codes [0, 0]" in o.note


@pytest.mark.slow
def test_kill_9_of_a_lowering_worker_at_a_seeded_point_loses_no_cell(bench):
    o = bench.kill_worker("lowering", bench.rng.randint(1, len(bench.cases)))
    _clean(o)  # the killed case is prepared again, per cell, in the execution workers


@pytest.mark.slow
def test_kill_9_of_an_execution_worker_loses_no_cell_and_names_the_kill(bench):
    """A worker killed mid-cell, after serving others or on its first cell: its cell runs
    again alone (a SIGKILL is never a cell's own doing: runner.cell_done), the undisturbed
    verdict."""
    o = bench.kill_worker("execution", bench.rng.randint(1, len(bench.base)))
    _clean(o)


@pytest.mark.slow
def test_kill_9_of_the_parent_then_resume_equals_the_undisturbed_run(bench):
    o = bench.kill_parent(bench.rng.randint(1, len(bench.base) - 1))
    assert o.injected == 1
    _clean(o)
    assert "resume exit 0" in o.note and o.stop_lines  # "resuming DIR: N cells already done"


@pytest.mark.slow
def test_a_full_disk_under_the_journal_stops_in_one_line_and_resume_completes(bench):
    o = bench.full_journal(bench.rng.randint(1, len(bench.base) - 1))
    assert o.injected == 1
    assert len(o.stop_lines) == 1 and "the run stopped" in o.stop_lines[0], o.stop_lines
    assert "--resume" in o.stop_lines[0] and "exit 3 " in o.note
    _clean(o)


@pytest.mark.slow
def test_a_full_disk_under_the_cache_changes_no_verdict(bench):
    o = bench.full_cache()
    if o.note.startswith("skipped"):
        pytest.skip(o.note)
    _clean(o)
    assert o.stop_lines and "could not be stored" in o.stop_lines[0]


@pytest.mark.slow
@pytest.mark.parametrize("how", ["bit-flipped", "truncated"])
def test_a_corrupt_entry_in_a_warm_cache_is_lowered_again(bench, how):
    o = bench.corrupt(how)
    _clean(o)
    assert len(o.stop_lines) == 1 and "entry replaced: yes" in o.note



@pytest.mark.slow
def test_a_plugin_build_killed_halfway_leaves_no_half_entry_and_the_next_build_is_whole(tmp_path):
    """A real patched plug-in build killed -9 (its whole process group) once ninja compiles:
    no entry or staging folder left, nothing served for the patch set; the next build finishes
    with a library that matches its manifest's sha256 and registers VulkanBackend."""
    from harness.runtimes import vulkan

    if vulkan.installed() is None:
        pytest.skip("no stock plug-in here to build the patched one from")
    o = bench_faults.plugin_build_killed(tmp_path)
    assert o.injected == 1, o.note
    _clean(o)  # differ: half entries / a served half build; lost: the next build not whole
