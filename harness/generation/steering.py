"""Steering: more cases where the routing models say a case list leaves code unreached.

``steer(cases, extra, seed)`` adds up to ``extra`` cases, each predicted to reach a code path no
case so far is predicted to reach: a Vulkan conv shader (stages/backends/vulkan_routing.py, read
from the runtime's shader selection) or an XNNPACK conv path (xnnpack_paths.predict).

First it aims: the targets are the *reachable* paths (stages/backends/routing_grid.py: every
route the models give over a grid of the case fields they read, on a device without Mali and
with int8 dot products, cases the generators draw and the runtime does not refuse) that the list
leaves unreached. Greedily, it takes the grid leaves (of either model's exploration, the other
model asked at the leaf's case) that reach the most targets at once, new Vulkan shaders first,
then XNNPACK paths, keeps the cheapest of those (output elements), and Hypothesis draws a case
there: which leaf, and the details the leaf leaves open (group count, kernel among the "other" sizes,
wide C_out, sizes, hardtanh bounds, int or tuple spellings). The case is kept when it reaches as
many targets as its leaf promised. Then, for whatever is left of ``extra``, it draws candidates
from the run's own strategy and keeps the ones that reach anything new.

Across nights (``earlier``, the nightly's coverage state, harness/nights.py): the aimed targets
are only the reachable paths *no earlier night reached*; then, after the layout values, the
budget goes to cases of case-space cells (nights.space_cell) no earlier night ran and the list
lacks, drawn from the same candidates; only what is left after that fills as above.

Reproducible: the seed, the case list, the state and the models decide everything (no device, no plug-in
source is consulted), so every shard of a run draws the same steered cases; ``harness run``
shards after steering. The predictions only choose cases; what a cell reached is observed when
it runs (coverage.json), and where the Vulkan model was wrong the run lists it.
"""

from __future__ import annotations

import math
from functools import lru_cache

from hypothesis import HealthCheck, Phase, given, seed as hyp_seed, settings, strategies as st

from harness.nights import NightState, space_cell
from harness.spec import ConvCase
from harness.stages.backends import routing_grid, vulkan_routing, xnnpack_paths

# What the nightly passes (noxfile.py nightly, nightly.yml's shards): the smallest --steer that
# takes the nightly profile's 300 generated cases (seed 0) to every reachable path, predicted:
# Vulkan 12/50 reachable shaders -> 50/50, XNNPACK 18/40 reachable paths -> 40/40 (31 already
# give 45/50 = 90% of the Vulkan shaders; the 300 reach all three XNNPACK node kinds).
NIGHTLY_STEER = 45
CHUNK = 64  # candidates per Hypothesis example
ROUNDS = 16  # examples drawn (CHUNK * ROUNDS candidates)
TRIES = 6  # Hypothesis examples per aimed case (the last that reaches its targets is kept)
CHEAP = 2  # aim at leaves whose output is at most CHEAP x the smallest of the equally good


def buckets(case: ConvCase) -> set[str]:
    """The code paths ``case`` is predicted to reach: ``vulkan:<shader>``, ``xnnpack:<path>``."""
    out = set()
    route = vulkan_routing.predict(case)
    if route:  # a refused route, or a shader the source lacks, dispatches nothing
        out.update(f"vulkan:{s}" for s in route.dispatched)
    path = xnnpack_paths.predict(case)
    if path:
        out.add(f"xnnpack:{path}")
    return out


@st.composite
def routed_cases(draw):
    """Cases aimed at one routing family each (vulkan_routing.py's rules): depthwise 2d with a
    3x3/5x5/other kernel and stride equal to or unlike dilation, wide convs (im2col + GEMM),
    pointwise, direct, transposed, conv1d channels- and height-packed, int8 2d (general, im2col,
    pointwise, depthwise); fp32/fp16, with or without a fused relu/hardtanh and a bias. Every
    input is large enough for its kernel."""
    family = draw(st.sampled_from(["dw2d", "wide2d", "pw2d", "direct2d", "tconv2d", "conv1d",
                                   "pw1d", "dw1d", "int8"]))
    dtype = draw(st.sampled_from(["float32", "float16"]))
    epilogue = draw(st.sampled_from([(), ("relu",), (("hardtanh", 0.0, 6.0),),
                                     ("batchnorm", "relu")]))
    bias = draw(st.booleans())
    c = draw(st.integers(1, 8))
    k = draw(st.sampled_from([3, 5, 2, 4]))
    stride = draw(st.integers(1, 2))
    dilation = draw(st.sampled_from([stride, 1, 2]))
    extra = draw(st.integers(0, 4))
    common = dict(bias=bias, epilogue=epilogue, dtype=dtype)
    if family in ("dw1d", "pw1d", "conv1d"):
        kk = 1 if family == "pw1d" else k
        g = c if family == "dw1d" else 1
        out = c if family == "dw1d" else draw(st.integers(1, 8))
        return ConvCase(dim=1, in_channels=c, out_channels=out, kernel_size=kk, groups=g,
                        stride=stride, dilation=dilation,
                        input_shape=(1, c, dilation * (kk - 1) + 1 + extra), **common)
    if family == "int8":
        common.update(dtype="float32", quant=draw(st.sampled_from(["int8_per_tensor",
                                                                  "int8_per_channel"])))
        shape = draw(st.sampled_from(["general", "pointwise", "depthwise", "grouped"]))
        c = 4 * draw(st.integers(1, 9)) if draw(st.booleans()) else c
        if shape == "pointwise":
            k, stride, dilation = 1, 1, 1
        g = c if shape == "depthwise" else (2 if shape == "grouped" and c % 2 == 0 else 1)
        out = c if shape == "depthwise" else g * draw(st.integers(1, 4))
        size = dilation * (k - 1) + 1 + extra
        return ConvCase(dim=2, in_channels=c, out_channels=out, kernel_size=k, groups=g,
                        stride=stride, dilation=dilation, input_shape=(1, c, size, size),
                        **common)
    if family == "pw2d":
        k = 1
    if family == "tconv2d":
        return ConvCase(dim=2, transposed=True, in_channels=c, out_channels=draw(st.integers(1, 8)),
                        kernel_size=k, stride=stride, input_shape=(1, c, 2 + extra, 2 + extra),
                        **common)
    g, out = 1, draw(st.integers(1, 8))
    if family == "dw2d":
        g, out = c, c
    elif family == "wide2d":
        out, dilation = draw(st.sampled_from([128, 160])), 1
    size = dilation * (k - 1) + 1 + extra
    return ConvCase(dim=2, in_channels=c, out_channels=out, kernel_size=k, groups=g,
                    stride=stride, dilation=dilation, input_shape=(1, c, size, size), **common)


def candidates():
    """Where steering draws from: the run's own mix, and the same strategy narrowed to what the
    Vulkan delegate takes as a conv (1d/2d, batch 1, fp32/fp16; int8 2d), where most of the
    shader variants are."""
    from harness.generation.strategies import conv_cases, mixed_cases

    delegatable = conv_cases(dims=(1, 2), batch=st.just(1),
                             dtypes=st.sampled_from(["float32", "float16"]))
    int8 = conv_cases(dims=(2,), batch=st.just(1), transposed=st.just(False),
                      quant=st.sampled_from(["int8_per_tensor", "int8_per_channel"]))
    return st.one_of(mixed_cases(), delegatable, int8, routed_cases())


@lru_cache(maxsize=None)
def reachable() -> frozenset:
    """The buckets steering aims at: the paths the models route a generated case to (Vulkan:
    no Mali, int8 dot products, the shaders the source has; XNNPACK: its known paths)."""
    here = routing_grid.vulkan_names(mali=False, int8_dot=True)[0]
    paths = routing_grid.xnnpack().reachable
    return frozenset({f"vulkan:{n}" for n in here} | {f"xnnpack:{p}" for p in paths})


@lru_cache(maxsize=None)
def _leaves() -> tuple:
    """(leaf, its buckets, its output elements) for the grid leaves of either model (each
    model's exploration, the other model asked at the leaf's own case), generated cases only."""
    out = []
    for leaf in routing_grid.vulkan_leaves() + routing_grid.xnnpack_leaves():
        if leaf.answer[0]:  # never generated
            continue
        case = leaf.case()
        found = frozenset(buckets(case))
        if found:
            out.append((leaf, found, math.prod(case.output_shape())))
    return tuple(out)


def _gain(found, targets: set) -> tuple:
    """What reaching ``found`` is worth: new Vulkan shaders first, then new XNNPACK paths."""
    new = found & targets
    vk = sum(b.startswith("vulkan:") for b in new)
    return vk, len(new) - vk


def _draw_toward(tied: list, targets: set, gain: tuple, key: str, seen: set) -> ConvCase | None:
    """A case at one of ``tied`` (grid leaves), its details drawn by Hypothesis (seeded by
    ``key``), worth ``gain``; else the first leaf's own case that is."""
    kept: list[ConvCase] = []

    def one(data):
        leaf = data.draw(st.sampled_from(tied))
        case = data.draw(st.composite(lambda draw: leaf.case(draw))())
        if case.case_id not in seen and _gain(buckets(case), targets) >= gain:
            kept.append(case)

    run = settings(max_examples=TRIES, database=None, phases=[Phase.generate], deadline=None,
                   suppress_health_check=list(HealthCheck))(given(st.data())(one))
    hyp_seed(key)(run)()
    if kept:
        return kept[-1]
    for leaf in tied:
        case = leaf.case()
        if case.case_id not in seen and _gain(buckets(case), targets) >= gain:
            return case
    return None


def aim(covered: set, seen: set, extra: int, seed: int,
        done: frozenset | set = frozenset()) -> list[ConvCase]:
    """Up to ``extra`` cases toward the reachable paths outside ``covered`` (and ``done``: what
    earlier nights reached), greedily: each from the leaves that reach the most of them at
    once, Vulkan shaders before XNNPACK paths (updates ``covered`` and ``seen``)."""
    targets = set(reachable()) - covered - set(done)
    pool = list(_leaves())
    picked: list[ConvCase] = []
    while targets and pool and len(picked) < extra:
        gains = [_gain(found, targets) for _, found, _ in pool]
        gain = max(gains)
        if gain == (0, 0):
            break
        best = [(leaf, size) for (leaf, _, size), g in zip(pool, gains, strict=True) if g == gain]
        cheapest = min(size for _, size in best)
        tied = [leaf for leaf, size in best if size <= CHEAP * cheapest]
        case = _draw_toward(tied, targets, gain, f"{seed}:steer:{len(picked)}", seen)
        if case is None:  # none of these leaves gives a new case: leave them out
            pool = [p for p, g in zip(pool, gains, strict=True) if g != gain]
            continue
        picked.append(case)
        seen.add(case.case_id)
        found = buckets(case)
        covered |= found
        targets -= found
    return picked


def steer(cases: list[ConvCase], extra: int, seed: int, strategy=None,
          rounds: int = ROUNDS, earlier: NightState | None = None) -> list[ConvCase]:
    """Up to ``extra`` new cases, each predicted to reach a path none of ``cases`` (nor an
    earlier pick) reaches: first aimed at the unreached reachable paths (``aim``), then drawn
    from ``strategy`` (default: ``candidates()``) for whatever is left of ``extra``. With
    ``earlier`` (what earlier nights reached), the aim skips paths they reached, and cases of
    case-space cells no night ran come before the fill (``unexplored``)."""
    if extra <= 0:
        return []
    covered = set().union(*(buckets(c) for c in cases)) if cases else set()
    seen = {c.case_id for c in cases}
    done = earlier.paths if earlier is not None else frozenset()
    picked = aim(covered, seen, extra, seed, done)
    picked += layout_cases([*cases, *picked], seen, extra - len(picked), seed)
    if strategy is None:
        strategy = candidates()
    if earlier is not None and len(picked) < extra:
        picked += unexplored([*cases, *picked], set(earlier.cells), seen, extra - len(picked),
                             seed, strategy, rounds)
        for case in picked:
            covered |= buckets(case)
    if len(picked) >= extra:
        return picked

    def consider(chunk: list[ConvCase]) -> None:
        for case in chunk:
            if len(picked) >= extra or case.case_id in seen:
                continue
            new = buckets(case) - covered
            if new:
                covered.update(new)
                seen.add(case.case_id)
                picked.append(case)

    run = settings(max_examples=rounds, database=None, phases=[Phase.generate], deadline=None,
                   suppress_health_check=list(HealthCheck))(
        given(st.lists(strategy, min_size=CHUNK, max_size=CHUNK))(consider))
    hyp_seed(f"{seed}:steer")(run)()
    return picked


def unexplored(cases: list[ConvCase], ran: set, seen: set, extra: int, seed: int,
               strategy=None, rounds: int = ROUNDS) -> list[ConvCase]:
    """Up to ``extra`` cases, each of a case-space cell (nights.space_cell) that neither ``ran``
    (earlier nights' cells) nor ``cases`` has, one per cell, drawn from ``strategy`` (default:
    ``candidates()``) by Hypothesis seeded by ``seed`` (updates ``seen``)."""
    if extra <= 0:
        return []
    taken = set(ran) | {space_cell(c) for c in cases}
    picked: list[ConvCase] = []

    def consider(chunk: list[ConvCase]) -> None:
        for case in chunk:
            cell = space_cell(case)
            if len(picked) < extra and cell not in taken and case.case_id not in seen:
                taken.add(cell)
                seen.add(case.case_id)
                picked.append(case)

    run = settings(max_examples=rounds, database=None, phases=[Phase.generate], deadline=None,
                   suppress_health_check=list(HealthCheck))(
        given(st.lists(strategy if strategy is not None else candidates(), min_size=CHUNK,
                       max_size=CHUNK))(consider))
    hyp_seed(f"{seed}:unexplored")(run)()
    return picked


# Issue 39's axes: every value a run should reach at least once. They open no code path of
# their own in the routing models (the same shaders and XNNPACK nodes; what they change is
# whether the lowering or the runtime takes the case: vulkan_routing's F1 for a dynamic batch,
# xnnpack_paths' module_channels_last), so they are steered as values, after the paths.
LAYOUT_TARGETS = (("memory_format", "channels_last"), ("memory_format", "channels_last_3d"),
                  ("module_channels_last", True), ("dynamic", "batch"),
                  ("dynamic", "spatial"), ("dynamic", "both"))


def layout_targets(cases: list[ConvCase]) -> list[tuple]:
    """The LAYOUT_TARGETS no case of ``cases`` has."""
    return [(f, v) for f, v in LAYOUT_TARGETS if not any(getattr(c, f) == v for c in cases)]


def layout_cases(cases: list[ConvCase], seen: set, extra: int, seed: int) -> list[ConvCase]:
    """Up to ``extra`` cases, one per layout target ``cases`` lacks (drawn by Hypothesis from
    the run's strategy narrowed to that value; reproducible by ``seed``)."""
    from hypothesis import find

    from harness.generation.strategies import conv_cases

    picked = []
    for field, value in layout_targets(cases)[:max(extra, 0)]:
        dims = (3,) if value == "channels_last_3d" else (2,)
        fmt = {"memory_format": "input", "module_channels_last": "module"}.get(field, "contiguous")
        dyn = value if field == "dynamic" else "none"
        strategy = conv_cases(dims=dims, quant=st.just(None), memory_formats=st.just(fmt),
                              dynamics=st.just(dyn), context=False)
        try:
            case = find(strategy, lambda c, f=field, v=value: getattr(c, f) == v
                        and c.case_id not in seen,
                        settings=settings(database=None, max_examples=200,
                                          phases=[Phase.generate],
                                          suppress_health_check=list(HealthCheck)),
                        random=__import__("random").Random(f"{seed}:layout:{field}:{value}"))
        except Exception:  # noqa: BLE001 - no such case drawn: that target stays unreached
            continue
        picked.append(case)
        seen.add(case.case_id)
    return picked
