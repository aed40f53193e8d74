"""ConvCase: one convolution configuration, with padding kept as the user spelled it.

The padding *spelling* is the point of half of this harness: ``padding="valid"``, ``padding=0``,
``padding=(0,)`` and ``padding=(0, 0)`` are the same convolution to PyTorch but reach a delegate as
different argument lists. So a case never normalises its arguments; sequences are stored as tuples
(hashable, frozen) and written to JSON as lists (JSON has no tuple; list and tuple spell the same
thing to ``nn.Conv*``, both go through ``_pair``/``_single``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any, Optional, Union

IntOrSeq = Union[int, tuple]
Padding = Union[int, tuple, str]

QUANT_SCHEMES = (None, "int8_per_tensor", "int8_per_channel")
DTYPES = ("float32",)
FIELDS = (
    "dim", "transposed", "in_channels", "out_channels", "kernel_size", "stride", "padding",
    "dilation", "groups", "bias", "input_shape", "dtype", "quant",
)


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
    bias: bool = True
    transposed: bool = False
    dtype: str = "float32"
    quant: Optional[str] = None

    def __post_init__(self) -> None:
        for name in ("kernel_size", "stride", "padding", "dilation", "input_shape"):
            object.__setattr__(self, name, _freeze(getattr(self, name)))
        self._check_types()

    def _check_types(self) -> None:
        def bad(field: str, why: str) -> CaseError:
            return CaseError(f"field {field!r}: {why} (got {getattr(self, field)!r})")

        if self.dim not in (1, 2):
            raise bad("dim", "must be 1 or 2")
        for name in ("in_channels", "out_channels", "groups"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise bad(name, "must be a positive int")
        for name in ("kernel_size", "stride", "dilation"):
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

    # --- serialisation -------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {f: _thaw(getattr(self, f)) for f in FIELDS}

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
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

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
        q = {None: "f32", "int8_per_tensor": "q8t", "int8_per_channel": "q8c"}[self.quant]
        return (f"{kind}_i{self.in_channels}o{self.out_channels}_k{s(self.kernel_size)}"
                f"_s{s(self.stride)}_p{s(self.padding)}_d{s(self.dilation)}_g{self.groups}"
                f"_b{int(self.bias)}_x{s(self.input_shape)}_{q}")

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

    def has_short_int_list(self) -> bool:
        """True when some int-list conv argument will reach the delegate shorter than the rank."""
        if self.dim == 1:
            return False
        if self.padding == "valid":
            return True
        return any(isinstance(getattr(self, n), tuple) and len(getattr(self, n)) == 1
                   for n in ("stride", "padding", "dilation"))


def load_cases(path: str) -> list[ConvCase]:
    """Read a case file (a JSON list of ConvCase objects); CaseError names the file and entry."""
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
    cases = []
    for i, entry in enumerate(entries):
        try:
            if isinstance(entry, dict) and "case" in entry:
                entry = entry["case"]
            cases.append(ConvCase.from_dict(entry))
        except (CaseError, TypeError) as e:
            raise CaseError(f"{path}: case #{i}: {e}") from None
    return cases
