"""Throughput benchmark: the same fixed case set several ways in one invocation (ratios are what
to read; absolute numbers depend on the machine, printed in the header).

  profile  cProfile of warm lowerings per lane, before/after the pattern-graph memo
  naive    a plain sequential loop over run_cell, stock ExecuTorch (no memo, no sharing, no
           pool, no cache), in a child process restarted after a cell that kills it
  cold     the harness as `harness run` runs it: worker pool (-j), empty cache; both lanes
           together, then each lane alone (cells/min per lane)
  warm     the both-lane run again on the now-filled cache (executions are redone: always)

Vulkan cells execute when the plug-in is built (`harness runtime build vulkan`).
Usage: python benchmarks/bench.py [--cases 24] [--jobs J] [--backends xnnpack,vulkan]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def naive_child(cases_file: str, backends: str, library: str, start: int) -> None:
    """The naive loop itself (run as a child): one line per finished cell, flushed."""
    from harness.stages import lowering_memo
    from harness.stages.cell import run_cell
    from harness.runtimes import load
    from harness.spec import ConvCase

    cases = [ConvCase.from_dict(c) for c in json.loads(Path(cases_file).read_text())]
    cells = [(c, b) for c in cases for b in backends.split(",")]
    with lowering_memo.disabled(), load.use(library or None):
        for i in range(start, len(cells)):
            t0 = time.perf_counter()
            row = run_cell(cells[i][0], cells[i][1], [])
            print(f"CELL {i} {cells[i][1]} {time.perf_counter() - t0:.3f} {row.status}", flush=True)


def naive(cases, backends: list[str], library: str | None, tmp: Path) -> dict:
    """-> {"total": s, lane: s, "deaths": n}: the loop, restarted past a cell that killed it."""
    cases_file = tmp / "naive-cases.json"
    cases_file.write_text(json.dumps([c.to_dict() for c in cases]))
    n, start, deaths = len(cases) * len(backends), 0, 0
    spent = {b: 0.0 for b in backends}
    t0 = time.perf_counter()
    while start < n:
        proc = subprocess.run([sys.executable, __file__, "--naive-child", str(cases_file),
                               ",".join(backends), library or "", str(start)],
                              capture_output=True, text=True)
        done = [ln.split() for ln in proc.stdout.splitlines() if ln.startswith("CELL ")]
        for _, _i, lane, secs, _status in done:
            spent[lane] += float(secs)
        start = (int(done[-1][1]) + 1) if done else start
        if proc.returncode != 0:  # a cell killed the loop: a plain script would stop here
            deaths += 1
            start += 1
    return {"total": time.perf_counter() - t0, **spent, "deaths": deaths}


def harness_run(cases, backends: list[str], jobs: int, library: str | None, out: Path,
                cache: Path) -> tuple[float, "object"]:
    from harness.run import runner

    config = runner.RunConfig(backends=backends, fixes=[], profile="ci", max_examples=0, seed=0,
                              jobs=jobs, cache_dir=str(cache), vulkan_runtime=library)
    runner.start(out, config, cases)
    t0 = time.perf_counter()
    df = runner.execute(out, config, cases, progress=False)
    return time.perf_counter() - t0, df


def warm_command(cases, backends: list[str], jobs: int, library: str | None, tmp: Path) -> float:
    """The warm rerun as a user types it: interpreter, imports, forkserver, matrix, findings."""
    cases_file = tmp / "warm-cases.json"
    cases_file.write_text(json.dumps([c.to_dict() for c in cases]))
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "harness", "run", "--out", tmp / "warm-cli",
                    "--cases", cases_file, "--max-examples", "0", "--backends", ",".join(backends),
                    "--cache", tmp / "c", "-j", str(jobs), "--vulkan-runtime", library or "none",
                    "--no-progress", "--no-report"], check=True, capture_output=True)
    return time.perf_counter() - t0


def main() -> int:
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    p = argparse.ArgumentParser()
    p.add_argument("--cases", type=int, default=24)
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--jobs", type=int, default=None)
    p.add_argument("--backends", default="xnnpack,vulkan")
    p.add_argument("--skip-naive", action="store_true")
    p.add_argument("--skip-profile", action="store_true")
    p.add_argument("--profile-cases", type=int, default=3)
    p.add_argument("--vulkan-runtime", default="auto", help="auto|PATH|none, as harness run")
    p.add_argument("--naive-child", nargs=4, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.naive_child:
        naive_child(args.naive_child[0], args.naive_child[1], args.naive_child[2],
                    int(args.naive_child[3]))
        return 0

    from harness.run import runner
    from harness import versions
    from harness.generation.generate import generate
    from harness.runtimes import load
    from tree_rss import PeakRSS

    library = load.resolve(args.vulkan_runtime)
    cases = generate(args.cases, args.seed)
    backends = args.backends.split(",")
    jobs = args.jobs or runner.default_jobs()
    n_cells = len(cases) * len(backends)
    stack = versions.stack()
    print(f"executorch {stack['executorch']}, torch {stack['torch']}, {os.cpu_count()} cores, "
          f"jobs={jobs}")
    print(f"vulkan runtime: {library or 'none (Vulkan cells end at NO_RUNTIME / static checks)'}")
    if library:
        devices = load.describe(library).get("devices") or []
        print(f"vulkan device: {devices[0].get('deviceName') if devices else 'none found'}")

    if not args.skip_profile:
        from profile_lowering import report

        with load.use(library):
            for line in report(generate(args.profile_cases, args.seed + 1), backends):
                print(line)

    times, per_lane = {}, {}
    with tempfile.TemporaryDirectory() as tmp, PeakRSS() as peak:
        tmp = Path(tmp)
        if not args.skip_naive:
            result = naive(cases, backends, library, tmp)
            times["naive"] = result["total"]
            per_lane["naive"] = {b: result[b] for b in backends}
            if result["deaths"]:
                print(f"naive: the loop died {result['deaths']} time(s) (restarted past the cell)")
        times["cold"], df = harness_run(cases, backends, jobs, library, tmp / "cold", tmp / "c")
        times["warm"], _ = harness_run(cases, backends, jobs, library, tmp / "warm", tmp / "c")
        times["warm, whole command"] = warm_command(cases, backends, jobs, library, tmp)
        per_lane["cold"] = {}
        for b in backends if len(backends) > 1 else []:
            per_lane["cold"][b], _ = harness_run(cases, [b], jobs, library, tmp / f"cold-{b}",
                                                 tmp / f"c-{b}")
    executed = df[df.status.isin(["PASS", "MISMATCH", "RUNTIME_ERROR", "CRASH"])]
    print(f"{len(cases)} cases x {len(backends)} backends = {n_cells} cells, jobs={jobs}; "
          f"executed per lane: {executed.backend.value_counts().to_dict()}")
    for label, secs in times.items():
        print(f"{label:>5}: {secs:7.1f} s  {n_cells / secs:6.2f} cells/s  "
              f"{60 * n_cells / secs:7.1f} cells/min")
    for label, lanes in per_lane.items():
        for b, secs in lanes.items():
            print(f"{label:>5} {b}: {secs:7.1f} s  {60 * len(cases) / secs:7.1f} cells/min"
                  + (" (lane alone)" if label == "cold" else " (its share of the loop)"))
    if "naive" in times:
        print(f"cold vs naive: {times['naive'] / times['cold']:.2f}x faster")
    print(f"warm vs cold:  {times['cold'] / times['warm']:.2f}x faster (in-process execute(); "
          f"{times['cold'] / times['warm, whole command']:.2f}x as a whole `harness run`)")
    print(f"peak RSS: {peak.total_mib:.0f} MiB for the whole process tree, largest process "
          f"{peak.largest_mib:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
