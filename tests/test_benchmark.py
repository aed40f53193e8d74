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
                  "warm vs cold:", "peak RSS:", "profile xnnpack before (stock):",
                  "profile xnnpack after (memo):"):
        assert label in out, out
    assert "2 cases x 1 lanes = 2 cells" in out
    assert "naive and cold agree on 2 of 2 cells' status" in out, out  # same statuses both ways
    assert "lowering reused:" in out
    profiled = [ln for ln in out.splitlines() if ln.startswith("    ") and "%" in ln]
    assert len(profiled) >= 2, out  # where the time goes, before and after
