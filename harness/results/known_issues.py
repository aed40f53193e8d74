"""Known upstream issues: which ExecuTorch issue/PR tracks a finding (cases/upstream/known_issues.json).

An entry matches a cell when its backend family (``"any"``: every lane, for a component they
share, e.g. a portable kernel), status, message regex (``re.search``; null: any), the optional
``error_pattern`` regex (a MISMATCH's fingerprint, stages/fingerprint.py, e.g. ``"right edge"``;
absent or null: any), the optional ``component`` regex (the cell's culprit, stages/culprit.py,
e.g. ``"^portable:aten::convolution"``; absent or null: any) and every ``when`` condition on
``features(case)`` hold: a value, a list (any of; for the set-valued ``list1_args``: any shared
name), ``{"not_in": [...]}``, or a comparison such as ``">1"`` (ints)."""

from __future__ import annotations

import collections
import dataclasses
import functools
import json
import operator
import os
import re
from pathlib import Path
from typing import Any, Optional

from harness.spec import DYNAMIC, MEMORY_FORMATS, ConvCase
from harness.status import Status

KNOWN_ISSUES_FILE = Path(__file__).resolve().parents[2] / "cases" / "upstream" / "known_issues.json"
ENV = "CONVCONF_KNOWN_ISSUES"  # another known-issues file (tests; a fork's own curation)


def default_path() -> Path:
    """The known-issues file findings are matched against: $CONVCONF_KNOWN_ISSUES, else the
    shipped cases/upstream/known_issues.json."""
    return Path(os.environ.get(ENV) or KNOWN_ISSUES_FILE)
BACKENDS = ("vulkan", "xnnpack", "any")
# The statuses a known issue's "statuses" may name.
STATUSES = tuple(s.value for s in (Status.LOWER_ERROR, Status.NOT_DELEGATED,
                                   Status.CONTRACT_VIOLATION, Status.RUNTIME_ERROR, Status.CRASH,
                                   Status.MISMATCH))
UPSTREAM_STATES = {"issue": ("open", "closed"), "pr": ("open", "closed", "merged")}
Upstream = collections.namedtuple("Upstream", "repo number kind state title url")
_CMP = re.compile(r"^(>=|<=|!=|==|>|<)\s*(-?\d+)$")
_OPS = {">=": operator.ge, "<=": operator.le, "!=": operator.ne, "==": operator.eq,
        ">": operator.gt, "<": operator.lt}


def _int(v: Any) -> bool:
    return type(v) is int  # a bool is not an int here


def _str_or_none(v: Any) -> bool:
    return v is None or isinstance(v, str)


def _upstream_ok(u: Any) -> bool:
    return (isinstance(u, dict) and set(u) == set(Upstream._fields) and _int(u["number"])
            and isinstance(u["title"], str) and u["state"] in UPSTREAM_STATES.get(u["kind"], ())
            and u["url"] == f"https://github.com/{u['repo']}/"
                            f"{'pull' if u['kind'] == 'pr' else 'issues'}/{u['number']}")


# Every entry field and its check.
_FIELDS = {"id": lambda v: isinstance(v, str) and re.fullmatch(r"[a-z0-9][a-z0-9.-]*", v),
           "backend": lambda v: v in BACKENDS, "title": lambda v: isinstance(v, str) and v,
           "statuses": lambda v: isinstance(v, list) and v and all(s in STATUSES for s in v),
           "message": _str_or_none, "when": lambda v: isinstance(v, dict),
           "upstream": lambda v: v is None or isinstance(v, list) and v and all(map(_upstream_ok, v)),
           "fixed_in": _str_or_none, "note": lambda v: isinstance(v, str),
           "evidence": lambda v: isinstance(v, list)
           and all(isinstance(u, str) and u.startswith("https://") for u in v)}


def features(c: ConvCase) -> dict[str, Any]:
    """What a ``when`` may name. ``depthwise`` is the Vulkan runtime's (in == out == groups, not
    transposed); ``kernel`` is k for a k x k kernel, else the tuple; ``max_padding`` per side;
    ``memory_format`` ("contiguous", "channels_last", "channels_last_3d": the input's),
    ``module_channels_last`` (bool: the module's weights converted) and ``dynamic`` ("none",
    "batch", "spatial", "both") are the case's own (issue 39); ``reduction`` is the number of
    products summed per output, input channels per group x kernel volume (issue 46's size axis)."""
    kernel, stride, dilation, out_pad = map(c.spatial, ("kernel_size", "stride", "dilation",
                                                        "output_padding"))
    per_group = (c.in_channels // c.groups, c.out_channels // c.groups)
    return {**{n: getattr(c, n) for n in ("dim", "transposed", "in_channels", "out_channels",
                                          "groups", "bias", "dtype", "quant", "padding_mode",
                                          "memory_format", "module_channels_last", "dynamic")},
            "padding_spelling": c.padding_spelling, "kernel_parity": c.kernel_parity,
            "batch": c.input_shape[0], "short_int_list": c.has_short_int_list(),
            "depthwise": not c.transposed and c.in_channels == c.groups == c.out_channels,
            "channels_per_group_mod4": max(n % 4 for n in per_group),
            "kernel": kernel[0] if len(set(kernel)) == 1 else tuple(kernel),
            "max_stride": max(stride), "max_dilation": max(dilation),
            "max_padding": max(max(p) for p in c.side_pads()), "max_output_padding": max(out_pad),
            "stride_equals_dilation": tuple(stride) == tuple(dilation),
            "output_padding_ge_stride": c.transposed and any(map(operator.ge, out_pad, stride)),
            "list1_args": [n for n in ("stride", "padding", "dilation", "output_padding") if c.dim > 1
                           and isinstance(getattr(c, n), tuple) and len(getattr(c, n)) == 1],
            "reduction": c.reduction_length()}


# The vocabulary with each feature's value type ("quant" may be null; "list1_args" holds names).
_REF = features(ConvCase(dim=2, in_channels=4, out_channels=4, kernel_size=3, input_shape=(1, 4, 8, 8)))
# Features whose values are a closed set (a misspelt value would silently match nothing).
_VALUES = {"memory_format": MEMORY_FORMATS, "dynamic": DYNAMIC}


@dataclasses.dataclass(frozen=True)
class KnownIssue:
    id: str
    backend: str
    title: str
    statuses: tuple
    message: Optional[str]
    when: tuple  # ((feature, op, arg), ...); op "in" / "not_in" with a tuple, or ">", ">=", ...
    upstream: tuple  # of Upstream; empty: nothing upstream tracks it (file it)
    fixed_in: Optional[str]
    evidence: tuple
    note: str
    error_pattern: Optional[str] = None  # regex on a MISMATCH's fingerprint text; None: any
    component: Optional[str] = None  # regex on the cell's culprit (stages/culprit.py); None: any
    # where the bug is in ExecuTorch's source (issue 47): {"path", "line", "anchor", "commit",
    # "why"}: the line at that commit, and the anchor text to find it again at another commit
    source: Optional[dict] = dataclasses.field(default=None, hash=False)
    # the tracker searches behind "not reported upstream": [{"date", "query", "result"}]
    # (result: "none", or the URL of the thread that reports it)
    searched: tuple = dataclasses.field(default=(), hash=False)

    @property
    def label(self) -> str:
        if not self.upstream:
            return "known, not reported upstream"
        refs = ", ".join(f"{'' if u.repo == 'pytorch/executorch' else u.repo}#{u.number} ({u.state})"
                         for u in self.upstream)
        return f"known: {refs}" + (f", fixed in {self.fixed_in}" if self.fixed_in else "")

    def matches(self, family: str, feats: dict, status: str, message: str,
                error_pattern: str = "", component: str = "") -> bool:
        return (self.backend in (family, "any") and status in self.statuses
                and (self.component is None
                     or re.search(self.component, component or "") is not None)
                and (self.message is None or re.search(self.message, message or "") is not None)
                and (self.error_pattern is None
                     or re.search(self.error_pattern, error_pattern or "") is not None)
                and all(_holds(op, arg, feats[name]) for name, op, arg in self.when))


def _holds(op: str, arg: Any, value: Any) -> bool:
    if op in _OPS:
        return _int(value) and _OPS[op](value, arg)
    return (bool(set(value) & set(arg)) if isinstance(value, list) else value in arg) == (op == "in")


def _condition(name: str, raw: Any, bad) -> tuple:
    if name not in _REF:
        raise bad(f"when.{name}", f"unknown feature (known: {', '.join(sorted(_REF))})")
    cmp = _CMP.match(raw) if isinstance(raw, str) else None
    if cmp and not _int(_REF[name]):
        raise bad(f"when.{name}", f"a comparison {raw!r} needs an int feature")
    if cmp:
        return name, cmp.group(1), int(cmp.group(2))
    if isinstance(raw, dict) and (set(raw) != {"not_in"} or not isinstance(raw["not_in"], list)):
        raise bad(f"when.{name}", 'a mapping must be {"not_in": [...]}')
    op, atoms = (("not_in", raw["not_in"]) if isinstance(raw, dict) else
                 ("in", raw if isinstance(raw, list) else [raw]))
    ok = {"quant": _str_or_none, "list1_args": lambda a: isinstance(a, str),
          **{n: values.__contains__ for n, values in _VALUES.items()}}.get(
        name, lambda a: type(a) is type(_REF[name]))
    for a in [a for a in atoms if not ok(a)][:1]:
        raise bad(f"when.{name}", f"{a!r} is not a valid value for this feature")
    return name, op, tuple(atoms)


# Fields an entry may leave out, and what that means.
_OPTIONAL = {"error_pattern": None, "component": None, "source": None, "searched": []}


def _source_ok(v: Any) -> bool:
    return v is None or (isinstance(v, dict) and {"path", "line", "anchor", "commit"} <= set(v)
                         <= {"path", "line", "anchor", "commit", "why"} and _int(v["line"])
                         and all(isinstance(v[k], str) and v[k] for k in ("path", "anchor"))
                         and re.fullmatch(r"[0-9a-f]{40}", str(v["commit"])) is not None
                         and isinstance(v.get("why", ""), str))


def _searched_ok(v: Any) -> bool:
    return isinstance(v, list) and all(
        isinstance(s, dict) and set(s) == {"date", "query", "result"}
        and all(isinstance(s[k], str) and s[k] for k in s)
        and (s["result"] == "none" or s["result"].startswith("https://")) for s in v)


_CHECKS = {**_FIELDS, "error_pattern": _str_or_none, "component": _str_or_none,
           "source": _source_ok, "searched": _searched_ok}


def _entry(raw: Any, bad) -> KnownIssue:
    if not isinstance(raw, dict):
        raise bad("*", "an entry must be a JSON object")
    for k in [k for k in raw if k not in _CHECKS] + [k for k in _FIELDS if k not in raw]:
        raise bad(k, "unknown field" if k in raw else "missing")
    raw = {**_OPTIONAL, **raw}
    for k in [k for k, ok in _CHECKS.items() if not ok(raw[k])][:1]:
        raise bad(k, f"bad value {raw[k]!r} (the checks: _FIELDS in harness/results/known_issues.py)")
    for k in ("message", "error_pattern", "component"):
        try:
            re.compile(raw[k] or "")
        except re.error as e:
            raise bad(k, f"not a valid regex ({e})") from None
    return KnownIssue(**{**raw, "statuses": tuple(raw["statuses"]), "evidence": tuple(raw["evidence"]),
                         "searched": tuple(raw["searched"]),
                         "when": tuple(_condition(n, v, bad) for n, v in sorted(raw["when"].items())),
                         "upstream": tuple(Upstream(**u) for u in raw["upstream"] or ())})


@functools.lru_cache(maxsize=8)
def load(path: str | Path = KNOWN_ISSUES_FILE) -> tuple[KnownIssue, ...]:
    """Read and validate a known-issues file; ValueError is one line naming file, entry, field."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: cannot read a known-issues file ({e})".replace("\n", " ")) from None
    if not isinstance(data, list):
        raise ValueError(f"{path}: a known-issues file must be a JSON list of entries")
    issues: list[KnownIssue] = []
    for i, raw in enumerate(data):
        def bad(field: str, why: str, i: int = i) -> ValueError:
            return ValueError(f"{path}: entry #{i}: field {field!r}: {why}".replace("\n", " "))
        issues.append(_entry(raw, bad))
        if issues[-1].id in {k.id for k in issues[:-1]}:
            raise bad("id", f"duplicate id {issues[-1].id!r}")
    return tuple(issues)


def match(backend: str, case: ConvCase, status: str, message: str,
          issues: Optional[tuple] = None, error_pattern: str = "",
          component: str = "") -> list[KnownIssue]:
    """The known issues (default: the shipped file's) a cell of a lane shows ("vulkan@h200",
    "vulkan+vulkan-conv-padding": the backend family decides); ``error_pattern``: the cell's
    fingerprint (a MISMATCH's; "" when it has none); ``component``: its culprit ("" when
    unknown: then the one its message names, stages/culprit.py)."""
    from harness.stages import culprit

    family = backend.split("@")[0].split("+")[0].strip().lower()
    feats = features(case)
    pattern = error_pattern if isinstance(error_pattern, str) else ""
    component = (component if isinstance(component, str) else "") or \
        culprit.key_component(status, message)
    return [k for k in (load(default_path()) if issues is None else issues)
            if k.matches(family, feats, status, message, pattern, component)]
