"""Where one warm cell's static stages spend their time, per lane, before and after the
per-process pattern-graph memo (harness/stages/lowering_memo.py): cProfile, top functions by
cumulative time. "Before" is stock ExecuTorch (graphs rebuilt on every lowering)."""

from __future__ import annotations

import contextlib
import cProfile
import pstats
import time

# The call chain every cell goes through (export -> to_edge_transform_and_lower -> ...) holds
# most of the time and says nothing; what sits below it is where the time goes.
_CHAIN = 0.6
_GENERIC = {"wrapper", "_", "inner", "__call__", "wrapper_function", "_fn", "<module>"}


def _name(func: tuple) -> str:
    path, line, name = func
    short = path.split("site-packages/")[-1] if "site-packages/" in path else path.split("/")[-1]
    return f"{short}:{line}({name})"


def profile_lane(cases, backend: str, memo: bool, top: int = 5):
    """-> (mean seconds per cell, [(share of the time, function)] top ``top``)."""
    from harness.stages import lowering_memo
    from harness.lane import Lane
    from harness.stages.cell import prepare

    scope = contextlib.nullcontext() if memo else lowering_memo.disabled()
    with scope:
        for case in cases:  # imports, first-call costs, memos: a worker pays them once
            prepare(case, Lane(backend))
        profiler = cProfile.Profile()
        t0 = time.perf_counter()
        profiler.enable()
        for case in cases:
            prepare(case, Lane(backend))
        profiler.disable()
        wall = time.perf_counter() - t0
    stats = pstats.Stats(profiler).stats  # func -> (cc, nc, tottime, cumtime, callers)
    rows = sorted(((cum / wall, _name(f)) for f, (_, _, _, cum, _) in stats.items()
                   if cum / wall < _CHAIN and f[2] not in _GENERIC and "harness/" not in f[0]
                   and not f[0].startswith("~")), reverse=True)
    return wall / len(cases), rows[:top]


def report(cases, backends: list[str]) -> list[str]:
    lines = []
    for backend in backends:
        for memo in (False, True):
            mean, rows = profile_lane(cases, backend, memo)
            label = "after (memo)" if memo else "before (stock)"
            lines.append(f"profile {backend} {label}: {mean:.2f} s per warm cell; top below "
                         f"the common call chain (share of the time, cumulative):")
            lines.extend(f"    {share:6.1%}  {name}" for share, name in rows)
    return lines
