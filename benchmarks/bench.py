"""Throughput benchmark: the same fixed case set several ways in one invocation (ratios are what
to read; absolute numbers depend on the machine, printed in the header).

  profile  cProfile of warm lowerings per lane, before/after the pattern-graph memo
  naive    the independent baseline: a plain sequential loop over run_cell, stock ExecuTorch (no
           memo, no sharing, no reuse, no pool, no cache) that lowers and executes every cell of
           every lane itself; one child process per Vulkan plug-in (the stock one, each runtime
           fix set's patched one: what `harness run` executes that lane on), restarted after a
           cell that kills it
  cold     the harness as `harness run` runs it: worker pool (-j), empty cache; all lanes
           together, then each backend's lanes alone (cells/min per backend)
  warm     the same run again on the now-filled cache (executions are redone: always)

Lanes as `harness run --fixes`: "" (stock only), "all", "each" or names. Vulkan cells execute
when the plug-in is built (`harness runtime build vulkan`; patched plug-ins are built or taken
from the cache first, as `harness run` does).
Usage: python benchmarks/bench.py [--cases 24] [--jobs J] [--backends xnnpack,vulkan] [--fixes all]
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
sys.path[:0] = [str(HERE), str(HERE.parent)]  # this checkout's harness, not an installed one
# ... in the children too (the naive loop, the warm command, the pools' workers)
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(HERE.parent)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])


def naive_child(plan_file: str, library: str, start: int) -> None:
    """The naive loop itself (run as a child, the plan's plug-in loaded): every cell of the plan
    lowered and executed by ``run_cell``, one line per finished cell, flushed."""
    from harness.results import lanes as lane_names
    from harness.runtimes import load
    from harness.spec import ConvCase
    from harness.stages import lowering_memo
    from harness.stages.cell import run_cell

    plan = json.loads(Path(plan_file).read_text())
    cases = [ConvCase.from_dict(c) for c in plan["cases"]]
    cells = [(cases[i], lane_names.parse(name)) for i, name in plan["cells"]]
    with lowering_memo.disabled(), load.use(library or None):
        for i in range(start, len(cells)):
            case, lane = cells[i]
            t0 = time.perf_counter()
            row = run_cell(case, lane.backend, lane.fixes)
            print(f"CELL {i} {lane.backend} {time.perf_counter() - t0:.3f} {row.status}", flush=True)


def naive(cases, config, tmp: Path) -> dict:
    """-> {"total": s, backend: s, "deaths": n, "cells": n}: every cell of the run's lanes, one
    child per plug-in the harness would execute the lane on, restarted past a cell that killed
    it."""
    from harness.run import runner

    by_library: dict = {}
    for case, lane in runner.cells(cases, config):
        by_library.setdefault(runner.library_for(config, lane)[0] or "", []).append((case, lane))
    deaths, n_cells, statuses = 0, 0, {}
    spent = {b: 0.0 for b in config.backends}
    t0 = time.perf_counter()
    for k, (library, plan_cells) in enumerate(by_library.items()):
        plan_file = tmp / f"naive-plan-{k}.json"
        index = {c.case_id: i for i, c in enumerate(cases)}
        plan_file.write_text(json.dumps({"cases": [c.to_dict() for c in cases],
                                         "cells": [[index[c.case_id], lane.name]
                                                   for c, lane in plan_cells]}))
        n, start = len(plan_cells), 0
        n_cells += n
        while start < n:
            proc = subprocess.run([sys.executable, __file__, "--naive-child", str(plan_file),
                                   library, str(start)], capture_output=True, text=True)
            done = [ln.split() for ln in proc.stdout.splitlines() if ln.startswith("CELL ")]
            for _, i, backend, secs, status in done:
                spent[backend] += float(secs)
                case, lane = plan_cells[int(i)]
                statuses[(case.case_id, lane.name)] = status
            start = (int(done[-1][1]) + 1) if done else start
            if proc.returncode != 0:  # a cell killed the loop: a plain script would stop here
                case, lane = plan_cells[start]
                statuses[(case.case_id, lane.name)] = "CRASH"
                deaths += 1
                start += 1
    return {"total": time.perf_counter() - t0, **spent, "deaths": deaths, "cells": n_cells,
            "statuses": statuses}


def run_config(backends: list[str], fixes: str, jobs: int, library: str | None, cache: Path):
    """The RunConfig `harness run --fixes FIXES` makes (lanes, patched plug-ins prepared)."""
    from harness.run import runner

    each = fixes.strip() == "each"
    config = runner.RunConfig(backends=backends,
                              fixes=runner.validate_names(backends, "all" if each else fixes),
                              fixes_each=each, profile="ci", max_examples=0, seed=0, jobs=jobs,
                              cache_dir=str(cache), vulkan_runtime=library)
    runner.prepare_runtimes(config, log=lambda line: None)
    return config


def harness_run(cases, backends: list[str], fixes: str, jobs: int, library: str | None,
                out: Path, cache: Path) -> tuple[float, "object"]:
    from harness.run import runner

    config = run_config(backends, fixes, jobs, library, cache)
    runner.start(out, config, cases)
    t0 = time.perf_counter()
    df = runner.execute(out, config, cases, progress=False)
    return time.perf_counter() - t0, df


def warm_command(cases, backends: list[str], fixes: str, jobs: int, library: str | None,
                 tmp: Path) -> float:
    """The warm rerun as a user types it: interpreter, imports, forkserver, matrix, findings."""
    cases_file = tmp / "warm-cases.json"
    cases_file.write_text(json.dumps([c.to_dict() for c in cases]))
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "harness", "run", "--out", tmp / "warm-cli",
                    "--cases", cases_file, "--max-examples", "0", "--backends", ",".join(backends),
                    "--cache", tmp / "c", "-j", str(jobs), "--vulkan-runtime", library or "none",
                    "--no-progress", "--no-report"] + (["--fixes", fixes] if fixes else []),
                   check=True, capture_output=True)
    return time.perf_counter() - t0


def main() -> int:
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    p = argparse.ArgumentParser()
    p.add_argument("--cases", type=int, default=24)
    p.add_argument("--cases-file", help="these cases (a JSON list of cases, as `harness run "
                   "--cases` reads) instead of --cases generated ones: the same set across "
                   "checkouts whose generator differs")
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--jobs", type=int, default=None)
    p.add_argument("--backends", default="xnnpack,vulkan")
    p.add_argument("--fixes", default="", help='as harness run: "", "all", "each" or names')
    p.add_argument("--skip-naive", action="store_true")
    p.add_argument("--skip-profile", action="store_true")
    p.add_argument("--skip-alone", action="store_true", help="no per-backend cold runs")
    p.add_argument("--profile-cases", type=int, default=3)
    p.add_argument("--vulkan-runtime", default="auto", help="auto|PATH|none, as harness run")
    p.add_argument("--naive-child", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.naive_child:
        naive_child(args.naive_child[0], args.naive_child[1], int(args.naive_child[2]))
        return 0

    from harness.run import runner
    from harness import versions
    from harness.generation.generate import generate
    from harness.runtimes import load
    from tree_rss import PeakRSS

    library = load.resolve(args.vulkan_runtime)
    if args.cases_file:
        from harness.spec import ConvCase

        cases = [ConvCase.from_dict(c) for c in json.loads(Path(args.cases_file).read_text())]
    else:
        cases = generate(args.cases, args.seed)
    backends = args.backends.split(",")
    jobs = args.jobs or runner.default_jobs()
    fixes = args.fixes
    lanes = runner.lanes(run_config(backends, fixes, jobs, library, Path("unused")))
    n_cells = len(cases) * len(lanes)
    stack = versions.stack()
    print(f"executorch {stack['executorch']}, torch {stack['torch']}, {os.cpu_count()} cores, "
          f"jobs={jobs}, load average {os.getloadavg()[0]:.1f} at the start")
    print(f"lanes ({len(lanes)}): {', '.join(lane.name for lane in lanes)}")
    print(f"vulkan runtime: {library or 'none (Vulkan cells end at NO_RUNTIME / static checks)'}")
    if library:
        devices = load.describe(library).get("devices") or []
        print(f"vulkan device: {devices[0].get('deviceName') if devices else 'none found'}")

    if not args.skip_profile:
        from profile_lowering import report

        with load.use(library):
            for line in report(generate(args.profile_cases, args.seed + 1), backends):
                print(line)

    times, per_lane, naive_statuses = {}, {}, {}
    with tempfile.TemporaryDirectory() as tmp, PeakRSS() as peak:
        tmp = Path(tmp)
        if not args.skip_naive:
            result = naive(cases, run_config(backends, fixes, jobs, library, tmp / "unused"), tmp)
            times["naive"] = result["total"]
            per_lane["naive"] = {b: result[b] for b in backends}
            if result["deaths"]:
                print(f"naive: the loop died {result['deaths']} time(s) (restarted past the cell)")
            naive_statuses = result["statuses"]
        times["cold"], df = harness_run(cases, backends, fixes, jobs, library, tmp / "cold",
                                        tmp / "c")
        times["warm"], _ = harness_run(cases, backends, fixes, jobs, library, tmp / "warm",
                                       tmp / "c")
        times["warm, whole command"] = warm_command(cases, backends, fixes, jobs, library, tmp)
        per_lane["cold"] = {}
        for b in backends if len(backends) > 1 and not args.skip_alone else []:
            per_lane["cold"][b], _ = harness_run(cases, [b], fixes, jobs, library,
                                                 tmp / f"cold-{b}", tmp / f"c-{b}")
    reused, verdicts = reuse_counts(df, run_config(backends, fixes, jobs, library, Path("unused")))
    executed = df[df.run_time_s.notna()] if "run_time_s" in df else df.iloc[:0]
    print(f"{len(cases)} cases x {len(lanes)} lanes = {n_cells} cells, jobs={jobs}; "
          f"with a run time per backend: {executed.backend.value_counts().to_dict()}")
    print("statuses: " + "; ".join(f"{lane}: {counts}" for lane, counts in status_table(df)))
    if naive_statuses:
        from harness.lane import Lane

        cold = {(r.case_id, Lane.of(r.backend, r.fixes or "").name): r.status
                for r in df.itertuples()}
        differ = [f"{c} {lane}: naive {s}, harness {cold.get((c, lane))}"
                  for (c, lane), s in sorted(naive_statuses.items()) if cold.get((c, lane)) != s]
        print(f"naive and cold agree on {len(naive_statuses) - len(differ)} of "
              f"{len(naive_statuses)} cells' status" + "".join(f"\n    {d}" for d in differ))
    if reused is None:
        print(f"lowering reused: 0 of {n_cells} cells (this harness lowers every cell)")
    else:
        print(f"lowering reused: {reused} of {n_cells} cells (same program as another lane of the "
              f"case); {verdicts} of them not executed either (same program, same plug-in: "
              f"that lane's verdict)")
    for label, secs in times.items():
        print(f"{label:>5}: {secs:7.1f} s  {n_cells / secs:6.2f} cells/s  "
              f"{60 * n_cells / secs:7.1f} cells/min")
    per_backend = {b: sum(1 for lane in lanes if lane.backend == b) * len(cases) for b in backends}
    for label, secs_by_backend in per_lane.items():
        for b, secs in secs_by_backend.items():
            print(f"{label:>5} {b}: {secs:7.1f} s  {60 * per_backend[b] / secs:7.1f} cells/min"
                  + (" (its lanes alone)" if label == "cold" else " (its share of the loop)"))
    if "naive" in times:
        print(f"cold vs naive: {times['naive'] / times['cold']:.2f}x faster")
    print(f"warm vs cold:  {times['cold'] / times['warm']:.2f}x faster (in-process execute(); "
          f"{times['cold'] / times['warm, whole command']:.2f}x as a whole `harness run`)")
    print(f"peak PSS: {peak.pss_mib:.0f} MiB for the whole process tree (RSS summed "
          f"{peak.total_mib:.0f} MiB: shared pages once per process), largest process "
          f"{peak.largest_mib:.0f} MiB")
    return 0


def reuse_counts(df, config) -> tuple[int | None, int]:
    """(cells whose lowering was reused, how many of those reused the verdict too: same
    plug-in as the lane they reused); (None, 0) for a harness without the column."""
    from harness.lane import Lane
    from harness.run import runner

    if "reused_from" not in df:
        return None, 0
    reused = df[df.reused_from.fillna("") != ""]
    verdicts = 0
    for r in reused.itertuples():
        lane = Lane.of(r.backend, r.fixes or "")
        source = Lane.of(r.backend, "" if r.reused_from == "stock" else r.reused_from.lstrip("+"))
        verdicts += runner.library_for(config, lane) == runner.library_for(config, source)
    return len(reused), verdicts


def status_table(df) -> list[tuple[str, dict]]:
    """(lane, {status: cells}) per lane of a matrix, for the statuses line."""
    from harness.lane import Lane

    lanes = [Lane.of(b, f).name for b, f in zip(df.backend, df.fixes.fillna(""), strict=True)]
    counts = df.assign(lane=lanes).groupby("lane").status.value_counts()
    return [(lane, counts[lane].to_dict()) for lane in sorted(set(lanes))]


if __name__ == "__main__":
    sys.exit(main())
