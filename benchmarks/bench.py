"""Throughput benchmark: the same fixed case set three ways in one invocation.

  naive  a plain sequential loop over run_cell in this process (no pool, no cache)
  cold   the harness as `harness run` runs it: worker pool (-j), empty cache
  warm   the same run again on the now-filled cache

Prints cells/second for each and the ratios; `--rss` reports the run's peak RSS (self + workers).
Usage: python benchmarks/bench.py [--cases N] [--jobs J] [--backends xnnpack,vulkan]
"""

from __future__ import annotations

import argparse
import logging
import resource
import sys
import tempfile
import time
import warnings
from pathlib import Path


def main() -> int:
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    p = argparse.ArgumentParser()
    p.add_argument("--cases", type=int, default=12)
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--jobs", type=int, default=None)
    p.add_argument("--backends", default="xnnpack,vulkan")
    p.add_argument("--skip-naive", action="store_true")
    p.add_argument("--vulkan-runtime", default="auto", help="auto|PATH|none, as harness run")
    args = p.parse_args()

    from harness import runner
    from harness.generate import generate
    from harness.pipeline import run_cell
    from harness.runtimes import load

    library = load.resolve(args.vulkan_runtime)
    print(f"vulkan runtime: {library or 'none (Vulkan cells end at NO_RUNTIME / static checks)'}")

    cases = generate(args.cases, args.seed)
    backends = args.backends.split(",")
    jobs = args.jobs or runner.default_jobs()
    n_cells = len(cases) * len(backends)
    results = {}

    if not args.skip_naive:
        t0 = time.perf_counter()
        with load.use(library):  # in-process, no isolation: what a plain script would do
            for case in cases:
                for b in backends:
                    run_cell(case, b, [])
        results["naive"] = time.perf_counter() - t0

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for label in ("cold", "warm"):
            out = tmp / label
            config = runner.RunConfig(backends=backends, fixes=[], profile="ci", max_examples=0,
                                      seed=args.seed, jobs=jobs, cache_dir=str(tmp / "cache"),
                                      vulkan_runtime=library)
            runner.start(out, config, cases)
            t0 = time.perf_counter()
            runner.execute(out, config, cases, progress=False)
            results[label] = time.perf_counter() - t0

    print(f"{len(cases)} cases x {len(backends)} backends = {n_cells} cells, jobs={jobs}")
    for label, secs in results.items():
        print(f"{label:>5}: {secs:7.1f} s  {n_cells / secs:6.2f} cells/s  "
              f"{60 * n_cells / secs:7.1f} cells/min")
    if "naive" in results:
        print(f"cold vs naive: {results['naive'] / results['cold']:.2f}x faster")
    print(f"warm vs cold:  {results['cold'] / results['warm']:.2f}x faster")
    peak_self = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    peak_children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"peak RSS: main {peak_self:.0f} MiB, largest worker {peak_children:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
