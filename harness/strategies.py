"""Hypothesis strategies for ConvCase: only configurations eager PyTorch accepts.

Constraints are built in rather than filtered (``assume`` would waste most draws): groups divide
both channel counts, "same" only with stride 1, input sizes chosen so the output is non-empty.
Shrinking goes towards 1d, small channels, kernel 1, stride 1, padding 0 -- the simplest conv.
"""

from __future__ import annotations

import math

from hypothesis import strategies as st

from .spec import ConvCase

MAX_KERNEL = 5


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
def conv_cases(draw, *, dims=(1, 2), quant=st.just(None), transposed=st.booleans(),
               max_channels_per_group: int = 4, batch=st.just(1)):
    dim = draw(st.sampled_from(dims))
    is_t = draw(transposed)
    groups = draw(st.sampled_from([1, 1, 2, 3, 4]))
    in_per_group = draw(st.integers(1, max_channels_per_group))
    depthwise = draw(st.booleans()) if not is_t else False
    out_per_group = 1 if depthwise else draw(st.integers(1, max_channels_per_group))
    in_ch, out_ch = groups * (1 if depthwise else in_per_group), groups * out_per_group

    # A length-1 kernel_size is not a spelling of the same conv: nn.Conv2d(kernel_size=[3])
    # builds a 3-d weight, so the kernel is an int or a full-rank tuple.
    kernel = draw(_per_dim(dim, st.integers(1, MAX_KERNEL), spell_short=False))
    # The Vulkan runtime has no transposed conv with dilation > 1 (a documented limitation, not
    # the bug under test): transposed cases keep dilation 1 so their rows stay about padding.
    dilation = 1 if is_t else draw(_per_dim(dim, st.integers(1, 3)))

    if is_t:
        padding_kind = draw(st.sampled_from(["int", "tuple", "list1"]))
    else:
        padding_kind = draw(st.sampled_from(["int", "tuple", "list1", "valid", "same"]))
    stride = 1 if padding_kind == "same" else draw(_per_dim(dim, st.integers(1, 3)))
    if padding_kind in ("valid", "same"):
        padding = padding_kind
    else:
        values = st.integers(0, 3)
        padding = {"int": values, "list1": values.map(lambda p: (p,)),
                   "tuple": st.tuples(*[values] * dim)}[padding_kind]
        padding = draw(padding)

    k, s, d = spatial(kernel, dim), spatial(stride, dim), spatial(dilation, dim)
    p = (0,) * dim if padding in ("valid", "same") else spatial(padding, dim)
    sizes = []
    for i in range(dim):
        extent = d[i] * (k[i] - 1) + 1
        if is_t:
            # out = (L-1)*s - 2p + extent > 0
            low = max(1, math.ceil((2 * p[i] - extent + 1) / s[i]) + 1)
        else:
            low = max(1, extent - 2 * p[i]) if padding != "same" else 1
        sizes.append(draw(st.integers(low, low + 8)))
    return ConvCase(
        dim=dim, transposed=is_t, in_channels=in_ch, out_channels=out_ch, kernel_size=kernel,
        stride=stride, padding=padding, dilation=dilation, groups=groups,
        bias=draw(st.booleans()), input_shape=(draw(batch), in_ch, *sizes),
        dtype="float32", quant=draw(quant),
    )


def quant_cases(schemes=("int8_per_tensor", "int8_per_channel")):
    """Quantized cases (static int8 pt2e). No transposed: neither quantizer annotates it."""
    return conv_cases(quant=st.sampled_from(schemes), transposed=st.just(False))


def mixed_cases():
    """The default generator of ``harness run``: fp32 and int8 cases together."""
    return st.one_of(conv_cases(), quant_cases())
