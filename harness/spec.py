"""ConvCase: one convolution configuration, with padding kept as the user spelled it.

The padding *spelling* is the point of half of this harness: ``padding="valid"``, ``padding=0``,
``padding=(0,)`` and ``padding=(0, 0)`` are the same convolution to PyTorch but reach a delegate as
different argument lists. So a case never normalises its arguments; sequences are stored as tuples
(hashable, frozen) and written to JSON as lists (JSON has no tuple; list and tuple spell the same
thing to ``nn.Conv*``, both go through ``_pair``/``_single``).
"""

from __future__ import annotations

import math

import dataclasses
import hashlib
import json
from typing import Any, Optional, Union

IntOrSeq = Union[int, tuple]
Padding = Union[int, tuple, str]

QUANT_SCHEMES = (None, "int8_per_tensor", "int8_per_channel")
DTYPES = ("float32", "float16", "bfloat16")  # the default first: shrinking goes towards it
PADDING_MODES = ("zeros", "reflect", "replicate", "circular")
DIMS = (1, 2, 3)
WEIGHTS = ("constant", "input")
# The memory format of the activation inputs (issue 39): what torch.export reads as the graph
# inputs' dim order. "channels_last" is 2-D convs' (NHWC), "channels_last_3d" 3-D convs' (NDHWC).
MEMORY_FORMATS = ("contiguous", "channels_last", "channels_last_3d")
# Dynamic shapes (issue 39): which input dimensions the program is exported dynamic in
# (torch.export.Dim, bounds = the smallest and largest value of ``dynamic_sizes``).
DYNAMIC = ("none", "batch", "spatial", "both")
# The conv in context (the graph around it): epilogue ops on its output, in order. A bare name,
# or [name, min, max] for the two with bounds (clamp: one bound may be null).
EPILOGUE_OPS = ("relu", "relu6", "batchnorm", "add")
BOUNDED_OPS = ("hardtanh", "clamp")
FIELDS = (
    "dim", "transposed", "in_channels", "out_channels", "kernel_size", "stride", "padding",
    "padding_mode", "dilation", "output_padding", "groups", "bias", "input_shape", "dtype", "quant",
    "prologue", "epilogue", "weights", "memory_format", "module_channels_last", "dynamic",
    "dynamic_sizes",
)
# Fields added after case ids, corpus files and caches existed. At their default they are left
# out of the serialised identity (to_json, which case_id hashes), so every older case keeps its
# id; any other value is written, so a case that uses them gets an id of its own. Compared as
# JSON values (to_dict's): the empty epilogue is [].
LATER_FIELD_DEFAULTS = {"padding_mode": "zeros", "output_padding": 0, "prologue": None,
                        "epilogue": [], "weights": "constant", "memory_format": "contiguous",
                        "module_channels_last": False, "dynamic": "none", "dynamic_sizes": []}


class CaseError(ValueError):
    """A case description that is not a ConvCase (bad field, bad type)."""


def _freeze(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


@dataclasses.dataclass(frozen=True)
class ConvCase:
    dim: int
    in_channels: int
    out_channels: int
    kernel_size: IntOrSeq
    input_shape: tuple
    stride: IntOrSeq = 1
    padding: Padding = 0
    dilation: IntOrSeq = 1
    groups: int = 1
    padding_mode: str = "zeros"  # nn.Conv*'s own name; non-zeros modes export as explicit pads
    output_padding: IntOrSeq = 0  # transposed only, as nn.ConvTranspose* spells it
    bias: bool = True
    transposed: bool = False
    dtype: str = "float32"
    quant: Optional[str] = None
    # The conv in context (all off by default: a lone nn.Conv* with constant weights).
    # prologue: ["pad", pads, value] -- an explicit F.pad(x, pads, value=value) (F.pad's order:
    # last dimension first, (left, right) per dimension) before a conv with padding 0.
    prologue: Optional[tuple] = None
    # epilogue: ops applied to the conv's output, in order, e.g. ["batchnorm", "relu"],
    # [["hardtanh", -0.5, 2.0]], ["add"] (a residual graph input of the output's shape).
    epilogue: tuple = ()
    # "input": the weight (and bias) are graph inputs of a functional conv, not constants.
    weights: str = "constant"
    # Memory format (issue 39). memory_format: the activation inputs' (x and residuals), as
    # ``x.to(memory_format=torch.channels_last)`` gives them; module_channels_last: the module is
    # converted too (``model.to(memory_format=...)`` of its rank: the weight's dim order), with
    # contiguous or channels-last inputs alike (a user who converts the model and not the input).
    memory_format: str = "contiguous"
    module_channels_last: bool = False
    # Dynamic shapes (issue 39): "batch" (dimension 0), "spatial" (every spatial dimension whose
    # size varies), "both". dynamic_sizes: the input shapes the one lowered program executes
    # at, in order (the input_shape is the export's example; each Dim's bounds are the smallest
    # and largest size of that dimension over input_shape and dynamic_sizes).
    dynamic: str = "none"
    dynamic_sizes: tuple = ()

    def __post_init__(self) -> None:
        for name in ("kernel_size", "stride", "padding", "dilation", "output_padding",
                     "input_shape", "prologue", "epilogue", "dynamic_sizes"):
            object.__setattr__(self, name, _freeze(getattr(self, name)))
        self._check_types()
        self._check_combinations()

    def _bad(self, field: str, why: str) -> CaseError:
        return CaseError(f"field {field!r}: {why} (got {_thaw(getattr(self, field))!r})")

    def _check_types(self) -> None:
        bad = self._bad
        if self.dim not in DIMS:
            raise bad("dim", "must be 1, 2 or 3")
        for name in ("in_channels", "out_channels", "groups"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise bad(name, "must be a positive int")
        for name in ("kernel_size", "stride", "dilation", "output_padding"):
            v = getattr(self, name)
            items = v if isinstance(v, tuple) else (v,)
            if not items or not all(isinstance(i, int) and not isinstance(i, bool) for i in items):
                raise bad(name, "must be an int or a non-empty list of ints")
        p = self.padding
        if isinstance(p, str):
            if p not in ("valid", "same"):
                raise bad("padding", 'a string padding must be "valid" or "same"')
        else:
            items = p if isinstance(p, tuple) else (p,)
            if not items or not all(isinstance(i, int) and not isinstance(i, bool) for i in items):
                raise bad("padding", 'must be an int, a list of ints, "valid" or "same"')
        shape = self.input_shape
        if (not isinstance(shape, tuple) or len(shape) != self.dim + 2
                or not all(isinstance(i, int) and i > 0 for i in shape)):
            raise bad("input_shape", f"must be {self.dim + 2} positive ints (N, C, *spatial)")
        if not isinstance(self.bias, bool) or not isinstance(self.transposed, bool):
            raise bad("bias" if not isinstance(self.bias, bool) else "transposed", "must be a bool")
        if self.dtype not in DTYPES:
            raise bad("dtype", f"must be one of {DTYPES}")
        if self.quant not in QUANT_SCHEMES:
            raise bad("quant", f"must be one of {QUANT_SCHEMES}")
        if self.padding_mode not in PADDING_MODES:
            raise bad("padding_mode", f"must be one of {PADDING_MODES}")
        if self.weights not in WEIGHTS:
            raise bad("weights", f"must be one of {WEIGHTS}")
        if self.memory_format not in MEMORY_FORMATS:
            raise bad("memory_format", f"must be one of {MEMORY_FORMATS}")
        if not isinstance(self.module_channels_last, bool):
            raise bad("module_channels_last", "must be a bool")
        if self.dynamic not in DYNAMIC:
            raise bad("dynamic", f"must be one of {DYNAMIC}")
        sizes = self.dynamic_sizes
        if not isinstance(sizes, tuple) or not all(
                isinstance(t, tuple) and len(t) == self.dim + 2
                and all(_is_int(i) and i > 0 for i in t) for t in sizes):
            raise bad("dynamic_sizes", f"must be a list of input shapes ({self.dim + 2} "
                                       f"positive ints each)")
        self._check_prologue()
        self._check_epilogue()

    def _check_prologue(self) -> None:
        pro = self.prologue
        if pro is None:
            return
        form = '["pad", [ints, last dimension first], value]'
        if not isinstance(pro, tuple) or len(pro) != 3 or pro[0] != "pad":
            raise self._bad("prologue", f"must be null or {form}")
        pads, value = pro[1], pro[2]
        if (not isinstance(pads, tuple) or not pads or len(pads) % 2 or len(pads) > 2 * self.dim
                or not all(_is_int(p) and p >= 0 for p in pads)):
            raise self._bad("prologue", f"pads must be 2 to {2 * self.dim} (an even number of) "
                                        f"non-negative ints")
        if not _is_number(value):
            raise self._bad("prologue", "the pad value must be a finite number")

    def _check_epilogue(self) -> None:
        epi = self.epilogue
        if not isinstance(epi, tuple):
            raise self._bad("epilogue", "must be a list of ops")
        for op in epi:
            if isinstance(op, str):
                if op in BOUNDED_OPS:
                    raise self._bad("epilogue", f"{op} needs its bounds: [{op!r}, min, max]")
                if op not in EPILOGUE_OPS:
                    raise self._bad("epilogue", f"unknown op {op!r} (one of "
                                                f"{', '.join(EPILOGUE_OPS + BOUNDED_OPS)})")
                continue
            if not isinstance(op, tuple) or len(op) != 3 or op[0] not in BOUNDED_OPS:
                raise self._bad("epilogue", f"an op is a name or [name, min, max] with name "
                                            f"one of {BOUNDED_OPS}")
            name, low, high = op
            if not all(v is None or _is_number(v) for v in (low, high)):
                raise self._bad("epilogue", f"{name} bounds must be finite numbers")
            if name == "hardtanh" and (low is None or high is None or not low < high):
                raise self._bad("epilogue", "hardtanh needs min < max (nn.Hardtanh asserts it)")
            if name == "clamp" and low is None and high is None:
                raise self._bad("epilogue", "clamp needs at least one bound (torch.clamp)")

    def _check_combinations(self) -> None:
        """The rules eager PyTorch applies to the later fields (torch/nn/modules/conv.py,
        aten's conv and pad checks), so an illegal case is one line naming its field instead of
        an INVALID row. The size rules for non-zeros modes are F.pad's: reflect needs each side's
        pad < the input size, circular <= it (wrapping around once at most)."""
        bad = self._bad
        if self.prologue is not None:
            zero = self.padding == "valid" or (not isinstance(self.padding, str)
                                               and not any(self.spatial("padding")))
            if not zero:
                raise bad("padding", "a prologue pads explicitly: the conv's padding must be 0 "
                                     "(any spelling of it, or \"valid\")")
            if self.padding_mode != "zeros":
                raise bad("padding_mode", "a prologue pads explicitly: padding_mode stays \"zeros\"")
        if self.weights == "input" and self.padding_mode != "zeros":
            raise bad("padding_mode", 'weights="input" calls the functional conv, which has no '
                                      'padding_mode')
        if self.quant and self.dtype != "float32":
            raise bad("dtype", "a quantized case (quant) is float32 (the quantizer's input)")
        if self.output_padding != 0 and not self.transposed:
            raise bad("output_padding", "only transposed convolutions have an output_padding")
        if self.padding_mode != "zeros" and self.transposed:
            raise bad("padding_mode", 'a transposed convolution supports only "zeros"')
        if self.transposed:
            if isinstance(self.padding, str):
                raise bad("padding", "a transposed convolution takes no string padding")
            stride, dilation = self.spatial("stride"), self.spatial("dilation")
            for i, op in enumerate(self.spatial("output_padding")):
                if op >= max(stride[i], dilation[i]):
                    raise bad("output_padding", "must be smaller than stride or dilation")
        self._check_layout()
        self._check_dynamic()
        self._check_pad_sizes()

    def _check_layout(self) -> None:
        bad = self._bad
        wanted = {2: "channels_last", 3: "channels_last_3d"}.get(self.dim)
        if self.memory_format != "contiguous" and self.memory_format != wanted:
            raise bad("memory_format", f"a {self.dim}-D conv's input takes "
                                       f"{'contiguous only' if wanted is None else repr(wanted)}"
                                       f" (torch's channels-last formats are 4-D and 5-D)")
        if self.module_channels_last:
            if wanted is None:
                raise bad("module_channels_last", "a conv1d's weight has no channels-last format")
            if self.weights != "constant":
                raise bad("module_channels_last", 'weights="input": there are no module '
                                                  'weights to convert')

    def dynamic_axes(self) -> tuple:
        """The input dimensions exported dynamic: those ``dynamic`` names whose size varies
        over input_shape and dynamic_sizes."""
        names = {"none": (), "batch": (0,), "spatial": tuple(range(2, self.dim + 2)),
                 "both": (0, *range(2, self.dim + 2))}[self.dynamic]
        shapes = (self.input_shape, *self.dynamic_sizes)
        return tuple(a for a in names if len({s[a] for s in shapes}) > 1)

    def dynamic_bounds(self) -> dict:
        """{dimension: (min, max)} of each dynamic dimension, over input_shape and the sizes."""
        shapes = (self.input_shape, *self.dynamic_sizes)
        return {a: (min(s[a] for s in shapes), max(s[a] for s in shapes))
                for a in self.dynamic_axes()}

    def at_size(self, shape) -> "ConvCase":
        """The static case this one is at one of its sizes (what eager computes there)."""
        return dataclasses.replace(self, input_shape=tuple(shape), dynamic="none",
                                   dynamic_sizes=())

    def _check_dynamic(self) -> None:
        bad = self._bad
        if self.dynamic == "none":
            if self.dynamic_sizes:
                raise bad("dynamic_sizes", 'a static case (dynamic "none") names no sizes')
            return
        if not self.dynamic_sizes:
            raise bad("dynamic_sizes", f"dynamic {self.dynamic!r} needs the sizes to execute at")
        if self.quant:
            raise bad("dynamic", "a quantized case is captured statically before pt2e "
                                 "quantization (quantize.py), which specializes every size: "
                                 "int8 with dynamic shapes is not supported yet")
        if self.residual_count():
            raise bad("dynamic", 'an epilogue "add" takes a residual of the output\'s shape, '
                                 'which a dynamic size changes: not supported')
        axes = self.dynamic_axes()
        if not axes:
            raise bad("dynamic_sizes", f"no size varies a {self.dynamic} dimension")
        for shape in self.dynamic_sizes:
            for a, (n, m) in enumerate(zip(shape, self.input_shape, strict=True)):
                if n != m and a not in axes:
                    raise bad("dynamic_sizes", f"size {list(shape)} changes dimension {a}, "
                                               f"which dynamic {self.dynamic!r} keeps static")
        for a in axes:
            if self.input_shape[a] < 2:
                raise bad("input_shape", f"dimension {a} is dynamic: the export's example must be "
                                         f">= 2 there (torch.export specializes a size of 0 or 1)")
        for shape in self.dynamic_sizes:
            try:
                static = self.at_size(shape)
            except CaseError as e:
                raise bad("dynamic_sizes", f"at size {list(shape)}: {e}") from None
            out = static.output_shape()
            if min(out[2:]) < 1:
                raise bad("dynamic_sizes", f"size {list(shape)} gives an empty output")
            for a in axes:  # torch.export guards a dynamic size of 1 away (0/1 specialization)
                if a >= 2 and (shape[a] < 2 or out[a] < 2):
                    raise bad("dynamic_sizes", f"size {list(shape)}: a dynamic spatial dimension "
                                               f"needs input and output sizes >= 2 (dimension {a}:"
                                               f" {shape[a]} -> {out[a]}; torch.export guards 1 "
                                               f"away)")

    def _check_pad_sizes(self) -> None:
        bad = self._bad
        if self.padding_mode == "zeros":
            return
        if isinstance(self.padding, tuple) and len(self.padding) == 1 and self.dim > 1:
            raise bad("padding", f"a length-1 list with padding_mode={self.padding_mode!r} pads "
                                 f"one dimension only (PyTorch raises NotImplementedError)")
        # zip stops at the shorter: a list of the wrong rank is eager's to reject (INVALID).
        pads = zip(self.side_pads(), self.input_shape[2:], strict=False)
        for i, ((left, right), size) in enumerate(pads):
            if size < min_input_size(self.padding_mode, max(left, right)):
                rule = "<" if self.padding_mode == "reflect" else "<="
                raise bad("padding", f"{self.padding_mode} needs padding {rule} input size {size} "
                                     f"(dimension {i}: pads {left}, {right})")

    # --- serialisation -------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """Every field (a matrix row has one column per field)."""
        return {f: _thaw(getattr(self, f)) for f in FIELDS}

    def identity_dict(self) -> dict:
        """to_dict without the later fields at their default: what case_id hashes."""
        return {f: v for f, v in self.to_dict().items()
                if f not in LATER_FIELD_DEFAULTS or not _same(v, LATER_FIELD_DEFAULTS[f])}

    @classmethod
    def from_dict(cls, data: Any) -> "ConvCase":
        if not isinstance(data, dict):
            raise CaseError(f"a case must be a JSON object, got {type(data).__name__}")
        unknown = sorted(set(data) - set(FIELDS))
        if unknown:
            raise CaseError(f"unknown field(s) {', '.join(map(repr, unknown))}")
        missing = [f for f in ("dim", "in_channels", "out_channels", "kernel_size", "input_shape")
                   if f not in data]
        if missing:
            raise CaseError(f"missing field(s) {', '.join(map(repr, missing))}")
        return cls(**data)

    def to_json(self) -> str:
        return json.dumps(self.identity_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> "ConvCase":
        return cls.from_dict(json.loads(text))

    # --- identity ------------------------------------------------------------------------------
    @property
    def case_id(self) -> str:
        """Readable prefix + content hash: equal cases get equal ids on any machine."""
        digest = hashlib.sha1(self.to_json().encode()).hexdigest()[:8]
        return f"{self.label}-{digest}"

    @property
    def label(self) -> str:
        def s(v: Any) -> str:
            if isinstance(v, tuple):
                return "x".join(map(str, v)) + ("L" if len(v) == 1 else "")
            return str(v)

        kind = ("convT" if self.transposed else "conv") + f"{self.dim}d"
        q = self.quant and {"int8_per_tensor": "q8t", "int8_per_channel": "q8c"}[self.quant]
        dtype = q or {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}[self.dtype]
        # Later fields appear only off their default, so older labels read as before.
        mode = "" if self.padding_mode == "zeros" else f"_m{self.padding_mode}"
        out_pad = "" if _same(self.output_padding, 0) else f"_op{s(self.output_padding)}"
        return (f"{kind}_i{self.in_channels}o{self.out_channels}_k{s(self.kernel_size)}"
                f"_s{s(self.stride)}_p{s(self.padding)}{mode}_d{s(self.dilation)}{out_pad}"
                f"_g{self.groups}_b{int(self.bias)}_x{s(self.input_shape)}_{dtype}"
                f"{self.context_label}")

    @property
    def context_label(self) -> str:
        """The context fields' part of the label ("" when all are off): ``_pre1x1x0x0`` (a zero
        pad; ``v0.5`` after it for a constant), ``_e`` + the epilogue's ops joined by ``.``
        (bn, ht, clamp, relu, relu6, add; bounds are in the hashed JSON only), ``_win``."""
        out = ""
        if self.prologue is not None:
            pads, value = self.prologue[1], self.prologue[2]
            out += "_pre" + "x".join(map(str, pads)) + (f"v{value:g}" if value else "")
        if self.epilogue:
            short = {"batchnorm": "bn", "hardtanh": "ht"}
            names = [op if isinstance(op, str) else op[0] for op in self.epilogue]
            out += "_e" + ".".join(short.get(n, n) for n in names)
        if self.weights == "input":
            out += "_win"
        return out + self.layout_label

    @property
    def layout_label(self) -> str:
        """The issue-39 fields' part of the label ("" at their defaults): ``_cl`` (channels-last
        input), ``_mcl`` (module converted), ``_dyn`` + B/S/BS + the number of sizes."""
        out = "_cl" if self.memory_format != "contiguous" else ""
        out += "_mcl" if self.module_channels_last else ""
        if self.dynamic != "none":
            out += "_dyn" + {"batch": "B", "spatial": "S", "both": "BS"}[self.dynamic] \
                + str(len(self.dynamic_sizes))
        return out

    # --- the conv in context -------------------------------------------------------------------
    @property
    def has_context(self) -> bool:
        """True when the graph is more than one nn.Conv* with constant weights."""
        return self.prologue is not None or bool(self.epilogue) or self.weights == "input"

    def residual_count(self) -> int:
        """Graph inputs the epilogue adds (one per "add")."""
        return sum(op == "add" for op in self.epilogue)

    def conv_input_shape(self) -> tuple:
        """The conv's input: the case's input after the prologue's pad."""
        shape = list(self.input_shape)
        if self.prologue is not None:
            pads = self.prologue[1]
            for j in range(len(pads) // 2):  # F.pad: (left, right) of the last dimension first
                shape[-1 - j] += pads[2 * j] + pads[2 * j + 1]
        return tuple(shape)

    def reduction_length(self) -> int:
        """Terms summed into one output element: input channels per group x kernel volume (the
        size axis, the error bound's K, the known issues' ``reduction``)."""
        return self.in_channels // self.groups * math.prod(self.spatial("kernel_size"))

    def output_shape(self) -> tuple:
        """The conv's output shape as nn.Conv* computes it (an empty dimension comes out < 1)."""
        shape = self.conv_input_shape()
        k, s, d = self.spatial("kernel_size"), self.spatial("stride"), self.spatial("dilation")
        out = []
        for i, size in enumerate(shape[2:]):
            left, right = self.side_pads()[i]
            extent = d[i] * (k[i] - 1) + 1
            if self.transposed:
                op = self.spatial("output_padding")[i]
                out.append((size - 1) * s[i] - left - right + extent + op)
            else:
                out.append((size + left + right - extent) // s[i] + 1)
        return (shape[0], self.out_channels, *out)

    # --- features the report groups by ---------------------------------------------------------
    @property
    def padding_spelling(self) -> str:
        p = self.padding
        if isinstance(p, str):
            return p
        if isinstance(p, int):
            return "int"
        return "list1" if len(p) == 1 else "tuple"

    @property
    def kernel_parity(self) -> str:
        ks = self.kernel_size if isinstance(self.kernel_size, tuple) else (self.kernel_size,)
        return "even" if any(k % 2 == 0 for k in ks) else "odd"

    def spatial(self, name: str) -> tuple:
        """An int-or-list argument broadcast to the spatial rank, as PyTorch reads it."""
        v = getattr(self, name)
        items = v if isinstance(v, tuple) else (v,)
        return items * self.dim if len(items) == 1 else items

    def side_pads(self) -> list[tuple[int, int]]:
        """(before, after) padding per spatial dimension as the module applies it ("same" puts
        the odd element after, like nn.Conv*'s _reversed_padding_repeated_twice)."""
        if self.padding == "valid":
            return [(0, 0)] * self.dim
        if self.padding == "same":
            total = [d * (k - 1) for d, k in zip(self.spatial("dilation"),
                                                 self.spatial("kernel_size"), strict=False)]
            return [same_pads(t) for t in total]
        return [(p, p) for p in self.spatial("padding")]

    def has_short_int_list(self) -> bool:
        """True when some int-list conv argument will reach the delegate shorter than the rank."""
        if self.dim == 1:
            return False
        # A non-zeros padding_mode pads with F.pad and hands the conv a full-rank zero padding.
        spelled_padding = self.padding_mode == "zeros"
        if self.padding == "valid" and spelled_padding:
            return True
        names = ("stride", "dilation") + (("padding",) if spelled_padding else ()) \
            + (("output_padding",) if self.transposed else ())
        return any(isinstance(getattr(self, n), tuple) and len(getattr(self, n)) == 1
                   for n in names)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)
            and v == v and v not in (float("inf"), float("-inf")))


def same_pads(total: int) -> tuple[int, int]:
    """How padding="same" splits a dimension's total padding dilation * (kernel - 1): the odd
    element after (nn.Conv*'s _reversed_padding_repeated_twice)."""
    return total // 2, total - total // 2


def min_input_size(padding_mode: str, widest_pad: int) -> int:
    """The smallest input size a padding_mode accepts for a side's pad (F.pad's rules): reflect
    needs pad < size, circular pad <= size (wrapping around once at most), the others anything."""
    return {"reflect": widest_pad + 1, "circular": widest_pad}.get(padding_mode, 1)


def _same(value: Any, default: Any) -> bool:
    """Equal and spelled the same: 0 is a default, [0] and [0, 0] are spellings of their own."""
    return type(value) is type(default) and value == default


def load_entries(path: str) -> list[tuple[ConvCase, dict]]:
    """Read a case file: a JSON list (or ``{"cases": [...]}``) of ConvCase objects or of entries
    ``{"case": {...}, ...}`` (the corpus' expectations, from-model's source). -> (case, entry) per
    entry, a bare case wrapped as ``{"case": ...}``; CaseError names the file and entry."""
    try:
        with open(path) as fh:
            data = json.load(fh)
    except OSError as e:
        raise CaseError(f"{path}: cannot read case file ({e.strerror})") from None
    except json.JSONDecodeError as e:
        raise CaseError(f"{path}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    entries = data.get("cases") if isinstance(data, dict) else data
    if not isinstance(entries, list):
        raise CaseError(f"{path}: a case file must be a JSON list of case objects")
    found = []
    for i, raw in enumerate(entries):
        entry = raw if isinstance(raw, dict) and "case" in raw else {"case": raw}
        try:
            found.append((ConvCase.from_dict(entry["case"]), entry))
        except (CaseError, TypeError) as e:
            raise CaseError(f"{path}: case #{i}: {e}") from None
    return found


def load_cases(path: str) -> list[ConvCase]:
    """A case file's cases (see load_entries); CaseError names the file and entry."""
    return [case for case, _ in load_entries(path)]
