"""Hypothesis strategies for ConvCase: only configurations eager PyTorch accepts.

Constraints are built in rather than filtered (``assume`` would waste most draws): groups divide
both channel counts, "same" only with stride 1, output_padding < max(stride, dilation), input
sizes chosen so the output is non-empty and a reflect/circular pad fits the input (spec.py's
rules). Shrinking goes towards 1d, float32, zeros padding, batch 1, not transposed, small
channels, kernel 1, stride 1, padding 0 -- the simplest conv: every ``sampled_from`` lists its
simplest value first (a repeated value weights the draw).

Nothing is left out because a delegate lacks it (Vulkan documents batch 1 and no transposed
dilation; neither lowers 3d everywhere): those cells say so in their status.
"""

from __future__ import annotations

import dataclasses
import math

from hypothesis import strategies as st

from harness.spec import ConvCase, min_input_size, same_pads

MAX_KERNEL = 5
# 3d cells execute on a CPU Vulkan device (lavapipe) too: kernel, dilation and spatial sizes stay
# a few elements.
SMALL_3D = {"kernel": 3, "dilation": 2, "extra_size": 3}
DTYPES = ["float32", "float32", "float16", "bfloat16"]
PADDING_MODES = ["zeros", "zeros", "reflect", "replicate", "circular"]
# Batch > 1 fails every Vulkan 2d cell (batch 1 only): kept to about a quarter of the cases so
# that it does not hide what else a lane does. 3d is the costliest cell: weighted half of 1d/2d.
BATCHES = [1, 1, 1, 1, 1, 2, 3]
WIDE_OUT_CHANNELS = [128, 160, 256]
# Each context field (prologue, epilogue, weights="input", wide) is on in about 1 of
# CONTEXT_OFF + 1 draws: mostly a lone conv, and sometimes the conv in context.
CONTEXT_OFF = 5
DIM_WEIGHTS = {1: 2, 2: 2, 3: 1}


@st.composite
def _per_dim(draw, dim: int, values: st.SearchStrategy, spell_short: bool = True):
    """An int, a full-rank tuple, or a length-1 tuple -- the three ways to spell it."""
    kind = draw(st.sampled_from(["int", "tuple", "list1"] if spell_short else ["int", "tuple"]))
    if kind == "int":
        return draw(values)
    if kind == "list1":
        return (draw(values),)
    return tuple(draw(values) for _ in range(dim))


def spatial(v, dim: int) -> tuple:
    """An int or per-dim tuple as a full-rank tuple (a length-1 tuple broadcast)."""
    items = v if isinstance(v, tuple) else (v,)
    return items * dim if len(items) == 1 else items


@st.composite
def conv_cases(draw, *, dims=(1, 2, 3), quant=st.just(None), transposed=st.booleans(),
               max_channels_per_group: int = 4, batch=st.sampled_from(BATCHES),
               dtypes=st.sampled_from(DTYPES), padding_modes=st.sampled_from(PADDING_MODES),
               spellings=None, context: bool = True, layout: bool = True,
               memory_formats=None, dynamics=None):
    """``spellings``: the padding spellings to draw from (default: all a case may take);
    ``context``: draw the context fields too (prologue, epilogue, weights; mostly off);
    ``layout``: draw the memory format and dynamic shapes too (mostly contiguous and static;
    ``memory_formats`` / ``dynamics`` narrow them: strategies of MEMORY_CHOICES /
    DYNAMIC_CHOICES values)."""
    dim = draw(st.sampled_from([d for d in dims for _ in range(DIM_WEIGHTS[d])]))
    is_t = draw(transposed)
    q = draw(quant)
    # Drawn always, then overridden: a simpler case must not be one with fewer draws, or the
    # shrinker (shortest choice sequence first) would prefer transposed or quantized cases.
    dtype = draw(dtypes)
    dtype = "float32" if q else dtype  # the quantizer takes float32
    mode = draw(padding_modes)
    mode = "zeros" if is_t else mode  # transposed: "zeros" only
    groups = draw(st.sampled_from([1, 1, 2, 3, 4]))
    in_per_group = draw(st.integers(1, max_channels_per_group))
    depthwise = draw(st.booleans()) and not is_t
    # Depthwise: out_per_group is the channel multiplier (1 = plain depthwise).
    out_per_group = draw(st.integers(1, max_channels_per_group))
    # Wide: C_out >= 128 (Vulkan's im2col/GEMM route for groups 1, dilation 1), spatial kept
    # small below so the cell stays cheap.
    wide = draw(st.sampled_from([False] * CONTEXT_OFF + [True])) and context
    if wide:
        out_per_group = -(-draw(st.sampled_from(WIDE_OUT_CHANNELS)) // groups)
    in_ch, out_ch = groups * (1 if depthwise else in_per_group), groups * out_per_group

    # A length-1 kernel_size is not a spelling of the same conv: nn.Conv2d(kernel_size=[3])
    # builds a 3-d weight, so the kernel is an int or a full-rank tuple.
    small = dim == 3
    kernel = draw(_per_dim(dim, st.integers(1, SMALL_3D["kernel"] if small else MAX_KERNEL),
                           spell_short=False))
    # Transposed with dilation > 1 too: the Vulkan runtime rejects it (its documented limit),
    # which its cells report as what they are.
    dilation = draw(_per_dim(dim, st.integers(1, SMALL_3D["dilation"] if small else 3)))

    kinds = ["int", "tuple", "list1"] + ([] if is_t else ["valid", "same"])
    if spellings is not None:
        kinds = [k for k in kinds if k in spellings]
        if spellings == ("list1",) and dim > 1:
            mode = "zeros"  # the spelling asked for wins over the mode
    if mode != "zeros" and dim > 1 and "list1" in kinds:
        kinds.remove("list1")  # a mode pads through F.pad, which needs every dimension's pad
    padding_kind = draw(st.sampled_from(kinds))
    # Stride and a padding value are drawn for "valid"/"same" too, then overridden (as dtype and
    # mode above): with fewer draws, the shrinker would prefer a string padding to padding 0.
    stride = draw(_per_dim(dim, st.integers(1, 3)))
    stride = 1 if padding_kind == "same" else stride
    if mode != "zeros" and padding_kind == "same" and isinstance(dilation, tuple) and dim > 1:
        # PyTorch's quirk, not a spelling: nn.Conv2d(padding="same", padding_mode="reflect",
        # dilation=(3,)) computes the F.pad amounts by zip(dilation, kernel_size), so it pads
        # one dimension only and eager fails or computes another conv. The full spelling.
        dilation = spatial(dilation, dim)
    values = st.integers(0, 3)
    padding = draw({"int": values, "list1": values.map(lambda p: (p,)),
                    "tuple": st.tuples(*[values] * dim)}.get(padding_kind, values))
    padding = padding_kind if padding_kind in ("valid", "same") else padding

    # The context: an explicit pad before a conv with padding 0 (the conv's padding zeroed in
    # its own spelling), an epilogue, the weights as graph inputs. Drawn always, then
    # overridden where the case cannot take them (the shrinker's shortest-first order again).
    prologue = draw(_prologue(dim)) if context else None
    if prologue is not None and padding_kind != "same" and mode == "zeros":
        padding = _zeroed(padding)
    else:
        prologue = None
    epilogue = draw(_epilogue()) if context else ()
    weights = draw(st.sampled_from(["constant"] * CONTEXT_OFF + ["input"])) if context else "constant"
    weights = "constant" if mode != "zeros" else weights

    k, s, d = spatial(kernel, dim), spatial(stride, dim), spatial(dilation, dim)
    p = (0,) * dim if padding in ("valid", "same") else spatial(padding, dim)
    output_padding = draw(_output_padding(dim, s, d)) if is_t else 0
    sizes = []
    for i in range(dim):
        extent = d[i] * (k[i] - 1) + 1
        # The prologue's pads of this dimension (F.pad's order: last dimension first).
        pre = sum(prologue[1][2 * (dim - 1 - i):2 * (dim - i)]) if prologue else 0
        if is_t:
            # out = (L-1)*s - 2p + extent + output_padding > 0
            low = max(1, math.ceil((2 * p[i] - extent + 1) / s[i]) + 1)
        else:
            low = max(1, extent - 2 * p[i] - pre) if padding != "same" else 1
            low = max(low, _fits_mode(mode, padding, extent, p[i]))
        extra = SMALL_3D["extra_size"] if small or wide else 8
        sizes.append(draw(st.integers(low, low + extra)))
    case = ConvCase(
        dim=dim, transposed=is_t, in_channels=in_ch, out_channels=out_ch, kernel_size=kernel,
        stride=stride, padding=padding, padding_mode=mode, dilation=dilation,
        output_padding=output_padding, groups=groups, bias=draw(st.booleans()),
        input_shape=(draw(batch), in_ch, *sizes), dtype=dtype, quant=q,
        prologue=prologue, epilogue=epilogue, weights=weights,
    )
    # Drawn last (the earlier fields' draws stay where they were) and always, then dropped
    # where they do not apply (the shrinker's shortest-first order again).
    return draw(_layout(case, memory_formats, dynamics)) if layout else case


def memory_format_of(case: ConvCase) -> str:
    return {2: "channels_last", 3: "channels_last_3d"}.get(case.dim, "contiguous")


@st.composite
def _layout(draw, case: ConvCase, memory_formats=None, dynamics=None):
    """The memory format and the dynamic shapes (issue 39) of an otherwise drawn case:
    contiguous and static first (shrinking goes there), channels-last input and/or module
    for 2-D / 3-D convs, and a dynamic dimension with its sizes (``dynamic_sizes``)."""
    fmt = draw(memory_formats if memory_formats is not None else st.sampled_from(MEMORY_CHOICES))
    kind = draw(dynamics if dynamics is not None else st.sampled_from(DYNAMIC_CHOICES))
    changes = {}
    if case.dim > 1:
        if fmt in ("input", "input+module"):
            changes["memory_format"] = memory_format_of(case)
        if fmt in ("module", "input+module") and case.weights == "constant":
            changes["module_channels_last"] = True
    if kind != "none" and not case.quant and not case.residual_count():
        dynamic = draw(dynamic_sizes(case, kind))
        if dynamic is not None:
            changes.update(dynamic)
    return dataclasses.replace(case, **changes) if changes else case


# "input": a channels-last input; "module": the module converted; both; about 1 in 6 each.
MEMORY_CHOICES = ["contiguous", "contiguous", "contiguous", "input", "input+module", "module"]
DYNAMIC_CHOICES = ["none"] * 6 + ["batch", "spatial", "both"]
DYNAMIC_BATCH = (1, 4)  # the batch bounds a dynamic-batch case draws within


def _out(case: ConvCase, axis: int, size: int) -> int:
    """The output size along ``axis`` at input size ``size`` (< 1: empty), or 0 where the case
    cannot take that size (a reflect pad wider than it)."""
    shape = list(case.input_shape)
    shape[axis] = size
    try:
        return case.at_size(shape).output_shape()[axis]
    except ValueError:
        return 0


def min_dynamic_size(case: ConvCase, axis: int, limit: int = 64) -> int | None:
    """The smallest input size of a dynamic spatial ``axis`` with input and output >= 2
    (torch.export guards 1 away; an empty output is no conv), None below ``limit``."""
    for size in range(2, limit):
        if _out(case, axis, size) >= 2:
            return size
    return None


@st.composite
def dynamic_sizes(draw, case: ConvCase, kind: str):
    """{"dynamic", "dynamic_sizes", "input_shape"} for a ``kind`` of dynamic case, or None when
    the case has no legal range. Per dynamic dimension: its lower bound, its upper bound and a
    size between; for the width (last axis) also the sizes where the output width crosses a
    multiple of 4 (Vulkan's texel / tile width), when the range has them. Executed in the order
    lower, upper, then the others (grow, then shrink: both resizes). The export's example
    (input_shape) is moved inside the bounds, >= 2 where dynamic."""
    axes = ([0] if kind in ("batch", "both") else []) + \
        (list(range(2, case.dim + 2)) if kind in ("spatial", "both") else [])
    per_axis = {}
    for axis in axes:
        if axis == 0:
            low, high = DYNAMIC_BATCH[0], draw(st.integers(3, DYNAMIC_BATCH[1]))
        else:
            low = min_dynamic_size(case, axis)
            if low is None:
                return None
            high = low + draw(st.integers(3, 6 if case.dim == 3 else 12))
        mid = draw(st.integers(low + 1, high - 1))
        values = [low, high, mid]
        if axis == case.dim + 1:  # the width: an output width of 4m and of 4m + 1
            outs = {s: _out(case, axis, s) for s in range(low, high + 1)}
            four = [s for s, o in outs.items() if o % 4 == 0 and s not in values]
            if four:
                values.append(four[0])
                after = [s for s, o in outs.items() if o % 4 == 1 and s > four[0]
                         and s not in values]
                values += after[:1]
        per_axis[axis] = values
    count = max(len(v) for v in per_axis.values())
    shape = list(case.input_shape)
    sizes = []
    for i in range(count):
        size = list(shape)
        for axis, values in per_axis.items():
            size[axis] = values[i] if i < len(values) else values[2]
        sizes.append(size)
    for axis, values in per_axis.items():  # the example: inside the bounds, >= 2
        shape[axis] = min(max(shape[axis], min(values), 2), max(values))
    return {"dynamic": kind, "dynamic_sizes": sizes, "input_shape": shape}


def _zeroed(padding):
    """The padding 0 in the same spelling ("valid" stays)."""
    if isinstance(padding, str):
        return padding
    return tuple(0 for _ in padding) if isinstance(padding, tuple) else 0


def _prologue(dim: int) -> st.SearchStrategy:
    """None (mostly), or an explicit F.pad of every spatial dimension: a zero pad (what
    TF-style "same" exports as) or a non-zero constant."""
    pad = st.tuples(*[st.integers(0, 2)] * (2 * dim))
    value = st.sampled_from([0.0, 0.0, 0.5, -1.0])
    on = st.sampled_from([False] * CONTEXT_OFF + [True])
    return st.tuples(on, pad, value).map(lambda t: ("pad", t[1], t[2]) if t[0] else None)


BOUNDS_LOW, BOUNDS_HIGH = [0.0, -1.0, -0.5], [6.0, 1.0, 0.5, 2.0]


def _epilogue() -> st.SearchStrategy:
    """() (mostly), or one op or a short sequence the delegates fuse or fold (conv -> relu,
    conv -> bn -> relu, residual add), with bounds drawn for hardtanh and clamp."""
    low, high = st.sampled_from(BOUNDS_LOW), st.sampled_from(BOUNDS_HIGH)
    hardtanh = st.tuples(st.just("hardtanh"), low, high)
    clamp = st.one_of(st.tuples(st.just("clamp"), low, high),
                      st.tuples(st.just("clamp"), low, st.none()),
                      st.tuples(st.just("clamp"), st.none(), high))
    one = st.one_of(st.sampled_from(["relu", "relu6", "batchnorm", "add"]), hardtanh, clamp)
    sequences = st.sampled_from([("batchnorm", "relu"), ("batchnorm", "relu6"), ("add", "relu"),
                                 ("batchnorm", "add", "relu")])
    on = st.sampled_from([False] * CONTEXT_OFF + [True])
    return st.tuples(on, st.one_of(one.map(lambda op: (op,)), sequences)).map(
        lambda t: t[1] if t[0] else ())


def _output_padding(dim: int, stride: tuple, dilation: tuple) -> st.SearchStrategy:
    """0 (first: the simplest), or a value < max(stride, dilation) per dimension, spelled as an
    int, a full-rank tuple or a length-1 list like the other int-list arguments."""
    limits = [max(si, di) - 1 for si, di in zip(stride, dilation, strict=True)]
    common = st.integers(0, min(limits))
    return st.one_of(st.just(0), common, common.map(lambda v: (v,)),
                     st.tuples(*[st.integers(0, lim) for lim in limits]))


def _fits_mode(mode: str, padding, extent: int, pad: int) -> int:
    """The smallest input size ``mode`` accepts ("same" pads extent - 1 in all, the larger half
    after)."""
    return min_input_size(mode, same_pads(extent - 1)[1] if padding == "same" else pad)


def quant_cases(schemes=("int8_per_tensor", "int8_per_channel")):
    """Quantized cases (static int8 pt2e, float32 input). No transposed: neither quantizer
    annotates it."""
    return conv_cases(quant=st.sampled_from(schemes), transposed=st.just(False))


def mixed_cases(large_rate: float = 0.0):
    """The default generator of ``harness run``: fp32 and int8 cases together; with
    ``large_rate`` > 0 (the nightly profile), that share of the cases comes from
    ``large_cases`` (the size axis). At 0 nothing more is drawn: the same cases as before."""
    small = st.one_of(conv_cases(), quant_cases())
    if large_rate <= 0:
        return small
    return _sized(small, large_cases(quant=st.sampled_from(LARGE_QUANT)), large_rate)


# The strata a run starts with (a fair first look, every known finding family): strata.py.


# --- The size axis (issue 46): the sizes real models use -----------------------------------------
#
# The draws above keep channels, kernels and spatial sizes small: the reduction length K (input
# channels per group x kernel volume) stays in the hundreds and no tensor comes near a texture
# limit. ``large_cases`` draws the sizes where a delegate's size-dependent code runs, each case
# under a compute budget by construction (every size is drawn below the largest that still fits
# with the sizes not drawn yet at their smallest: never a filter, and shrinking goes to the small
# end of each range):
#   "reduction": K > LONG_REDUCTION (100k terms: 2-D kernels 7..11, 3-D 5..7, up to 2048 input
#                channels per group), C_out up to 256 (Vulkan's im2col route from 128);
#   "channels":  64..2048 channels (grouped, depthwise too), kernels 1..11, moderate spatial sizes;
#   "texture":   one spatial size just past a texture limit (TEXTURE_LIMITS), few input channels
#                (up to 8 per group), C_out up to 256.
LARGE_CHANNELS = 2048
LARGE_KERNEL = 11
LONG_REDUCTION = 100_000
# Per case: multiply-accumulates (batch x C_out x output positions x K; a transposed conv's
# scatter counted the same way) and bytes of input + output + weights (+ residuals) at 4 bytes
# an element, at the case's largest (dynamic) size. A case this size lowers and runs in seconds
# on XNNPACK and on lavapipe (docs/generation.md, "Sizes").
MAX_MACS = 300_000_000
MAX_BYTES = 64 * 2**20
# Texture extents that decide what the Vulkan delegate does with a tensor: 2048 the Vulkan
# spec's minimum maxImageDimension3D (and the partitioner's texture z limit,
# backends/vulkan/utils.py DEFAULT_TEXTURE_LIMITS = (16384, 16384, 2048); SMALL_TEXTURE_LIMITS
# 2048 each); 4096 lavapipe's maxImageDimension3D (vulkaninfo; the runtime checks it only in a
# VULKAN_DEBUG build, api/containers/Tensor.cpp); 16384 maxImageDimension2D here and the
# partitioner's x / y limit (past it a tensor cannot be a texture at all).
TEXTURE_LIMITS = (2048, 4096, 16384)
IM2COL_MIN_COUT = 128  # Convolution.cpp kIm2colMinCOut: the im2col + GEMM route from here
SIZE_KINDS = ("reduction", "channels", "texture")
LARGE_QUANT = [None, None, "int8_per_tensor", "int8_per_channel"]


def _largest_shapes(case: ConvCase) -> list:
    """The input shapes the case runs at: its own, and every dynamic size."""
    return [case.input_shape, *case.dynamic_sizes]


def macs(case: ConvCase) -> int:
    """Multiply-accumulates of the conv at its largest size."""
    kvol = math.prod(case.spatial("kernel_size"))
    most = 0
    for shape in _largest_shapes(case):
        at = case.at_size(shape) if case.dynamic != "none" else case
        conv_in, out = at.conv_input_shape(), at.output_shape()
        if case.transposed:  # every input element scatters C_out/groups x kernel terms
            n = conv_in[0] * case.in_channels * math.prod(conv_in[2:]) \
                * (case.out_channels // case.groups) * kvol
        else:
            n = out[0] * case.out_channels * math.prod(out[2:]) * case.reduction_length()
        most = max(most, n)
    return most


def footprint(case: ConvCase) -> int:
    """Bytes of input, output, weights and residuals at 4 bytes an element, largest size."""
    weight = case.out_channels * case.reduction_length() + (case.out_channels if case.bias else 0)
    most = 0
    for shape in _largest_shapes(case):
        at = case.at_size(shape) if case.dynamic != "none" else case
        out = math.prod(at.output_shape())
        most = max(most, math.prod(at.conv_input_shape()) + out * (1 + case.residual_count()))
    return 4 * (most + weight)


def within_budget(case: ConvCase) -> bool:
    return macs(case) <= MAX_MACS and footprint(case) <= MAX_BYTES


def texture_extents(case: ConvCase) -> dict:
    """{tensor: (x, y, z)} of the Vulkan images the conv's float tensors need, as the
    partitioner lays them out (backends/vulkan/op_registry.py pick_conv_storage: channels-packed,
    a pointwise or depthwise conv1d height-packed; utils.required_image_extents), and the GEMM
    route's packed weight (Conv2dGemm.cpp prepack_conv2d_gemm_weight: align4(C_out) wide, K4 =
    ceil(kernel volume x align4(C_in) / 4) high, a texture2d it checks against the device's 2D
    limit) and im2col scratch (a texture2d while it fits the 2D limit, then a texture3d, then a
    buffer). A 3-D conv has none (5-D tensors are not textures). Largest size."""
    if case.dim == 3:
        return {}
    up4 = lambda n: -(-n // 4)  # noqa: E731
    k = case.spatial("kernel_size")
    pointwise_or_dw = case.dim == 1 and (k == (1,) or case.groups == case.in_channels
                                         == case.out_channels)
    extents = {}
    for shape in _largest_shapes(case):
        at = case.at_size(shape) if case.dynamic != "none" else case
        for name, (n, c, *sp) in (("input", at.conv_input_shape()), ("output", at.output_shape())):
            if case.dim == 2:
                ext = (sp[1], sp[0], up4(c) * n)
            elif pointwise_or_dw:
                ext = (sp[0], up4(c), n)
            else:
                ext = (sp[0], c, up4(n))
            extents[name] = tuple(max(a, b) for a, b in zip(extents.get(name, ext), ext))
    d = case.spatial("dilation")
    if (case.dim == 2 and not case.transposed and not case.quant and case.groups == 1
            and set(d) == {1}
            and k != (1, 1) and case.out_channels >= IM2COL_MIN_COUT):
        k_total = math.prod(k) * 4 * up4(case.in_channels)
        extents["gemm weight"] = (4 * up4(case.out_channels), up4(k_total), 1)
        # the im2col scratch: oh_tile output rows of W_out x K_total each, within a 16 MiB
        # budget (kIm2colScratchBudgetBytes), as a texture2d (K_total / 4, oh_tile * W_out)
        h_out, w_out = extents["output"][1], extents["output"][0]
        elem = 2 if case.dtype in ("float16", "bfloat16") else 4
        oh_tile = min(h_out, max(1, 16 * 2**20 // (w_out * k_total * elem)))
        extents["im2col scratch"] = (k_total // 4, oh_tile * w_out, 1)
    return extents


def im2col_tiles(case: ConvCase) -> int:
    """How many output-row tiles Vulkan's im2col route computes the case in (0: not that
    route; 1: untiled)."""
    ext = texture_extents(case)
    if "im2col scratch" not in ext:
        return 0
    return -(-ext["output"][1] * ext["output"][0] // ext["im2col scratch"][1])


def texture_extent(case: ConvCase) -> int:
    """The largest extent of any of the case's Vulkan images (0 for a 3-D conv)."""
    return max((e for ext in texture_extents(case).values() for e in ext), default=0)


def crossed_limits(case: ConvCase) -> tuple:
    """The TEXTURE_LIMITS some image of the case exceeds."""
    extent = texture_extent(case)
    return tuple(limit for limit in TEXTURE_LIMITS if extent > limit)


def size_class(case: ConvCase) -> str:
    """The case's place on the size axis: "texture" (some image past a texture limit),
    "reduction" (K > LONG_REDUCTION), "wide" (64+ input channels: the generator's small draws
    have at most 16) or "small". Every ``large_cases`` draw is one of the first three."""
    if crossed_limits(case):
        return "texture"
    if case.reduction_length() > LONG_REDUCTION:
        return "reduction"
    return "wide" if case.in_channels >= 64 else "small"


@st.composite
def _sized(draw, small: st.SearchStrategy, large: st.SearchStrategy, rate: float):
    """``large`` in about ``rate`` of the draws, else ``small`` (small first: shrinking goes
    there)."""
    share = round(rate * 20)
    flag = draw(st.sampled_from([False] * (20 - share) + [True] * share))
    return draw(large if flag else small)


def _out_size(size: int, pads: tuple, extent: int, stride: int, transposed: bool, op: int) -> int:
    if transposed:
        return (size - 1) * stride - pads[0] - pads[1] + extent + op
    return (size + pads[0] + pads[1] - extent) // stride + 1


def _cost(p: dict) -> tuple:
    """(MACs, bytes) of a plan: batch, cin, cout, groups, kvol, sizes and per-dimension pads,
    extents, strides, output paddings (the same arithmetic as ``macs`` / ``footprint``)."""
    outs = [_out_size(s, pd, e, st_, p["transposed"], op) for s, pd, e, st_, op in
            zip(p["sizes"], p["pads"], p["extents"], p["strides"], p["output_padding"])]
    n, cin, cout, g, kvol = p["batch"], p["cin"], p["cout"], p["groups"], p["kvol"]
    if p["transposed"]:
        m = n * cin * math.prod(p["sizes"]) * (cout // g) * kvol
    else:
        m = n * cout * math.prod(outs) * (cin // g) * kvol
    out = n * cout * math.prod(outs)
    weight = cout * (cin // g) * kvol + cout
    return m, 4 * (n * cin * math.prod(p["sizes"]) + out * (1 + p["residuals"]) + weight)


def _fits(p: dict) -> bool:
    m, b = _cost(p)
    return m <= MAX_MACS and b <= MAX_BYTES


def _largest(p: dict, key, lo: int, hi: int, index: int | None = None) -> int:
    """The largest value in [lo, hi] of ``p[key]`` (or ``p[key][index]``) with the plan within
    the budget; lo when none is (the cost grows with every size: a binary search)."""
    def at(v):
        q = dict(p)
        if index is None:
            q[key] = v
        else:
            q[key] = list(p[key])
            q[key][index] = v
        return q
    if hi <= lo or _fits(at(hi)):
        return max(lo, hi)
    good, bad = lo, hi
    while bad - good > 1:
        mid = (good + bad) // 2
        good, bad = (mid, bad) if _fits(at(mid)) else (good, mid)
    return good


@st.composite
def large_cases(draw, *, kinds=SIZE_KINDS, dims=(1, 2, 3), quant=st.just(None),
                transposed=st.booleans(), dtypes=st.sampled_from(DTYPES),
                padding_modes=st.sampled_from(PADDING_MODES), batch=st.sampled_from(BATCHES),
                limits=TEXTURE_LIMITS, spellings=None, memory_formats=None):
    """A case of the size axis (one of ``kinds``), within MAX_MACS and MAX_BYTES by
    construction. ``limits``: the texture limits a "texture" case crosses (one drawn);
    ``spellings``: the padding spellings to draw from (default: all a case may take). No
    dynamic shapes (a dynamic size would leave the sizes drawn here) and no prologue."""
    kind = draw(st.sampled_from(kinds))
    allowed = {"reduction": (2, 3), "texture": (1, 2), "channels": (1, 2, 3)}[kind]
    dim = draw(st.sampled_from([d for d in dims if d in allowed for _ in range(DIM_WEIGHTS[d])]
                               or [d for d in dims for _ in range(DIM_WEIGHTS[d])]))
    is_t = draw(transposed)
    q = draw(quant)
    is_t = is_t and not q  # no quantizer annotates a transposed conv (quant_cases)
    dtype = draw(dtypes)
    dtype = "float32" if q else dtype
    mode = draw(padding_modes)
    mode = "zeros" if is_t else mode

    # the structure and the kernel
    if kind == "reduction":
        groups, depthwise = draw(st.sampled_from([1, 1, 2])), False
        k_lo, k_hi = (7, LARGE_KERNEL) if dim == 2 else (5, 7)
    elif kind == "channels":
        groups = draw(st.sampled_from([1, 1, 2, 4, 8]))
        depthwise = draw(st.booleans()) and not is_t
        k_lo, k_hi = 1, (LARGE_KERNEL if dim < 3 else 3)
    else:
        groups, depthwise = draw(st.sampled_from([1, 1, 2, 3, 4])), False
        k_lo, k_hi = 1, LARGE_KERNEL
    kernel = draw(_per_dim(dim, st.integers(k_lo, k_hi), spell_short=False))
    dilation = draw(_per_dim(dim, st.integers(1, 2 if kind == "reduction" or dim == 3 else 3)))
    k, d = spatial(kernel, dim), spatial(dilation, dim)
    kvol = math.prod(k)

    # the padding spelling, stride and padding (as conv_cases draws them)
    kinds_ = ["int", "tuple", "list1"] + ([] if is_t else ["valid", "same"])
    if mode != "zeros" and dim > 1:
        kinds_.remove("list1")
    if spellings is not None:
        kinds_ = [k for k in kinds_ if k in spellings] or list(spellings)
    padding_kind = draw(st.sampled_from(kinds_))
    stride = draw(_per_dim(dim, st.integers(1, 3)))
    stride = 1 if padding_kind == "same" else stride
    if mode != "zeros" and padding_kind == "same" and isinstance(dilation, tuple) and dim > 1:
        dilation = spatial(dilation, dim)  # PyTorch's zip(dilation, kernel_size) quirk
    values = st.integers(0, max(3, max(k) // 2))
    padding = draw({"int": values, "list1": values.map(lambda p: (p,)),
                    "tuple": st.tuples(*[values] * dim)}.get(padding_kind, values))
    padding = padding_kind if padding_kind in ("valid", "same") else padding
    s = spatial(stride, dim)
    p = (0,) * dim if padding in ("valid", "same") else spatial(padding, dim)
    output_padding = draw(_output_padding(dim, s, d)) if is_t else 0
    op = spatial(output_padding, dim) if is_t else (0,) * dim
    extents = [d[i] * (k[i] - 1) + 1 for i in range(dim)]
    pads = [same_pads(e - 1) if padding == "same" else (p[i], p[i])
            for i, e in enumerate(extents)]
    low = []
    for i in range(dim):
        if is_t:
            low.append(max(1, math.ceil((2 * p[i] - extents[i] + 1) / s[i]) + 1))
        else:
            lo = max(1, extents[i] - 2 * p[i]) if padding != "same" else 1
            low.append(max(lo, _fits_mode(mode, padding, extents[i], p[i])))
    epilogue = draw(_epilogue())

    plan = {"transposed": is_t, "batch": 1, "groups": groups, "kvol": kvol, "sizes": list(low),
            "pads": pads, "extents": extents, "strides": list(s), "output_padding": list(op),
            "residuals": sum(o == "add" for o in epilogue)}
    # the texture case's size first: one spatial size just past a limit
    if kind == "texture":
        axis = draw(st.sampled_from(list(range(dim))[::-1]))  # the width first
        limit = draw(st.sampled_from(list(limits)))
        plan["sizes"][axis] = max(low[axis], limit + draw(st.integers(1, 16)))
    # then the channels, the batch and the other sizes, each the largest that fits at most
    if depthwise:  # cin = cout = groups (times a channel multiplier)
        g_hi = _largest_dw(plan, LARGE_CHANNELS)
        groups = draw(st.integers(min(64, g_hi), g_hi))
        plan.update(groups=groups, cin=groups, cout=groups)
        mult = min(draw(st.integers(1, 2)), LARGE_CHANNELS // groups)
        mult = _largest(plan, "cout", groups, groups * mult) // groups
        in_ch, out_ch = groups, groups * mult
        plan["cout"] = out_ch
    else:
        if kind == "reduction":
            need = -(-(LONG_REDUCTION + 1) // kvol)
            if need > LARGE_CHANNELS // groups:
                groups = 1
            lo_pg, hi_pg = min(need, LARGE_CHANNELS // groups), LARGE_CHANNELS // groups
        elif kind == "channels":
            lo_pg, hi_pg = max(1, 64 // groups), LARGE_CHANNELS // groups
        else:
            lo_pg, hi_pg = 1, 8
        plan.update(groups=groups, cout=groups)
        hi_pg = _largest({**plan, "cin": groups * hi_pg}, "cin", groups * lo_pg,
                         groups * hi_pg) // groups
        in_pg = draw(st.integers(lo_pg, max(lo_pg, hi_pg)))
        plan["cin"] = in_ch = groups * in_pg
        # C_out from 128: Vulkan's im2col + GEMM route (its scratch a texture2d, a texture3d past
        # the 2D limit, a buffer past both: Conv2dGemm.cpp), for a long reduction or a wide input
        out_hi = {"reduction": 256, "channels": LARGE_CHANNELS, "texture": 256}[kind]
        out_hi = _largest(plan, "cout", groups, max(groups, out_hi)) // groups
        out_ch = groups * draw(st.integers(1, max(1, out_hi)))
        plan["cout"] = out_ch
    plan["batch"] = n = _largest(plan, "batch", 1, draw(batch))
    extra = {"reduction": 4, "channels": 48, "texture": 4}[kind]
    for i in range(dim):
        if kind == "texture" and i == axis:
            continue
        hi = _largest(plan, "sizes", low[i], low[i] + extra, index=i)
        plan["sizes"][i] = draw(st.integers(low[i], hi))
    case = ConvCase(
        dim=dim, transposed=is_t, in_channels=in_ch, out_channels=out_ch, kernel_size=kernel,
        stride=stride, padding=padding, padding_mode=mode, dilation=dilation,
        output_padding=output_padding, groups=groups, bias=draw(st.booleans()),
        input_shape=(n, in_ch, *plan["sizes"]), dtype=dtype, quant=q, epilogue=epilogue,
    )
    return draw(_layout(case, memory_formats, st.just("none")))


def _largest_dw(plan: dict, most: int) -> int:
    """The largest depthwise channel count (cin = cout = groups) within the budget."""
    def at(g):
        return {**plan, "groups": g, "cin": g, "cout": g}
    if _fits(at(most)):
        return most
    good, bad = 1, most
    while bad - good > 1:
        mid = (good + bad) // 2
        good, bad = (mid, bad) if _fits(at(mid)) else (good, mid)
    return good
