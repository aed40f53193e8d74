"""A lane: the (backend, fix set, device) a cell runs on. One record, one spelling each way.

- ``name``: ``vulkan``, ``vulkan+vulkan-conv-padding``, ``vulkan@h200+a,b`` — the key in case
  files' expectations, JUnit's classname and the command lines; ``Lane.parse`` reads it back.
- ``label``: ``vulkan (stock)``, ``vulkan +vulkan-conv-padding`` — what tables and the report show.
- ``backend_column`` / ``fixes_column``: the matrix's ``backend`` (with ``@device``) and
  ``fixes`` (comma-joined, "" for stock) columns; ``Lane.of(backend_column, fixes_column)``.
"""

from __future__ import annotations

from dataclasses import dataclass


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
    def parse(cls, name: str) -> Lane:
        head, _, fixes = name.partition("+")
        return cls.of(head, fixes)

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
