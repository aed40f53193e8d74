"""Cell statuses, ordered by how far a cell got through the pipeline (see README)."""

from __future__ import annotations

import enum


class Status(str, enum.Enum):
    INVALID = "INVALID"
    LOWER_ERROR = "LOWER_ERROR"
    NOT_DELEGATED = "NOT_DELEGATED"
    CONTRACT_VIOLATION = "CONTRACT_VIOLATION"
    NO_RUNTIME = "NO_RUNTIME"
    CRASH = "CRASH"
    MISMATCH = "MISMATCH"
    PASS = "PASS"

    def __str__(self) -> str:
        return self.value


ORDER = list(Status)
# A cell that is not one of these is a finding (used by --fail-on-mismatch and the regression diff).
OK = {Status.PASS, Status.NO_RUNTIME}
