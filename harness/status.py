"""Cell statuses, ordered by how far a cell got through the pipeline (see README); NOT_DELEGATED,
a program that executed right with the conv outside the delegate, sits just before PASS."""

from __future__ import annotations

import enum
import errno


class Status(str, enum.Enum):
    INVALID = "INVALID"
    LOWER_ERROR = "LOWER_ERROR"
    CONTRACT_VIOLATION = "CONTRACT_VIOLATION"
    NO_RUNTIME = "NO_RUNTIME"
    RUNTIME_ERROR = "RUNTIME_ERROR"  # load/execute returned an error or raised; the process lived
    CRASH = "CRASH"                  # the process died: signal, abort, timeout
    MISMATCH = "MISMATCH"
    # The program lowered with the conv (or part of it) outside the delegate, and executed within
    # tolerance (a failure executing it is that failure's status): one step short of PASS.
    NOT_DELEGATED = "NOT_DELEGATED"
    PASS = "PASS"

    def __str__(self) -> str:
        return self.value

    @property
    def is_finding(self) -> bool:
        """Not PASS/NO_RUNTIME: something was tried and went wrong (a finding's cell)."""
        return self not in OK

    @property
    def executed(self) -> bool:
        """What really happened on a runtime (the program ran, or died trying)."""
        return self in EXECUTED

    @property
    def static_final(self) -> bool:
        """Reached before execution, and no execution can change it."""
        return self in STATIC_FINAL

    @property
    def failed_at_runtime(self) -> bool:
        return self in (Status.RUNTIME_ERROR, Status.CRASH)


ORDER = list(Status)
NAMES = [s.value for s in ORDER]
# A cell that is not one of these is a finding (used by --fail-on-mismatch and the regression diff).
OK = {Status.PASS, Status.NO_RUNTIME}
# Verdicts reached before execution that execution cannot change (CONTRACT_VIOLATION is only a
# prediction: with a runtime present the cell executes and the runtime has the last word; a
# NOT_DELEGATED program executes too: the rest of it may run delegate code).
STATIC_FINAL = {Status.INVALID, Status.LOWER_ERROR}
# What really happened on a runtime.
EXECUTED = {Status.RUNTIME_ERROR, Status.CRASH, Status.MISMATCH, Status.PASS}


DISK_FULL = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)


def machine_full(e: BaseException | None) -> OSError | None:
    """The disk-full error behind ``e`` (itself, its cause or context), else None: the
    machine's failure, not the cell's -- no status is a verdict on it, the run stops in one line
    (cli/run.py) and ``--resume`` continues once there is room."""
    seen = 0
    while e is not None and seen < 8:
        if isinstance(e, OSError) and e.errno in DISK_FULL:
            return e
        e, seen = e.__cause__ or e.__context__, seen + 1
    return None
