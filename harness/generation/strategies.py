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


def mixed_cases():
    """The default generator of ``harness run``: fp32 and int8 cases together."""
    return st.one_of(conv_cases(), quant_cases())


# The strata a run starts with (a fair first look, every known finding family): strata.py.
