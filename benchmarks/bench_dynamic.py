"""Lowering cost of a dynamic case (issue 39): one lowering however many sizes it executes.

For N sizes, a ``dynamic="spatial"`` XNNPACK case is prepared (exported with Dims, lowered once)
and executed at its N sizes on one loaded method; beside it, the same N sizes as N static cases
(N lowerings). Lowerings are counted (prepare.lower wrapped) and timed.

    python benchmarks/bench_dynamic.py [--sizes 1,3,6,12] [--backend xnnpack]

Prints one row per N: lowerings and seconds for the dynamic case and for the N static cases.
Measured (2026-12-06, 2 shared cores at load ~6, first row without the warm-up):
N = 3: 1 lowering, 9.0 s vs 3 lowerings, 15.5 s; N = 6: 1, 6.6 s vs 6, 37.2 s;
N = 12: 1, 8.5 s vs 12, 76.0 s (all PASS).
"""

from __future__ import annotations

import argparse
import time

from harness.lane import Lane
from harness.spec import ConvCase
from harness.stages import prepare as prepare_module
from harness.stages.cell import execute

BASE = dict(dim=2, in_channels=4, out_channels=8, kernel_size=3, padding=1,
            input_shape=(1, 4, 8, 8))


def sizes(n: int) -> list[list[int]]:
    """N spatial sizes from 4x4 up (H and W both vary; the first two are the bounds)."""
    out = [[1, 4, 4 + i, 4 + 2 * i] for i in range(n)]
    return out if n < 2 else [out[0], out[-1], *out[1:-1]]


class Counter:
    def __init__(self):
        self.calls, self.seconds = 0, 0.0
        self.real = prepare_module.lower

    def __call__(self, *a, **k):
        t0 = time.perf_counter()
        try:
            return self.real(*a, **k)
        finally:
            self.calls += 1
            self.seconds += time.perf_counter() - t0


def measure(cases: list[ConvCase], lane: Lane) -> tuple[int, float, float, list]:
    """(lowerings, lowering seconds, total seconds, statuses) for preparing and executing."""
    counter = Counter()
    prepare_module.lower = counter
    try:
        t0 = time.perf_counter()
        statuses = []
        for case in cases:
            prepared = prepare_module.prepare_case(case, [lane])[lane]
            row = execute(case, prepared)
            statuses.append(row.status)
        return counter.calls, counter.seconds, time.perf_counter() - t0, statuses
    finally:
        prepare_module.lower = counter.real


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,3,6,12")
    parser.add_argument("--backend", default="xnnpack")
    args = parser.parse_args()
    lane = Lane(args.backend, ())
    measure([ConvCase(**BASE)], lane)  # warm-up: imports and the first lowering's setup
    print(f"{'sizes':>5} | {'dynamic: lowerings':>18} {'lower s':>8} {'total s':>8} | "
          f"{'static: lowerings':>17} {'lower s':>8} {'total s':>8}")
    for n in (int(v) for v in args.sizes.split(",")):
        shapes = sizes(n)
        if n >= 2:
            dynamic = [ConvCase(**BASE, dynamic="spatial", dynamic_sizes=shapes)]
        else:  # one size: the static case is all there is to compare
            dynamic = [ConvCase(**{**BASE, "input_shape": tuple(shapes[0])})]
        static = [ConvCase(**{**BASE, "input_shape": tuple(s)}) for s in shapes]
        d = measure(dynamic, lane)
        s = measure(static, lane)
        print(f"{n:>5} | {d[0]:>18} {d[1]:>8.2f} {d[2]:>8.2f} | {s[0]:>17} {s[1]:>8.2f} "
              f"{s[2]:>8.2f}", flush=True)


if __name__ == "__main__":
    main()
