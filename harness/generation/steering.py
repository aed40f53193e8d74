"""Steering: more cases where the routing models say a case list leaves code unreached.

``steer(cases, extra, seed)`` draws candidates from the run's strategy with Hypothesis (the
seed makes them reproducible) and keeps a candidate only when it is predicted to reach a code
path no case so far is predicted to reach: a Vulkan conv shader (stages/backends/
vulkan_routing.py, read from the runtime's shader selection) or an XNNPACK conv path
(xnnpack_paths.predict). The predictions only choose cases; what a cell reached is observed when
it runs (coverage.json), and where the Vulkan model was wrong the run lists it.
"""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, given, seed as hyp_seed, settings, strategies as st

from harness.spec import ConvCase
from harness.stages.backends import vulkan_routing, xnnpack_paths

CHUNK = 64  # candidates per Hypothesis example
ROUNDS = 16  # examples drawn (CHUNK * ROUNDS candidates)


def buckets(case: ConvCase) -> set[str]:
    """The code paths ``case`` is predicted to reach: ``vulkan:<shader>``, ``xnnpack:<path>``."""
    out = set()
    route = vulkan_routing.predict(case)
    if route:
        out.update(f"vulkan:{s}" for s in route.shaders)
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


def steer(cases: list[ConvCase], extra: int, seed: int, strategy=None,
          rounds: int = ROUNDS) -> list[ConvCase]:
    """Up to ``extra`` new cases, each predicted to reach a path none of ``cases`` (nor an
    earlier pick) reaches, in the order drawn."""
    if extra <= 0:
        return []
    if strategy is None:
        strategy = candidates()
    covered = set().union(*(buckets(c) for c in cases)) if cases else set()
    seen = {c.case_id for c in cases}
    picked: list[ConvCase] = []

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
