"""Append-only journal of finished cells: one JSON row per line, flushed and fsynced per cell,
so a run killed at any point loses at most the cell in flight."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class JournalRead:
    rows: list[dict] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # reported to the user, never silent
    good_bytes: int = 0  # length of the prefix made of complete, parseable lines


def read(path: str | os.PathLike) -> JournalRead:
    result = JournalRead()
    path = Path(path)
    if not path.exists():
        return result
    data = path.read_bytes()
    offset = 0
    for number, raw in enumerate(data.splitlines(keepends=True), start=1):
        complete = raw.endswith(b"\n")
        try:
            row = json.loads(raw)
            if not isinstance(row, dict) or not {"case_id", "backend", "fixes", "status"} <= set(row):
                raise ValueError("not a cell row")
        except ValueError as e:
            what = "truncated" if not complete else f"unreadable ({e})"
            result.problems.append(f"{path.name} line {number} is {what} "
                                   f"({len(raw)} bytes); that cell will be run again")
            if not complete:
                break
            offset += len(raw)
            continue
        if not complete:  # parseable but cut before its newline: keep it, mend the line end
            raw += b"\n"
        result.rows.append(row)
        offset += len(raw)
        result.good_bytes = offset
    return result


class Journal:
    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def mend(self, read_result: JournalRead) -> None:
        """Rewrite the journal as its good rows only, so appends start on a clean line."""
        tmp = self.path.with_suffix(".jsonl.tmp")
        with open(tmp, "w") as fh:
            for row in read_result.rows:
                fh.write(json.dumps(row) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)

    def append(self, row: dict) -> None:
        with open(self.path, "a") as fh:
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
