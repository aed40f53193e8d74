"""A lane: the (backend, fix set, device) a cell runs on. One record, one spelling each way.

- ``name``: ``vulkan``, ``vulkan+vulkan-conv-padding``, ``vulkan@h200+a,b`` — the full key (every
  fix spelled out) in case files' expectations and findings.json; ``Lane.parse`` reads it back.
- ``short(all_fixes)``: what people read and type back (tables, the report, the console, JUnit,
  case files): ``vulkan``, ``vulkan+fixes`` (every fix that applies to the backend, as ``--fixes
  all`` makes), ``vulkan+vk-dw-edge-pad`` (one fix, as ``--fixes each`` makes); any other set
  keeps the comma form. Which fixes are "all" is the fix registry's to say, a floor above this
  one: the caller passes them (``fixes.all_for``; results/lanes.py's ``parse`` and ``short`` do).
- ``label``: ``vulkan (stock)``, ``vulkan +vulkan-conv-padding`` — the older long label.
- ``backend_column`` / ``fixes_column``: the matrix's ``backend`` (with ``@device``) and
  ``fixes`` (comma-joined, "" for stock) columns; ``Lane.of(backend_column, fixes_column)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

ALL = "fixes"  # the short name's fix part for "every fix of the backend"

# backend -> every fix that applies to it; a mapping or a function, passed by a floor that knows
# the fix registry (stages/fixes all_for): ``+fixes`` cannot be read without one.
AllFixes = Mapping[str, Iterable[str]] | Callable[[str], Iterable[str]]


def _every_fix(all_fixes: AllFixes | None, backend: str) -> tuple[str, ...] | None:
    if all_fixes is None:
        return None
    got = all_fixes(backend) if callable(all_fixes) else all_fixes.get(backend, ())
    return tuple(sorted(set(got or ())))


@dataclass(frozen=True)
class Lane:
    backend: str
    fixes: tuple[str, ...] = ()
    device: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "fixes", tuple(sorted(set(self.fixes))))

    @classmethod
    def of(cls, backend_column: str, fixes_column: str | tuple | list | None = "") -> Lane:
        backend, _, device = str(backend_column).partition("@")
        if isinstance(fixes_column, str) or fixes_column is None:
            fixes = [f for f in (fixes_column or "").split(",") if f]
        else:
            fixes = list(fixes_column)
        return cls(backend, tuple(fixes), device or None)

    @classmethod
    def parse(cls, name: str, all_fixes: AllFixes | None = None) -> Lane:
        """A lane's name, short (``vulkan+fixes``) or full (``vulkan+a,b``), -> the lane.
        ``+fixes`` needs to know every fix of the backend: ``all_fixes``; ValueError (one line)
        without it."""
        head, _, fixes = name.strip().partition("+")
        if fixes.strip() == ALL:
            backend = head.partition("@")[0]
            every = _every_fix(all_fixes, backend)
            if every is None:
                raise ValueError(f"lane {name!r}: which fixes '+{ALL}' means is not known here "
                                 "(pass all_fixes: harness.stages.fixes.all_for)")
            if not every:
                raise ValueError(f"lane {name!r}: no fix applies to {backend}")
            return cls.of(head, every)
        return cls.of(head, fixes)

    def short(self, all_fixes: AllFixes | None = None) -> str:
        """The name people read and type back: ``BACKEND+fixes`` when the lane has every fix that
        applies to its backend (``all_fixes``: backend -> those fixes), else ``name`` (stock, one
        fix, or any other set in the comma form). ``Lane.parse`` reads either back."""
        every = _every_fix(all_fixes, self.backend)
        if self.fixes and every and self.fixes == every:
            return f"{self.backend_column}+{ALL}"
        return self.name

    @property
    def backend_column(self) -> str:
        return self.backend + (f"@{self.device}" if self.device else "")

    @property
    def fixes_column(self) -> str:
        return ",".join(self.fixes)

    @property
    def name(self) -> str:
        return self.backend_column + (f"+{self.fixes_column}" if self.fixes else "")

    @property
    def label(self) -> str:
        return self.backend_column + (f" +{self.fixes_column}" if self.fixes else " (stock)")

    @property
    def stock(self) -> Lane:
        return Lane(self.backend, (), self.device)

    def on(self, device: str | None) -> Lane:
        return Lane(self.backend, self.fixes, device)

    def __str__(self) -> str:
        return self.name

    def __lt__(self, other: Lane) -> bool:  # backend, then device (local first), stock first
        return ((self.backend, self.device or "", self.fixes)
                < (other.backend, other.device or "", other.fixes))
