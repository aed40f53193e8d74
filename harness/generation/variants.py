"""One-step variants of a case: each field moved to its simplest neighbour, each spelling swapped.

What decides a finding is found by executing these as real cells (harness/run/diagnose.py): a
variant whose cell no longer lands in the finding names the field it changed. Every variant is
one change away from the case, so a variant that leaves the finding says that field decides it,
whatever the case's other fields are; a correlational rule over a run's few cells cannot.

The changes (only those that apply to the case; a change that makes no legal ConvCase is left
out, and the input grows where a larger kernel would leave the output empty):

- spellings (the conv is the same to PyTorch): a length-1 list ``[p]`` -> ``p`` and -> the
  full-rank tuple, for padding, stride, dilation and output_padding; ``"valid"`` -> ``0`` and ->
  the zero tuple (``"valid"`` reaches the graph as the length-1 list ``[0]``, so it is named the
  length-1 list spelling too); ``"same"`` -> its explicit pads (a tuple when symmetric, else an
  explicit ``F.pad`` prologue); an int padding -> the tuple; a tuple of equal values -> the int;
- the kernel: its parity flipped (k -> k-1, 1 -> 2), 3x3/5x5 vs another odd kernel (-> 7, or
  -> 3 from another odd size), -> 1;
- groups -> 1, or -> depthwise; channels per group -> a multiple of 4;
- dilation -> 1, stride -> 1, padding -> 0 (all in the same spelling), output_padding -> 0;
- batch -> 1, dtype -> float32, the quant scheme -> the other one and -> none, padding_mode ->
  zeros, bias -> off, transposed -> a regular conv;
- the context: epilogue -> none, prologue -> none, weights -> constant;
- the layout (issue 39): memory_format -> contiguous, module_channels_last -> off, dynamic ->
  none (static, at the case's own input_shape).
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.spec import CaseError, ConvCase

INT_LISTS = ("padding", "stride", "dilation", "output_padding")
LIST1 = "spelling (length-1 list)"


@dataclass(frozen=True)
class Step:
    """One variant: the field it changes (as a finding names what decides it), the change in
    words, and the variant case."""
    field: str
    change: str
    case: ConvCase


def spell(value) -> str:
    """A value as a user spells it: ``[1]`` (a length-1 list), ``(1, 1)``, ``1``, ``"valid"``."""
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, tuple):
        return f"[{value[0]}]" if len(value) == 1 else "(" + ", ".join(map(str, value)) + ")"
    return str(value)


def _fit(case: ConvCase) -> ConvCase:
    """The case with its spatial input grown until the output is not empty (a larger kernel or
    dilation needs a larger input)."""
    for _ in range(64):
        out = case.output_shape()[2:]
        if min(out) >= 1:
            return case
        shape = list(case.input_shape)
        for i, size in enumerate(out):
            if size < 1:
                shape[2 + i] += 1 - size
        case = ConvCase.from_dict({**case.to_dict(), "input_shape": shape})
    return case


def _with(case: ConvCase, **changes) -> ConvCase | None:
    data = case.to_dict()
    data.update(changes)
    try:
        return _fit(ConvCase.from_dict(data))
    except (CaseError, TypeError, ValueError):
        return None


def _same_shape(value, new: int):
    """``value`` with every element set to ``new``, spelled the same (int stays int)."""
    return tuple(new for _ in value) if isinstance(value, tuple) else new


def _spellings(case: ConvCase):
    dim = case.dim
    for name in INT_LISTS:
        if name == "output_padding" and not case.transposed:
            continue
        v = getattr(case, name)
        if isinstance(v, tuple) and len(v) == 1:
            yield f"{name} {LIST1}", f"{name} spelled {spell(v)} -> {v[0]}", {name: v[0]}
            if dim > 1:
                yield (f"{name} {LIST1}", f"{name} spelled {spell(v)} -> {spell(v * dim)}",
                       {name: list(v * dim)})
        elif isinstance(v, tuple) and len(set(v)) == 1:
            yield f"{name} spelling (tuple)", f"{name} spelled {spell(v)} -> {v[0]}", {name: v[0]}
        elif name == "padding" and isinstance(v, int) and dim > 1:
            yield ("padding spelling (int)", f"padding spelled {v} -> {spell((v,) * dim)}",
                   {name: [v] * dim})
    p = case.padding
    if p == "valid":
        yield f"padding {LIST1}", 'padding spelled "valid" -> 0', {"padding": 0}
        if dim > 1:
            yield (f"padding {LIST1}", f'padding spelled "valid" -> {spell((0,) * dim)}',
                   {"padding": [0] * dim})
    elif p == "same":
        pads = case.side_pads()
        if all(a == b for a, b in pads):
            left = tuple(a for a, _ in pads)
            explicit = left[0] if dim == 1 else list(left)
            yield ('padding spelling ("same")',
                   f'padding spelled "same" -> {spell(left if dim > 1 else left[0])}',
                   {"padding": explicit})
        elif case.prologue is None and case.padding_mode == "zeros":
            flat = [x for a, b in reversed(pads) for x in (a, b)]  # F.pad: last dimension first
            yield ('padding spelling ("same")', f'padding "same" -> F.pad({flat}) and padding 0',
                   {"padding": 0, "prologue": ["pad", flat, 0]})


def _kernel(case: ConvCase):
    k = case.kernel_size
    ks = k if isinstance(k, tuple) else (k,)

    def to(sizes: list[int]):  # (change in words, the field's new value), spelled as k is
        new = tuple(sizes) if isinstance(k, tuple) else sizes[0]
        return f"kernel {spell(k)} -> {spell(new)}", {"kernel_size": list(sizes)
                                                      if isinstance(k, tuple) else sizes[0]}

    yield "kernel parity", *to([x - 1 if x > 1 else x + 1 for x in ks])
    if all(x in (3, 5) for x in ks):
        yield "kernel 3x3/5x5", *to([7] * len(ks))
    elif all(x % 2 for x in ks):
        yield "kernel 3x3/5x5", *to([3] * len(ks))
    if any(x != 1 for x in ks):
        yield "kernel size", *to([1] * len(ks))


def _groups(case: ConvCase):
    g, cin, cout = case.groups, case.in_channels, case.out_channels
    depthwise = g > 1 and g == cin
    if g > 1:
        yield "groups", f"groups {g} -> 1", {"groups": 1}
    if not depthwise and cin > 1 and cout % cin == 0:
        yield "depthwise", f"groups {g} -> {cin} (depthwise)", {"groups": cin}
    if not depthwise:
        per_in, per_out = cin // g, cout // g
        if per_in % 4 or per_out % 4:
            up_in, up_out = -(-per_in // 4) * 4, -(-per_out // 4) * 4
            shape = list(case.input_shape)
            shape[1] = g * up_in
            yield ("channels per group % 4",
                   f"channels per group (in {per_in}, out {per_out}) -> (in {up_in}, out {up_out})",
                   {"in_channels": g * up_in, "out_channels": g * up_out, "input_shape": shape})


def _values(case: ConvCase):
    for name, simplest in (("dilation", 1), ("stride", 1), ("padding", 0), ("output_padding", 0)):
        v = getattr(case, name)
        if isinstance(v, str) or (name == "output_padding" and not case.transposed):
            continue
        if any(x != simplest for x in (v if isinstance(v, tuple) else (v,))):
            new = _same_shape(v, simplest)
            yield name, f"{name} {spell(v)} -> {spell(new)}", {name: list(new)
                                                                if isinstance(new, tuple) else new}
    if case.input_shape[0] > 1:
        shape = list(case.input_shape)
        shape[0] = 1
        yield "batch", f"batch {case.input_shape[0]} -> 1", {"input_shape": shape}
    if case.dtype != "float32":
        yield "dtype", f"dtype {case.dtype} -> float32", {"dtype": "float32"}
    if case.quant:
        other = {"int8_per_tensor": "int8_per_channel",
                 "int8_per_channel": "int8_per_tensor"}[case.quant]
        yield "quant scheme", f"quant {case.quant} -> {other}", {"quant": other}
        yield "quantization", f"quant {case.quant} -> none (float32)", {"quant": None}
    if case.padding_mode != "zeros":
        yield "padding_mode", f"padding_mode {case.padding_mode} -> zeros", {"padding_mode": "zeros"}
    if case.prologue is not None:
        yield "prologue", "prologue (explicit pad) -> none", {"prologue": None}
    if case.epilogue:
        names = ".".join(e if isinstance(e, str) else e[0] for e in case.epilogue)
        yield "epilogue", f"epilogue {names} -> none", {"epilogue": []}
    if case.weights != "constant":
        yield "weights", f"weights {case.weights} -> constant", {"weights": "constant"}
    if case.bias:
        yield "bias", "bias -> off", {"bias": False}
    if case.transposed:
        yield "transposed", "transposed -> a regular conv", {"transposed": False,
                                                              "output_padding": 0}


def _layout(case: ConvCase):
    """Issue 39's axes, each to its default: the input contiguous, the module not converted,
    the program static (at the case's own input_shape, the export's example)."""
    if case.memory_format != "contiguous":
        yield "memory_format", f"memory_format {case.memory_format} -> contiguous", \
            {"memory_format": "contiguous"}
    if case.module_channels_last:
        yield "module_channels_last", "module channels-last -> not converted", \
            {"module_channels_last": False}
    if case.dynamic != "none":
        yield "dynamic", f"dynamic {case.dynamic} ({len(case.dynamic_sizes)} sizes) -> static", \
            {"dynamic": "none", "dynamic_sizes": []}


def one_step(case: ConvCase) -> list[Step]:
    """The case's legal one-step variants, spellings first (the cheapest questions with the
    sharpest answers), then the kernel, groups and the other fields; each a different case."""
    out, seen = [], {case.case_id}
    for source in (_spellings, _layout, _kernel, _groups, _values):
        for field, change, changes in source(case):
            variant = _with(case, **changes)
            if variant is None or variant.case_id in seen:
                continue
            seen.add(variant.case_id)
            out.append(Step(field, change, variant))
    return out
