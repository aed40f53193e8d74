"""The strata a generated run starts with: a fair first look in the quick default's 17 cases.

Each row is one case drawn by Hypothesis (reproducible by ``--seed``) inside a region of the
space chosen so that, together, the rows cover

- every padding spelling in 1d and 2d (a full-rank tuple in 1d is a length-1 list: "tuple" rows
  are 2d), float and int8, both int8 schemes;
- every known finding family: the ``when`` of each entry of cases/upstream/known_issues.json and
  the bug table of issue 23 (length-1 int lists / "valid" on Vulkan, depthwise kernels other than
  3x3/5x5 with padding, grouped convs with channels per group not a multiple of 4 (float and
  int8), int8 batch > 1, int8 per-tensor on Vulkan, depthwise stride != dilation, replicate
  padding, XNNPACK int8 conv1d "same" with an even kernel, XNNPACK transposed conv with dilation
  and output_padding >= stride, Vulkan pointwise conv1d with groups, grouped transposed conv2d,
  dilated transposed conv2d on Vulkan, int8 depthwise, length-1 stride lists on XNNPACK, per-channel dequantize out variants, a
  Conv3d left to the portable kernel).

A row pins only what its family needs and what would hide it (a bf16 case Vulkan leaves
undelegated, a weights="input" graph Vulkan refuses, a padding_mode whose index ops fail first);
everything else (channels, kernel within the family, stride, dilation, sizes, bias) is drawn.
Rows whose spelling already decides what Vulkan does (2d "valid" and length-1 lists reach
``make_ivec2``) carry families that another lane or the fixed lane shows, and the conv in context.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hypothesis import strategies as st

from harness.generation.strategies import large_cases
from harness.spec import ConvCase

# Channel structures a row may ask for.
PLAIN, DEPTHWISE, GROUPED, GROUPED_UNALIGNED = "plain", "depthwise", "grouped", "grouped-unaligned"
# int8: input channels per group not a multiple of 4, output channels per group 4 (the q8ta
# pattern fuses such a conv only then: with fewer it falls back before its own check)
GROUPED_UNALIGNED_INPUT = "grouped-unaligned-input"
# How stride and dilation relate.
ANY, EQUAL, DIFFER, DILATED = "any", "equal", "differ", "dilated"


@dataclass(frozen=True)
class Stratum:
    """One row: the axes it stands for (spelling, dim, quant) and the finding families (known
    issue ids) it is drawn to reach, with the structure that reaches them."""
    spelling: str            # "int", "tuple", "list1", "valid", "same"
    dim: int
    quant: str | None        # None: float
    families: tuple          # known-issue ids (cases/upstream/known_issues.json)
    structure: str = PLAIN   # PLAIN, DEPTHWISE, GROUPED, GROUPED_UNALIGNED(_INPUT)
    depthwise_channels: tuple = (2, 3, 4, 6, 8)
    kernels: tuple = (1, 2, 3, 4, 5)  # the k of a k x k (or k) kernel
    stride_dilation: str = ANY
    min_padding: int = 0     # an int/list padding of at least this
    batch: tuple = (1,)
    transposed: bool = False
    output_padding_ge_stride: bool = False  # transposed: dilation > stride, output_padding >= stride
    list1_stride: bool = False  # stride spelled as a length-1 list
    padding_mode: str = "zeros"
    dtypes: tuple = ("float32",)
    context: bool = False    # draw a model-like epilogue (conv -> bn -> relu, residual add)
    size: str = ""           # a size stratum: a kind of strategies.large_cases ("" = small)

    @property
    def axes(self) -> tuple:
        return self.spelling, self.dim, self.quant


Q8T, Q8C = "int8_per_tensor", "int8_per_channel"
STRATA = [
    Stratum("same", 1, Q8T, ("xnnpack-quantized-same-even-kernel",
                             "vulkan-q8-per-tensor-weight-scales-assert"), kernels=(2, 4)),
    Stratum("valid", 2, None, ("vulkan-make-ivec2-length-1", "xnnpack-conv2d-length-1-stride-list"),
            list1_stride=True, context=True),
    Stratum("list1", 2, Q8C, ("vulkan-q8ta-group-channels", "vulkan-make-ivec2-length-1",
                              "xnnpack-missing-out-variant-dequantize-per-channel"),
            structure=GROUPED_UNALIGNED_INPUT, kernels=(2, 3, 4, 5)),
    Stratum("int", 2, Q8C, ("vulkan-q8ta-conv-batch",
                            "xnnpack-missing-out-variant-dequantize-per-channel",
                            "portable-quantize-per-channel-float-scale"), batch=(2, 3)),
    Stratum("tuple", 2, Q8C, ("vulkan-q8-depthwise-oc-not-x4",
                              "xnnpack-missing-out-variant-dequantize-per-channel"),
            structure=DEPTHWISE, depthwise_channels=(2, 3, 6)),
    Stratum("same", 2, None, ("vulkan-grouped-conv-channels-per-group-not-x4",),
            structure=GROUPED_UNALIGNED, kernels=(2, 3, 4, 5)),
    Stratum("int", 2, None, ("vulkan-dw-generic-shader-right-edge",), structure=DEPTHWISE,
            kernels=(2, 4, 6, 7), stride_dilation=EQUAL, min_padding=1),
    Stratum("tuple", 2, None, ("vulkan-dw-sned-missing-shader",), structure=DEPTHWISE,
            kernels=(2, 4, 6, 7), stride_dilation=DIFFER),
    Stratum("list1", 1, None, ("xnnpack-tconv-output-padding-ge-stride",), transposed=True,
            output_padding_ge_stride=True),
    Stratum("valid", 1, None, ("vulkan-conv1d-pw-groups",), structure=GROUPED, kernels=(1,),
            dtypes=("float32", "float16"), context=True),
    Stratum("int", 1, None, ("vulkan-index-tensor-reflect-replicate",), min_padding=1,
            padding_mode="replicate", dtypes=("float32", "float16")),
    Stratum("tuple", 2, None, ("vulkan-grouped-transposed-conv",), structure=GROUPED,
            kernels=(2, 3, 4), transposed=True),
    # a Conv3d neither partitioner takes: the portable convolution kernel's 5-D refusal (XNNPACK
    # leaves the int8 one to it too); int8 per channel, Vulkan's q8ta pattern unpacks a 5-D weight
    Stratum("int", 3, Q8C, ("portable-conv3d-5d-input", "vulkan-q8-conv3d-pattern-unpack"),
            kernels=(1, 2, 3)),
    # int8 Conv1d on Vulkan (the pattern unpacks a 3-D weight) with circular padding, whose
    # decomposition fails the Vulkan runtime's argument count and, dynamic, the portable slice_copy
    Stratum("int", 1, Q8C, ("vulkan-q8-conv1d-pattern-unpack", "vulkan-execute-arg-count-circular",
                            "portable-slice-copy-dynamic-circular"),
            min_padding=1, padding_mode="circular"),
    # float pointwise Conv1d with padding (and a drawn stride): Conv1dPW.cpp ignores both
    Stratum("int", 1, None, ("vulkan-conv1d-pw-stride-padding",), kernels=(1,), min_padding=1),
    # int8 per-tensor Conv2d with circular padding: XNNPACK's wrong values
    Stratum("int", 2, Q8T, ("xnnpack-int8-circular-channels-last-mismatch",), min_padding=1,
            padding_mode="circular"),
    # a transposed conv2d with dilation > 1: the Vulkan partitioner takes it, the runtime refuses
    Stratum("tuple", 2, None, ("vulkan-transposed-conv-dilation",), transposed=True,
            kernels=(2, 3), stride_dilation=DILATED),
]

# Families defined by an axis the strata do not draw (a channels-last or dynamic input, a runtime
# weight, bf16, a decomposed padding mode's side effects): the nightly profile draws those axes
# (issue 39). Here each is named on a row whose shape its ``when`` always allows, so a new known
# issue still has a row to name it; what the quick default shows of them is the delegate's.
BY_SHAPE = {
    1: ("vulkan-conv-runtime-weight",),
    3: ("xnnpack-channels-last-tagged-reshape-assert",),
    5: ("vulkan-conv-not-delegated-by-design", "xnnpack-conv-not-delegated-by-design"),
    6: ("xnnpack-conv2d-channels-last-input-shapes", "vulkan-channels-last-input-mismatch",
        "vk-channels-last-input-copies-outside"),
    7: ("xnnpack-channels-last-module-output-resize", "vulkan-channels-last-module-output-mismatch"),
    8: ("xnnpack-reshape-two-dynamic-dims",),
    9: ("vulkan-batch-norm-3d",),
    10: ("padding-mode-decomposition-not-delegated", "portable-index-tensor-dim-order"),
    11: ("xnnpack-fuse-batch-norm-grouped-transposed",),
    12: ("pybindings-5d-channels-last-input", "portable-conv-dim-order",
         "exir-dim-order-memory-format-map", "xnnpack-int8-conv3d-pad-5d"),
    13: ("vulkan-q8-dequantize-per-channel-missing-op",
         "exir-graph-output-allocated-dynamic-circular"),
    14: ("vulkan-conv1d-dynamic-resize-mismatch",),
    15: ("xnnpack-int8-runtime-weight-portable-mismatch",),
}
STRATA = [replace(row, families=row.families + BY_SHAPE.get(i, ())) for i, row in enumerate(STRATA)]


# The size strata (issue 46): drawn after STRATA by a profile with a size axis (the nightly's
# generate.LARGE_RATE), never by the quick default. Each reaches the size-dependent code of the
# delegates on every seed: a reduction past strategies.LONG_REDUCTION terms (XNNPACK's and
# Vulkan's long accumulations; with C_out >= 128 Vulkan's im2col + GEMM route, whose packed
# weight passes the 2D texture limit from 65536 terms), and an input past a texture limit
# (strategies.TEXTURE_LIMITS: 2048, lavapipe's 3D 4096, the partitioner's 16384). A row pins what
# would hide the size (batch 1 and float32: Vulkan's batch-1 rule, bf16 left undelegated; zeros
# padding, not transposed, contiguous). The families only a size shows (a ``when`` on
# ``reduction``) are theirs: SIZE_FAMILIES, which the quick default cannot reach.
SIZE_STRATA = [
    Stratum("int", 2, None, ("vulkan-conv2d-gemm-weight-texture-limit",), size="reduction"),
    Stratum("tuple", 2, None, (), size="texture"),
    Stratum("int", 2, Q8C, ("vulkan-q8ta-conv-large-reduction-crash",), size="reduction"),
]
SIZE_FAMILIES = frozenset(f for row in SIZE_STRATA for f in row.families)


def stratum(row: Stratum) -> st.SearchStrategy:
    """Cases of one row (Hypothesis draws everything the row leaves open)."""
    if row.size:
        return large_cases(kinds=(row.size,), dims=(row.dim,), quant=st.just(row.quant),
                           transposed=st.just(row.transposed), dtypes=st.sampled_from(row.dtypes),
                           padding_modes=st.just(row.padding_mode), batch=st.sampled_from(row.batch),
                           spellings=(row.spelling,), memory_formats=st.just("contiguous"))
    return row_cases(row)


@st.composite
def row_cases(draw, row: Stratum) -> ConvCase:
    dim = row.dim
    groups, in_ch, out_ch = draw(channels(row.structure, row.depthwise_channels))
    k = draw(st.sampled_from(row.kernels))
    kernel = k if draw(st.booleans()) else (k,) * dim
    stride, dilation = draw(stride_and_dilation(row, dim))
    output_padding = 0
    if row.output_padding_ge_stride:
        # output_padding < max(stride, dilation) with output_padding >= stride: dilation > stride
        dilation = draw(st.integers(2, 3))
        stride = draw(st.integers(1, dilation - 1))
        output_padding = draw(st.integers(stride, dilation - 1))
    if row.spelling in ("valid", "same"):
        padding = row.spelling
        stride = 1 if row.spelling == "same" else stride
    else:
        values = st.integers(row.min_padding, max(row.min_padding, 3))
        padding = draw({"int": values, "list1": values.map(lambda p: (p,)),
                        "tuple": st.tuples(*[values] * dim)}[row.spelling])
    if row.list1_stride:
        stride = (draw(st.integers(1, 2)),)
    elif isinstance(stride, int) and dim > 1 and draw(st.booleans()):
        stride = (stride,) * dim  # int or full-rank tuple: never a length-1 list by accident

    case = ConvCase(dim=dim, transposed=row.transposed, in_channels=in_ch, out_channels=out_ch,
                    kernel_size=kernel, stride=stride, padding=padding,
                    padding_mode="zeros" if row.padding_mode == "circular" else row.padding_mode,
                    dilation=dilation,
                    output_padding=output_padding, groups=groups, bias=draw(st.booleans()),
                    input_shape=(1, in_ch) + (1,) * dim, dtype=draw(st.sampled_from(row.dtypes)),
                    quant=row.quant,
                    epilogue=draw(EPILOGUES) if row.context else ())
    # (a circular pad is checked against the input's size: the mode comes with the sizes)
    sizes = tuple(draw(st.integers(low, low + 6))
                  for low in smallest_sizes(case, row.padding_mode))
    return ConvCase.from_dict({**case.to_dict(), "padding_mode": row.padding_mode,
                               "input_shape": [draw(st.sampled_from(row.batch)), in_ch, *sizes]})


# A model's epilogues (what `cases from-model` records on ResNet/MobileNet): one per context row.
EPILOGUES = st.sampled_from([("batchnorm", "relu"), ("relu",), ("batchnorm", "relu6"),
                             ("batchnorm", "add", "relu"), ()])


def channels(structure: str, depthwise: tuple) -> st.SearchStrategy:
    """(groups, in_channels, out_channels) of a structure. Grouped-unaligned: some channel count
    per group not a multiple of 4, never depthwise (a depthwise conv is another family)."""
    per_group = st.integers(1, 4)
    if structure == DEPTHWISE:
        return st.sampled_from(depthwise).map(lambda g: (g, g, g))
    if structure == GROUPED_UNALIGNED_INPUT:
        return st.tuples(st.integers(2, 3), st.integers(1, 3)).map(lambda t: (t[0], t[0] * t[1],
                                                                               t[0] * 4))
    if structure in (GROUPED, GROUPED_UNALIGNED):
        def build(t):
            g, i, o = t
            if structure == GROUPED_UNALIGNED and i % 4 == 0 and o % 4 == 0:
                i = 3
            if i == o == 1:
                o = 2  # in == out == groups would be depthwise
            return g, g * i, g * o
        return st.tuples(st.integers(2, 3), per_group, per_group).map(build)
    return st.tuples(st.just(1), per_group, per_group)


@st.composite
def stride_and_dilation(draw, row: Stratum, dim: int):
    if row.stride_dilation == EQUAL:
        s = draw(st.integers(1, 2))
        return s, s
    if row.stride_dilation == DIFFER:
        s, d = draw(st.sampled_from([(2, 1), (1, 2), (3, 1), (2, 3)]))
        return s, d
    if row.stride_dilation == DILATED:  # dilation > 1 (an int: never a length-1 list)
        return draw(st.integers(1, 2)), draw(st.integers(2, 3))
    # a transposed conv with dilation > 1 is refused by Vulkan's runtime: a row that wants
    # another family of it keeps dilation 1
    return draw(st.integers(1, 3)), 1 if row.transposed else draw(st.integers(1, 2))


def smallest_sizes(case: ConvCase, padding_mode: str | None = None) -> list:
    """Per spatial dimension, the smallest input size with a non-empty output (and a reflect or
    circular pad that fits; ``padding_mode``: the case's own unless given)."""
    mode = padding_mode or case.padding_mode
    k, s, d = (case.spatial(n) for n in ("kernel_size", "stride", "dilation"))
    out = []
    for i, (left, right) in enumerate(case.side_pads()):
        extent = d[i] * (k[i] - 1) + 1
        if case.transposed:
            op = case.spatial("output_padding")[i]
            low = 1
            while (low - 1) * s[i] - left - right + extent + op < 1:
                low += 1
        else:
            low = 1 if case.padding == "same" else max(1, extent - left - right)
            if mode == "reflect":
                low = max(low, max(left, right) + 1)
            if mode == "circular":  # the wrap reads at most the input's size
                low = max(low, left, right)
        out.append(low)
    return out
