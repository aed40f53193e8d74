"""Which code paths the routing models can name at all: the reachable part of the known universe.

``vulkan_routing.predict`` and ``xnnpack_paths.predict`` read a handful of case fields. Here the
case space is cut into a finite grid of *axes*, each listing the values the models' rules tell
apart (dim; dtype and the int8 scheme; transposed; channel structure: plain, depthwise, depthwise
with a channel multiplier, grouped; input channels per group 1 / 2 / 4 / 32 (the q8ta im2col rule
reads % 4 and >= 32, XNNPACK's depthwise rule reads 1); C_out >= 128; kernel 1 / 3 / 5 / other;
stride and dilation equal or not, dilation 1 or not; padding 0 or not; output H*W <= 4096 or not;
batch 1 or not; bias; the epilogue: none, relu, relu6, hardtanh(-1, 1), batch norm then relu, a
residual add then relu; weights constant or a graph input). ``realize`` turns a grid point into a
ConvCase.

``explore`` enumerates every distinct answer a function of a case gives over the whole grid, but
branches only on the axes whose fields the function actually read (each field of a realized case
depends on a declared set of axes, FIELD_AXES): a branch whose reads are all decided is one leaf,
whatever the other axes are. So the routes are the model's own answers, not a hand-written list,
and the grid's 3.5 million points cost 4,724 Vulkan leaves (all four device-fact combinations at
once) and 638 XNNPACK leaves: about 2 s.

Device facts (``mali``, ``int8_dot``) are predict's parameters: reachability is per device, and a
known shader reachable only under other facts is named so ("Mali only", "no int8 dot product
only"). A case the generators never draw (an int8 transposed conv: no quantizer annotates one,
generation/strategies.py quant_cases) does not make a path reachable ("not generated"); a known
name no grid point routes to is "not routed by the model" (buffer and texture3d storage variants,
which the runtime picks only for tensors too large for a 2D texture, the model assuming small
cases; the buffer-storage int8 depthwise shader). A name the model gives that the source lacks is
listed apart (``absent``): the model marks it itself (Route.absent: the runtime asks for a shader
no yaml generates and throws), and tests check both sides against the plug-in's source.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from functools import lru_cache
from types import SimpleNamespace

from harness.spec import ConvCase
from harness.stages.backends import vulkan_routing, xnnpack_paths

# Axis -> values, the first the default (what an axis a branch never read is realized as).
AXES: dict[str, tuple] = {
    "dim": (2, 1),
    "dtype": ("float32", "float16", "bfloat16"),
    "quant": (None, "int8_per_tensor", "int8_per_channel"),
    "transposed": (False, True),
    "structure": ("plain", "depthwise", "multiplier", "grouped"),
    "in_per_group": (4, 1, 2, 32),
    "wide": (False, True),
    "kernel": (3, 1, 5, 2),
    "stride_dilation": ((1, 1), (2, 1), (1, 2), (2, 2)),
    "padding": (0, 1),
    "out_hw": ("small", "large"),
    "batch": (1, 2),
    "bias": (True, False),
    "epilogue": ((), ("relu",), ("relu6",), (("hardtanh", -1.0, 1.0),), ("batchnorm", "relu"),
                 ("add", "relu")),
    "weights": ("constant", "input"),
}
_SIZE = ("dim", "transposed", "kernel", "stride_dilation", "padding", "out_hw")
_CHANNELS = ("structure", "in_per_group", "wide")
# A realized case's field -> the axes its value depends on (anything else read: every axis).
FIELD_AXES: dict[str, tuple] = {
    "dim": ("dim",), "dtype": ("dtype", "quant"), "quant": ("quant",),
    "transposed": ("transposed",), "in_channels": ("structure", "in_per_group"),
    "out_channels": ("structure", "wide"),
    "groups": ("structure",), "kernel_size": ("kernel",), "stride": ("stride_dilation",),
    "dilation": ("stride_dilation",), "padding": ("padding",), "bias": ("bias",),
    "epilogue": ("epilogue",), "weights": ("weights",), "prologue": (),
    "padding_mode": (), "output_padding": (),
    # Issue 39's axes: a realized grid case is contiguous and static. They open no path of
    # their own (the same shaders, the same XNNPACK nodes); the models read them only to refuse
    # (vulkan_routing: a dynamic batch is F1; xnnpack_paths: a converted module fails lowering).
    "memory_format": (), "module_channels_last": (), "dynamic": (), "dynamic_sizes": (),
    # input_shape is read by index (_Shape): N, C, the spatial sizes
    "input_shape[0]": ("batch",), "input_shape[1]": ("structure", "in_per_group"),
    "input_shape[2:]": _SIZE,
    "input_shape": ("batch",) + _CHANNELS + _SIZE,
}
LARGE_HW = 65  # output side of "large": 65 * 65 > 4096 (Q8taConv2d.cpp's im2col bound)

# What the generators never draw: (predicate on a case, reason).
NOT_GENERATED = (
    (lambda c: bool(c.quant) and c.transposed,
     "int8 transposed: no quantizer annotates a transposed conv (strategies.quant_cases)"),
)

REASONS = {
    "mali": "Mali only",
    "not_mali": "not on Mali",
    "no_int8_dot": "no int8 dot product only",
    "int8_dot": "int8 dot product only",
    "not_generated": "not generated",
    "refused": "refused",
    "not_routed": "not routed by the model",
    "not_fused": "int8 fuses relu only",
}
# What each reason means (for coverage.json and the report).
NOTES = {
    REASONS["mali"]: "the runtime picks it on a Mali GPU only (device_is_mali)",
    REASONS["not_mali"]: "the runtime picks another variant on a Mali GPU",
    REASONS["no_int8_dot"]: "a _fallback variant, picked only without int8 dot products "
                            "(supports_int8_dot_product)",
    REASONS["int8_dot"]: "picked only with int8 dot products",
    REASONS["not_generated"]: "only a case the generators never draw routes there: "
                              + "; ".join(why for _, why in NOT_GENERATED),
    REASONS["refused"]: "only cases the lowering or the runtime stops before dispatching "
                        "route there (vulkan_routing.py R1-R8)",
    REASONS["not_routed"]: "no grid case routes there: buffer / texture3d storage variants "
                           "(picked for tensors too large for a 2D texture; the model assumes "
                           "small cases fit one) and shaders no delegated op picks",
    REASONS["not_fused"]: "an int8 conv never carries relu6 / hardtanh bounds: XNNPACKQuantizer "
                          "annotates conv + relu only, so a hardtanh keeps its own q/dq "
                          "(xnnpack_paths.never_fused)",
}


def _pick(draw, options):
    return options[0] if draw is None else draw(_sampled(options))


def _sampled(options):
    from hypothesis import strategies as st

    return st.sampled_from(options)


def realize(point: dict, draw=None) -> ConvCase:
    """The ConvCase of a grid point (an axis it lacks takes its default). With ``draw`` (a
    Hypothesis draw function) the details inside each axis value are drawn: how many groups,
    which "other" kernel, which wide C_out, hardtanh bounds, sizes, int or tuple spellings.
    Without it, the first of each."""
    return ConvCase(**_fields({a: point.get(a, values[0]) for a, values in AXES.items()}, draw))


def _fields(p: dict, draw=None) -> dict:
    """A full grid point's ConvCase fields (each depends on its FIELD_AXES only)."""
    dim, quant, is_t = p["dim"], p["quant"], p["transposed"]
    structure = p["structure"]
    g = {"plain": 1, "grouped": _pick(draw, (2, 4)),
         "depthwise": _pick(draw, (4, 8)), "multiplier": _pick(draw, (4, 8))}[structure]
    ipg = {4: (4, 8, 16, 28), 1: (1,), 2: (2, 3, 5, 6), 32: (32, 36, 48)}[p["in_per_group"]]
    ipg = 1 if structure in ("depthwise", "multiplier") else _pick(draw, ipg)
    if structure == "depthwise":
        opg = 1
    elif structure == "multiplier":
        opg = _pick(draw, (2, 3))
    elif p["wide"]:
        opg = -(-_pick(draw, (128, 160, 256)) // g)
    else:
        opg = _pick(draw, (4, 2, 3, 5, 6, 8))
    k = {2: _pick(draw, (2, 4))}.get(p["kernel"], p["kernel"])
    s, d = p["stride_dilation"]
    pad = p["padding"] and _pick(draw, (1, 2))
    extent = d * (k - 1) + 1
    want = LARGE_HW if p["out_hw"] == "large" else 1
    if is_t:  # output (L-1)*s - 2p + extent >= want
        size = max(1, -(-(want + 2 * pad - extent) // s) + 1)
    else:  # output (L + 2p - extent) // s + 1 >= want
        size = max(1, (want - 1) * s + extent - 2 * pad)
    size += _pick(draw, (2, 0, 1, 3, 4))
    epilogue = p["epilogue"]
    if epilogue and isinstance(epilogue[0], tuple):  # hardtanh, bounds other than 0..6
        epilogue = (("hardtanh",) + _pick(draw, ((-1.0, 1.0), (-0.5, 2.0), (0.0, 1.0))),)

    def spell(v):
        return v if _pick(draw, ("int", "tuple")) == "int" else (v,) * dim

    return dict(dim=dim, transposed=is_t, in_channels=g * ipg, out_channels=g * opg,
                kernel_size=spell(k), stride=spell(s), dilation=spell(d), padding=spell(pad),
                groups=g, bias=p["bias"], input_shape=(p["batch"], g * ipg) + (size,) * dim,
                dtype="float32" if quant else p["dtype"], quant=quant, epilogue=epilogue,
                weights=p["weights"], prologue=None, padding_mode="zeros", output_padding=0)


class _Reads:
    """A case whose attribute reads are recorded (what explore branches on)."""

    def __init__(self, case):
        object.__setattr__(self, "_case", case)
        object.__setattr__(self, "read", {})  # ordered: the first read first

    def __getattr__(self, name):
        if name == "input_shape":
            return _Shape(self._case.input_shape, self.read)
        self.read[name] = None
        return getattr(self._case, name)


class _Shape:
    """input_shape, its reads recorded by part: N, C or the spatial sizes (a read of anything
    else, e.g. len() or iteration, records the whole shape)."""

    def __init__(self, shape: tuple, read: dict):
        self._shape, self._read = shape, read

    def __getitem__(self, i):
        if i == 0 or i == 1:
            self._read[f"input_shape[{i}]"] = None
        elif isinstance(i, slice) and i.start == 2 and i.stop is None and i.step is None:
            self._read["input_shape[2:]"] = None
        else:
            self._read["input_shape"] = None
        return self._shape[i]

    def __getattr__(self, name):
        self._read["input_shape"] = None
        return getattr(self._shape, name)

    def __len__(self):
        self._read["input_shape"] = None
        return len(self._shape)

    def __iter__(self):
        self._read["input_shape"] = None
        return iter(self._shape)

    def __eq__(self, other):
        self._read["input_shape"] = None
        return self._shape == other

    __hash__ = None


@dataclass(frozen=True)
class Leaf:
    point: tuple   # ((axis, value), ...): the axes this answer depends on
    answer: object

    def case(self, draw=None) -> ConvCase:
        return realize(dict(self.point), draw)


def explore(fn) -> list[Leaf]:
    """Every (partial grid point, answer) of ``fn(case)`` over the grid, in a fixed order:
    depth first from the defaults, branching on an undecided axis only where a field ``fn``
    read takes more than one value over the undecided axes it depends on. A leaf's answer is
    then the answer at every completion of its point (``fn`` is a pure function of the fields
    it reads)."""
    leaves, stack = [], [()]
    while stack:
        point = stack.pop()
        decided = dict(point)
        reads = _Reads(SimpleNamespace(**_fields({a: decided.get(a, values[0])
                                                  for a, values in AXES.items()})))
        answer = fn(reads)
        axis = next((a for f in reads.read if (a := _split(f, _decided_of(f, decided)))), None)
        if axis:
            stack.extend(point + ((axis, v),) for v in reversed(AXES[axis]))
        else:
            leaves.append(Leaf(point, answer))
    return leaves


_NAMES = tuple(AXES)


def _decided_of(field_name: str, decided: dict) -> tuple:
    return tuple((a, decided[a]) for a in FIELD_AXES.get(field_name, _NAMES) if a in decided)


@lru_cache(maxsize=None)
def _value(field_name: str, full: tuple):
    values = _fields(dict(zip(_NAMES, full, strict=True)))
    if field_name.startswith("input_shape["):
        shape = values["input_shape"]
        return {"input_shape[0]": shape[0], "input_shape[1]": shape[1]}.get(field_name,
                                                                           shape[2:])
    return values.get(field_name, full)  # a field outside FIELD_AXES: the whole point


@lru_cache(maxsize=None)
def _split(field_name: str, decided: tuple):
    """The undecided axis to branch on for this field (None: its value is the same over every
    completion): the first one that changes the value with the others held."""
    decided = dict(decided)
    free = [a for a in FIELD_AXES.get(field_name, _NAMES) if a not in decided]
    if not free:
        return None
    if math.prod(len(AXES[a]) for a in free) > 4096:
        return free[0]
    values = {}
    for combo in itertools.product(*(AXES[a] for a in free)):
        chosen = {**decided, **dict(zip(free, combo, strict=True))}
        values[combo] = _value(field_name, tuple(chosen.get(a, AXES[a][0]) for a in _NAMES))
    if len(set(values.values())) == 1:
        return None
    for i, axis in enumerate(free):
        seen: dict = {}
        for combo, v in values.items():
            if seen.setdefault(combo[:i] + combo[i + 1:], v) != v:
                return axis
    return free[0]


def generated(case) -> str:
    """"" when the generators may draw ``case``, else why not."""
    return next((why for test, why in NOT_GENERATED if test(case)), "")


DEVICES = tuple((mali, dot) for mali in (False, True) for dot in (True, False))


@lru_cache(maxsize=None)
def vulkan_leaves() -> tuple:
    """The Vulkan routing model over the grid, for every device: each leaf's answer is (why the
    generators never draw it or "", {(mali, int8_dot): Route or None})."""
    return tuple(explore(lambda c: (generated(c), {
        (m, d): vulkan_routing.predict(c, mali=m, int8_dot=d) for m, d in DEVICES})))


@lru_cache(maxsize=None)
def xnnpack_leaves() -> tuple:
    """The XNNPACK path model over the grid: answers (why not generated or "", path or None)."""
    return tuple(explore(lambda c: (generated(c), xnnpack_paths.predict(c))))


@dataclass
class Reachability:
    """One backend's known names, split by whether this device can reach them."""
    reachable: dict = field(default_factory=dict)    # name -> the rule that routes there
    unreachable: dict = field(default_factory=dict)  # known name -> reason (REASONS)
    absent: dict = field(default_factory=dict)       # named by the model, not in the source

    def to_dict(self) -> dict:
        return {"reachable": sorted(self.reachable), "unreachable": dict(sorted(
            self.unreachable.items())), "absent": dict(sorted(self.absent.items()))}


def vulkan_names(mali: bool = False, int8_dot: bool = True) -> tuple[dict, dict, dict, dict]:
    """name -> rule: the shaders the model says a generated case dispatches on this device; the
    same for cases never generated; the names it marks absent from the source; the shaders only
    refused cases (Route.refused) route to."""
    here, not_drawn, absent, refused = {}, {}, {}, {}
    for leaf in vulkan_leaves():
        why, routes = leaf.answer
        route = routes[(mali, int8_dot)]
        if not route:
            continue
        for name in route.shaders:
            if name in route.absent:
                absent.setdefault(name, route.rule)
            elif route.refused:
                refused.setdefault(name, route.refused)
            else:
                (not_drawn if why else here).setdefault(name, route.rule)
    refused = {n: r for n, r in refused.items() if n not in here and n not in not_drawn}
    return here, not_drawn, absent, refused


def vulkan(known, mali: bool = False, int8_dot: bool = True) -> Reachability:
    """The known Vulkan conv shaders (the plug-in source's universe) this device can reach."""
    known = set(known)
    here, _, absent, refused = vulkan_names(mali, int8_dot)
    other_mali = vulkan_names(not mali, int8_dot)[0]
    other_dot = vulkan_names(mali, not int8_dot)[0]
    not_drawn = {n for m, d in DEVICES for n in vulkan_names(m, d)[1]}
    out = Reachability(absent=dict(sorted(absent.items())) if known else {})  # no source, no say
    for name in sorted(known):
        if name in here:
            out.reachable[name] = here[name]
        elif name in other_mali:
            out.unreachable[name] = REASONS["not_mali" if mali else "mali"]
        elif name in other_dot:
            out.unreachable[name] = REASONS["int8_dot" if not int8_dot else "no_int8_dot"]
        elif name in not_drawn:
            out.unreachable[name] = REASONS["not_generated"]
        elif name in refused:
            out.unreachable[name] = REASONS["refused"]
        else:
            out.unreachable[name] = REASONS["not_routed"]
    if known:  # the model names it, the source lacks it, and the model did not say so: a typo
        for name in sorted(set(here) - known - set(absent)):
            out.absent[name] = f"{here[name]} (not marked absent by the model)"
    return out


def xnnpack(known=xnnpack_paths.KNOWN) -> Reachability:
    """The known XNNPACK conv paths a generated case is predicted to reach."""
    here, not_drawn = {}, {}
    for leaf in xnnpack_leaves():
        why, path = leaf.answer
        if path:
            (not_drawn if why else here).setdefault(path, "xnnpack_paths.predict")
    out = Reachability()
    for name in sorted(set(known)):
        if name in here:
            out.reachable[name] = here[name]
        else:
            out.unreachable[name] = REASONS[
                "not_generated" if name in not_drawn
                else "not_fused" if xnnpack_paths.never_fused(name) else "not_routed"]
    if known:
        out.absent = {n: r for n, r in sorted(here.items()) if n not in set(known)}
    return out
