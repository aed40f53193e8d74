"""The benchmark script keeps working (its numbers are read by people, not asserted on)."""

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "bench.py"


@pytest.mark.slow
def test_benchmark_runs_all_three_ways():
    proc = subprocess.run([sys.executable, str(BENCH), "--cases", "2", "--backends", "xnnpack",
                           "--jobs", "1", "--profile-cases", "1"], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    for label in ("naive:", "cold:", "warm:", "warm, whole command:", "cold vs naive:",
                  "warm vs cold:", "peak PSS:", "profile xnnpack before (stock):",
                  "profile xnnpack after (memo):"):
        assert label in out, out
    assert "2 cases x 1 lanes = 2 cells" in out
    assert "naive and cold agree on 2 of 2 cells' status" in out, out  # same statuses both ways
    assert "lowering reused:" in out
    profiled = [ln for ln in out.splitlines() if ln.startswith("    ") and "%" in ln]
    assert len(profiled) >= 2, out  # where the time goes, before and after


def test_tree_memory_counts_shared_pages_once(tmp_path):
    """A forked child shares its parent's pages: the tree's RSS sum counts them twice, its PSS
    once (what bench.py and tree_rss.py report as the tree's memory)."""
    child = ("import os, time\n"
             "block = bytearray(os.urandom(1 << 20)) * 200  # 200 MiB, touched\n"
             "if os.fork() == 0:\n"
             "    time.sleep(3); os._exit(0)\n"
             "os.wait()\n")
    proc = subprocess.run([sys.executable, str(BENCH.parent / "tree_rss.py"), sys.executable,
                           "-c", child], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.strip().splitlines()[-1]
    pss = float(line.split("peak PSS ")[1].split(" MiB")[0])
    rss = float(line.split("RSS summed ")[1].split(" MiB")[0])
    assert 200 <= pss < 300 and rss >= 400, line
