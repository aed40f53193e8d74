"""What decides a finding, by experiment: its representative's one-step variants, each executed
as a real cell in the finding's lane (harness/run/diagnose.py writes ``diagnosis.json``; this
module reads it and words it).

A variant *leaves* the finding when its cell does not land in the same finding id (it passes,
or fails another way), and *keeps* it otherwise. The deciding parameters are the fields whose
variants left it; a field whose variants only moved the cell to another failure is named with
"(changes the failure)". Nothing is claimed from a variant that was not run: when the budget
ran out the record says after how many of how many, and when the representative itself no
longer lands in the finding (the control) no parameter is named at all.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

FILE = "diagnosis.json"
CHANGES_THE_FAILURE = " (changes the failure)"


@dataclass
class Variant:
    """One executed one-step variant of a finding's representative."""
    field: str  # what it changed, as the deciding parameter is named
    change: str  # 'padding spelled [1] -> 1'
    case_id: str
    status: str  # its cell's status
    finding: str = ""  # the finding id its cell landed in ("" for PASS / NO_RUNTIME)
    keeps: bool = False  # landed in the diagnosed finding

    @property
    def outcome(self) -> str:
        """'PASS', 'still fails', or 'RUNTIME_ERROR (F-1234abcd)' for another failure."""
        if self.keeps:
            return "still fails"
        return self.status + (f" ({self.finding})" if self.finding else "")

    def line(self) -> str:
        return f"{self.change}: {self.outcome}"


@dataclass
class Diagnosis:
    finding: str
    lane: str
    representative: str  # its case id
    source: str  # "shrunk" (the minimal case --shrink found) or "example" (a cell of the finding)
    control: str = ""  # the representative's own status, re-run first ("" when not run)
    control_keeps: bool = False  # ... and whether it still landed in the finding
    variants: list[Variant] = field(default_factory=list)
    planned: int = 0  # legal one-step variants there were to run
    seconds: float = 0.0
    budget_s: float = 0.0
    note: str = ""  # why fewer than planned ran, or why nothing is claimed

    @property
    def deciding(self) -> list[str]:
        return deciding(self)

    @property
    def summary(self) -> str:
        """'12 of 12 variants in 41.0 s' or 'budget ran out after 3 of 12 variants (10 s)'."""
        if self.note:
            return self.note
        return f"{len(self.variants)} of {self.planned} variants in {self.seconds} s"

    def to_dict(self) -> dict:
        return {**asdict(self), "deciding": self.deciding}

    @classmethod
    def from_dict(cls, data: dict) -> Diagnosis:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known["variants"] = [Variant(**{k: v for k, v in x.items()
                                        if k in Variant.__dataclass_fields__})
                             for x in data.get("variants", [])]
        return cls(**known)


def deciding(d: Diagnosis) -> list[str]:
    """The fields whose variants left the finding, in the order they were run; only from
    variants that ran, and none when the control did not reproduce the finding."""
    if not d.control_keeps:
        return []
    out: dict[str, bool] = {}  # field -> some variant of it cleared the failure
    for v in d.variants:
        if not v.keeps:
            out[v.field] = out.get(v.field, False) or not v.finding
    return [f if cleared else f + CHANGES_THE_FAILURE for f, cleared in out.items()]


def variants_line(variants: list[Variant]) -> str:
    """'padding spelled [1] -> 1: PASS; -> (1, 1): PASS; kernel 3 -> 2: still fails' (a
    change that repeats the previous one's subject is written from its arrow)."""
    parts, previous = [], ""
    for v in variants:
        subject, _, rest = v.change.partition(" -> ")
        text = f"-> {rest}: {v.outcome}" if subject == previous and rest else v.line()
        parts.append(text)
        previous = subject
    return "; ".join(parts)


def load(run_dir: Path | None) -> dict[str, Diagnosis]:
    """A run's diagnoses (diagnosis.json), by finding id; {} when it has none."""
    path = Path(run_dir) / FILE if run_dir else None
    if path is None or not path.exists():
        return {}
    return {k: Diagnosis.from_dict(v) for k, v in json.loads(path.read_text()).items()}


def write(run_dir: Path, diagnoses: dict[str, Diagnosis]) -> Path:
    """diagnosis.json; a finding diagnosed before and not now keeps its entry."""
    from harness.runfolder import atomic_write

    merged = {**load(run_dir), **diagnoses}
    path = Path(run_dir) / FILE
    atomic_write(path, json.dumps({k: v.to_dict() for k, v in merged.items()}, indent=1))
    return path
