"""``harness run --shard K/N``: a deterministic, cost-balanced 1/N of a run, for CI fleets.

Shards are made of whole cases (every lane and fix set of a case stays together, so the per-case
work of prepare.py is still done once). The assignment depends only on the case list and the
lanes, never on the machine, so N machines given the same arguments split the run without
talking to each other. Balance: longest-processing-time-first on an expected cost per case; the
costs are rough relative weights from measurements on this project's 2-core runners (README).
"""

from __future__ import annotations

import math

from harness.spec import ConvCase

# Relative seconds, measured (warm workers, lavapipe): per-case eager/export work, one lane's
# lowering, extra for quantization (prepare/calibrate/convert, once per case), and execution per
# output element on a CPU Vulkan device (the 224x224x64 seed conv: ~0.4 s).
CASE_S, LANE_S, QUANT_S, PER_ELEMENT_S = 0.5, 1.3, 1.0, 1.2e-7
# and per multiply-accumulate, per lane (the size axis, issue 46: lowering packs and executing
# sums every term; a 3e8-MAC conv took 10-27 s a cell on lavapipe, 2 cores, ~5e-8 s per MAC)
PER_MAC_S = 5e-8


def parse(text: str) -> tuple[int, int]:
    """'K/N' -> (K, N) with 1 <= K <= N; ValueError naming the problem otherwise."""
    try:
        k, n = (int(part) for part in text.split("/"))
    except ValueError:
        raise ValueError(f"--shard {text!r}: expected K/N, e.g. 1/4") from None
    if not 1 <= k <= n:
        raise ValueError(f"--shard {text}: need 1 <= K <= N")
    return k, n


def expected_cost(case: ConvCase, lanes: int) -> float:
    from harness.generation.strategies import macs

    elements = math.prod(case.input_shape) * max(1, case.out_channels) / max(1, case.in_channels)
    return (CASE_S + (QUANT_S if case.quant else 0)
            + lanes * (LANE_S + PER_ELEMENT_S * elements + PER_MAC_S * macs(case)))


def assign(cases: list[ConvCase], n: int, lanes: int) -> dict[str, int]:
    """case id -> shard number (1..N); ``lanes`` is how many cells each case has."""
    load = [0.0] * n
    owner = {}
    costed = sorted(((expected_cost(c, lanes), c.case_id) for c in cases),
                    key=lambda t: (-t[0], t[1]))
    for cost, case_id in costed:
        i = min(range(n), key=lambda j: (load[j], j))
        load[i] += cost
        owner[case_id] = i + 1
    return owner


def select(cases: list[ConvCase], shard: str | None, lanes: int) -> set[str]:
    """The case ids of shard K/N (all of them when ``shard`` is None)."""
    if not shard:
        return {c.case_id for c in cases}
    k, n = parse(shard)
    return {cid for cid, s in assign(cases, n, lanes).items() if s == k}
