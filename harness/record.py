"""One typed record for a cell's outcome, whichever path produced it: a worker that ran the cell
in-process, a bundle run on another machine and ingested, a journal read back by ``--resume``.

A ``CellResult`` flattens to exactly one matrix row (``to_row``) and comes back from one
(``from_row``); field names follow ExecuTorch's ``backends/test/suite`` reports where the two
measure the same thing (status, message, delegated/undelegated ops, timings).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from harness.spec import ConvCase

CASE_FIELDS = tuple(f.name for f in dataclasses.fields(ConvCase))
METRIC_COLUMNS = ("max_abs_error", "max_rel_error", "mae", "sqnr_db", "max_abs_error_vs_float",
                  "error_steps", "eager_error_steps", "tolerance", "out_shape", "ref_shape",
                  "error_pattern", "tolerance_bound", "bound_ratio")


def cell_key(case_id: str, backend: str, fixes: str) -> tuple:
    """What identifies a cell in a run, the one spelling of it: (case id, backend column with
    its @device, fixes column) -- a CellResult's ``key``, a planned cell's, a journal row's."""
    return case_id, backend, fixes


def _executorch_version() -> str:
    from harness import versions

    return versions.stack()["executorch"]


@dataclass
class CellResult:
    case: ConvCase
    backend: str  # the lane: a backend name, or backend@device for an ingested device run
    fixes: str = ""  # sorted fix names, comma-joined ("" = stock)
    status: str | None = None
    phase: str | None = None  # the stage the cell reached: eager, quantize, export, lower, ...
    message: str = ""
    predicted: str | None = None  # the static contract check: CONTRACT_VIOLATION / clean
    isolation: str = ""  # for a failure from a reused worker: how it fared alone
    # Where it failed (stages/culprit.py), for every cell that is not PASS: "lowering:<pass>",
    # "quantizer", "partitioner", "to_executorch", "delegate:vulkan:<impl or shader(s)>",
    # "delegate:xnnpack:<node>", "portable:<operator>", "harness" (our own setup), "eager".
    # Part of the cell's finding ("" in a matrix written before the column: the old key).
    component: str = ""
    # The last lines the runtime printed while this cell's program loaded and executed
    # (ET_LOG checks, KernelCall failures, aborts), for a cell that is not PASS; the whole text
    # is in the run folder's evidence/ file.
    runtime_log: str = ""
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    mae: float | None = None
    sqnr_db: float | None = None
    max_abs_error_vs_float: float | None = None
    error_steps: float | None = None
    eager_error_steps: float | None = None  # fp16/bf16: eager's own error, in the same steps
    tolerance: float | None = None
    # A float cell (stages/compare.py, ErrorBound): max over elements of |out - ref| / bound
    # (3.2 = "3.2x the bound"; PASS iff <= 1) and the bound at that element; None for int8
    # and for a cell that did not compare values.
    bound_ratio: float | None = None
    tolerance_bound: float | None = None
    out_shape: list | None = None
    ref_shape: list | None = None
    # a MISMATCH: where the output is wrong (stages/fingerprint.py), e.g. "right edge 3 cols ·
    # all channels · all batches"; part of the cell's finding ("" for every other status, and
    # in a matrix written before the column existed)
    error_pattern: str = ""
    delegated_ops: dict = field(default_factory=dict)
    undelegated_ops: dict = field(default_factory=dict)
    contract_violations: list = field(default_factory=list)
    # The delegate code paths the executed cell reached (coverage, results/coverage.py): Vulkan,
    # the compute shaders the runtime dispatched (its own dispatch profiling, read from the
    # ETDump); XNNPACK, the conv nodes of the delegate payload as "kind:input/filter
    # dtype:activation". Empty when the cell did not execute.
    reached: list = field(default_factory=list)
    # A dynamic case (stages/sizes.py): every size it executed at, in order, as
    # {size, status, max_abs, message}; the cell's own status and metrics are its worst size's.
    # [] for a static case.
    sizes: list = field(default_factory=list)
    pte_size_kb: float | None = None
    quantize_time_s: float | None = None
    lower_time_s: float | None = None
    run_time_s: float | None = None
    cell_time_s: float | None = None
    cached: bool = False
    # "" : this lane's program was lowered for it. "stock" / "+fix,fix": its fix passes change
    # nothing in this case's graph, so it is that lane's program, byte for byte (prepare.py),
    # not lowered again; and where it executes on the same plug-in as that lane, that lane's
    # verdict, metrics and run time too (runner.py): the report says "same program as stock"
    reused_from: str = ""
    executorch_version: str = field(default_factory=_executorch_version)
    # A run at an ExecuTorch tree (--executorch / --executorch-tree, runtimes/tree.py): what the
    # verdict rests on, e.g. "Python cff6f4dd32e6 (dirty); Vulkan plug-in from cff6f4dd32e6
    # (dirty)"; "" for a run on the installed wheel alone.
    rests_on: str = ""
    # where the case came from (`cases from-model`: model @ module paths); not part of the
    # case, so not of its id: the same conv from two models is one case, one cell
    source: str = ""
    # A MISMATCH's evidence for its picture (fingerprint.evidence: numpy arrays) and, for any
    # cell the runtime said something about, its whole log (``runtime_log``: a numpy string),
    # on its way from the worker to the run folder (RunFolder.write_evidence); never a column.
    evidence: dict | None = field(default=None, repr=False, compare=False,
                                  metadata={"row": False})

    @property
    def case_id(self) -> str:
        return self.case.case_id

    @property
    def delegation(self) -> str:
        """How much of the program went to the delegate: "full" (nothing left outside), "partial"
        (some ops delegated, some not), "none" (nothing delegated), "" (nothing was lowered).
        A fact about delegation, beside the status (what executing the program showed)."""
        return delegation(self.delegated_ops, self.undelegated_ops)

    @property
    def key(self) -> tuple:
        """What identifies the cell in a run (``cell_key``)."""
        return cell_key(self.case_id, self.backend, self.fixes)

    def update(self, **values) -> CellResult:
        """Set fields by name; a name that is no field is a bug, not a new column."""
        for name, value in values.items():
            if name == "case" or name not in _OUTCOME_FIELDS:
                raise AttributeError(f"CellResult has no field {name!r}")
            setattr(self, name, value)
        return self

    def to_row(self) -> dict:
        row = {"case_id": self.case_id, "backend": self.backend, "fixes": self.fixes}
        row.update(self.case.to_dict())
        row.update(padding_spelling=self.case.padding_spelling,
                   kernel_parity=self.case.kernel_parity, batch=self.case.input_shape[0],
                   delegation=self.delegation)
        row.update({name: getattr(self, name) for name in _OUTCOME_FIELDS})
        return row

    @classmethod
    def from_row(cls, row: dict) -> CellResult:
        """A matrix or journal row back to its record (pandas' NaN read back as None)."""
        case = ConvCase.from_dict({k: row[k] for k in CASE_FIELDS if k in row and _present(row[k])})
        known = {k: row[k] for k in _OUTCOME_FIELDS if k in row and _present(row[k])}
        return cls(case=case, **known)


def delegation(delegated_ops: dict, undelegated_ops: dict) -> str:
    """See ``CellResult.delegation``."""
    if not delegated_ops and not undelegated_ops:
        return ""
    if not delegated_ops:
        return "none"
    return "partial" if undelegated_ops else "full"


def _present(value) -> bool:
    return not (value is None or (isinstance(value, float) and math.isnan(value)))


_OUTCOME_FIELDS = tuple(f.name for f in dataclasses.fields(CellResult)
                        if f.name != "case" and f.metadata.get("row", True))
