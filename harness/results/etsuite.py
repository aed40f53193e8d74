"""ExecuTorch's own conv operator suite beside ours: one row per (suite configuration, flow).

Consumes typed records only: the suite's configurations (``SuiteConfig``: one ``_test_op`` call
of a suite test function, as a ConvCase), the suite's verdicts (``SuiteVerdict``, one per
subtest and flow) and our CellResults of the same cases; ``harness.run.etsuite`` produces all
three. Per row: the suite's verdict, ours stock and with every fix, whether the suite and stock
ours agree (pass vs fail), and for a disagreement the reason class that explains it; a
disagreement no known reason explains is a finding about one of the two.

Known reasons (read from the suite in the 1.5.1 wheel, ``backends/test/suite``):
- ``runner.py`` skips every conv whose input has rank > 4 after lowering
  (``_graph_has_unsupported_patterns``): "suite skipped 3D";
- it does not execute a program where nothing was delegated and calls it SUCCESS_UNDELEGATED:
  "suite passes an undelegated program";
- a failing subtest raises out of the test function, so the function's later subtests never
  run: "suite stopped the test at an earlier failure";
- ``flows/vulkan.py``'s int8 flow quantizes with VulkanQuantizer, which annotates only linear on
  1.5.1, so its conv "int8" program is float (ours is quantized with XNNPACKQuantizer, as
  ExecuTorch's own Vulkan delegate tests do): "suite's int8 flow did not quantize";
- it judges with ``atol=1e-1, rtol=4e-2`` (``run_method_and_compare_outputs``); ours is 1e-4
  (fp32) or one output step (int8): "within the suite's tolerance, outside ours";
- it executes a partly delegated program (the conv, or ops of its padding mode, left on CPU)
  and calls it SUCCESS when right; ours says NOT_DELEGATED: "suite passes a partly delegated
  program (ours: NOT_DELEGATED)".
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path

from harness.status import Status

SUITE_PASS = {"SUCCESS", "SUCCESS_UNDELEGATED"}
SUITE_NO_VERDICT = {"SKIPPED", "NOT_RUN"}
SUITE_ATOL, SUITE_RTOL = 1e-1, 4e-2  # runner.py run_test -> run_method_and_compare_outputs

R_3D = "suite skipped 3D"
R_SKIPPED = "suite skipped the subtest"
R_NOT_RUN = "suite stopped the test at an earlier failure"
R_UNDELEGATED = "suite passes an undelegated program"
R_NOT_QUANTIZED = "suite's int8 flow did not quantize"
R_TOLERANCE = "within the suite's tolerance, outside ours"
R_PARTLY = "suite passes a partly delegated program (ours: NOT_DELEGATED)"
R_NOT_EXECUTED = "ours did not execute (no runtime)"
R_NO_CASE = "ours cannot spell the configuration"
UNEXPLAINED = "unexplained"
INT8_NOTE = ("the suite's program is float (its int8 flow did not quantize), ours int8: the "
             "verdicts agree on two different programs")


@dataclasses.dataclass(frozen=True)
class SuiteConfig:
    """One ``_test_op`` call of one suite test function: the conv it builds and its input."""
    file: str  # test_conv2d
    test: str  # test_conv2d_basic (the suite's test_base_name)
    subtest: int  # index of the _test_op call within the test function
    case: object | None  # ConvCase (unquantized), or None when it cannot be spelled
    error: str = ""

    @property
    def key(self) -> tuple:
        return self.file, self.test, self.subtest

    def case_for(self, quant: str | None):
        """The ConvCase of this configuration under a flow's quantization."""
        if self.case is None or not quant:
            return self.case
        return dataclasses.replace(self.case, quant=quant)


@dataclasses.dataclass
class SuiteVerdict:
    """What the suite said about one subtest under one flow."""
    file: str
    test: str  # base name, e.g. test_conv2d_basic
    subtest: int
    flow: str
    result: str  # the suite's TestResult name (SUCCESS, SUCCESS_UNDELEGATED, OUTPUT_MISMATCH_FAIL,
    #              PTE_RUN_FAIL, LOWER_FAIL, QUANTIZE_FAIL, SKIPPED, ...), PROCESS_CRASH, or
    #              NOT_RUN (an earlier subtest of the same test function failed or crashed)
    detail: str = ""
    error: str = ""
    delegated_ops: dict = dataclasses.field(default_factory=dict)
    undelegated_ops: dict = dataclasses.field(default_factory=dict)
    error_max: float | None = None
    seconds: float | None = None

    @property
    def key(self) -> tuple:
        return self.file, self.test, self.subtest

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> SuiteVerdict:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    @property
    def quantized(self) -> bool:
        return any("quantize" in op for op in {**self.delegated_ops, **self.undelegated_ops})


@dataclasses.dataclass
class Row:
    file: str
    test: str
    subtest: int
    flow: str
    case_id: str
    suite: str  # the suite's verdict (SuiteVerdict.result)
    ours_stock: str  # our status, stock lane of the flow's backend
    ours_fixed: str  # our status with every fix of that backend ("" when that lane did not run)
    fixes: str
    agree: bool
    reason: str  # "" when they agree
    note: str = ""  # e.g. an agreement on two different programs (the suite's int8 is float)
    suite_error: str = ""
    suite_error_max: float | None = None
    ours_message: str = ""
    ours_max_abs_error: float | None = None
    ours_fixed_message: str = ""

    @property
    def explained(self) -> bool:
        return self.agree or self.reason != UNEXPLAINED


def _ours_pass(cell) -> bool:
    return cell is not None and cell.status == Status.PASS


def _ours_fail(cell) -> bool:
    return cell is not None and cell.status in {Status.LOWER_ERROR, Status.CONTRACT_VIOLATION,
                                                Status.RUNTIME_ERROR, Status.CRASH,
                                                Status.MISMATCH}


def within_suite_tolerance(cell) -> bool:
    """Our MISMATCH is inside ``|d| <= atol + rtol * |ref|`` elementwise: every element within
    atol, or every element within rtol of its reference (either bound implies the suite's)."""
    if cell is None or cell.status != Status.MISMATCH:
        return False
    if cell.max_abs_error is not None and cell.max_abs_error <= SUITE_ATOL:
        return True
    return cell.max_rel_error is not None and cell.max_rel_error <= SUITE_RTOL


def _lowered(verdict: SuiteVerdict) -> bool:
    return bool(verdict.delegated_ops or verdict.undelegated_ops)


def reason(config: SuiteConfig, verdict: SuiteVerdict, cell, int8_flow: bool,
           stopped_by: SuiteVerdict | None = None) -> str:
    """Why the suite's verdict and ours (stock) differ; UNEXPLAINED when no known reason does.
    ``stopped_by``: for a NOT_RUN subtest, the earlier subtest of its test function that ended
    the function."""
    dim = getattr(config.case, "dim", None)
    if verdict.result == "SKIPPED":
        return R_3D if dim == 3 and _lowered(verdict) else R_SKIPPED
    if verdict.result == "NOT_RUN":
        if stopped_by is not None and stopped_by.result == "SKIPPED" and dim == 3:
            return R_3D  # the function's first 3D subtest was skipped, which ends the function
        return R_NOT_RUN
    if config.case is None:
        return R_NO_CASE
    suite_pass = verdict.result in SUITE_PASS
    status = getattr(cell, "status", None)
    if int8_flow and _lowered(verdict) and not verdict.quantized:
        return R_NOT_QUANTIZED  # two different programs: the suite's is float
    if suite_pass:
        if verdict.result == "SUCCESS_UNDELEGATED":
            return R_UNDELEGATED
        if status == Status.NOT_DELEGATED:
            return R_PARTLY
        if status in (Status.NO_RUNTIME, Status.CONTRACT_VIOLATION) and not cell.run_time_s:
            return R_NOT_EXECUTED
        if within_suite_tolerance(cell):
            return R_TOLERANCE
    return UNEXPLAINED


def side_by_side(configs: list[SuiteConfig], verdicts: list[SuiteVerdict], cells: list,
                 flows: dict) -> list[Row]:
    """``flows``: flow name -> (backend, quant scheme). One Row per configuration and flow that
    has a suite verdict."""
    by_cell = {}
    for c in cells:
        lane = "stock" if not c.fixes else "fixed"
        by_cell[(c.case_id, c.backend, lane)] = c
    by_verdict = {(v.key, v.flow): v for v in verdicts}
    rows = []
    for config in configs:
        for flow, (backend, quant) in flows.items():
            verdict = by_verdict.get((config.key, flow))
            if verdict is None:
                continue
            stopped_by = None
            if verdict.result == "NOT_RUN":
                earlier = [by_verdict.get(((config.file, config.test, i), flow))
                           for i in range(config.subtest)]
                stopped_by = next((v for v in reversed(earlier)
                                   if v is not None and v.result not in SUITE_PASS | {"NOT_RUN"}),
                                  None)
            case = config.case_for(quant)
            case_id = case.case_id if case is not None else ""
            stock = by_cell.get((case_id, backend, "stock"))
            fixed = by_cell.get((case_id, backend, "fixed"))
            suite_pass = verdict.result in SUITE_PASS
            agree = verdict.result not in SUITE_NO_VERDICT and (
                (suite_pass and _ours_pass(stock)) or (not suite_pass and _ours_fail(stock)))
            note = ""
            if bool(quant) and _lowered(verdict) and not verdict.quantized:
                note = INT8_NOTE
            elif stopped_by is not None:
                note = (f"stopped by subtest {stopped_by.subtest}: {stopped_by.result}")
            rows.append(Row(
                file=config.file, test=config.test, subtest=config.subtest, flow=flow,
                case_id=case_id, suite=verdict.result,
                ours_stock=getattr(stock, "status", "") or "",
                ours_fixed=getattr(fixed, "status", "") or "",
                fixes=getattr(fixed, "fixes", "") or "", agree=agree,
                reason="" if agree else reason(config, verdict, stock, bool(quant), stopped_by),
                note=note,
                suite_error=verdict.error[:300], suite_error_max=verdict.error_max,
                ours_message=(getattr(stock, "message", "") or "")[:300],
                ours_max_abs_error=getattr(stock, "max_abs_error", None),
                ours_fixed_message=(getattr(fixed, "message", "") or "")[:300]))
    return rows


def _counts_of(rows: list[Row]) -> dict:
    return {"rows": len(rows), "agree": sum(r.agree for r in rows),
            "disagree": sum(not r.agree for r in rows),
            "by_reason": dict(Counter(r.reason for r in rows if not r.agree).most_common()),
            "agree_on_different_programs": sum(r.agree and r.note == INT8_NOTE for r in rows),
            "fixed_differs": sum(bool(r.ours_fixed) and r.ours_fixed != r.ours_stock
                                 for r in rows),
            "unexplained": sum(not r.explained for r in rows)}


def counts(rows: list[Row]) -> dict:
    return {**_counts_of(rows),
            "by_flow": {flow: _counts_of([r for r in rows if r.flow == flow])
                        for flow in dict.fromkeys(r.flow for r in rows)}}


def summary_text(rows: list[Row], timing: dict | None = None) -> str:
    c = counts(rows)
    lines = [f"ExecuTorch's conv suite vs ours: {c['rows']} subtests, {c['agree']} agree, "
             f"{c['disagree']} disagree ({c['unexplained']} unexplained)"]
    timing = dict(timing or {})
    note = timing.pop("note", "")
    if note:
        lines.append(note)
    if timing:
        lines.append("wall: " + ", ".join(f"{k} {v} s" for k, v in timing.items()))
    for flow, n in c["by_flow"].items():
        extra = (f"; {n['agree_on_different_programs']} of the agreements compare the suite's "
                 f"float program with our int8 one" if n["agree_on_different_programs"] else "")
        lines.append(f"  {flow}: {n['rows']} configurations, agree {n['agree']}, disagree "
                     f"{n['disagree']} ({n['unexplained']} unexplained); ours fixed differs from "
                     f"stock in {n['fixed_differs']}{extra}")
        for why, k in n["by_reason"].items():
            lines.append(f"    disagree, {why}: {k}")
    lines.append("  all flows:")
    for why, n in c["by_reason"].items():
        lines.append(f"    disagree, {why}: {n}")
    for r in rows:
        if not r.explained:
            lines.append(f"  UNEXPLAINED {r.file}::{r.test}[{r.subtest}] {r.flow}: suite "
                         f"{r.suite}, ours {r.ours_stock} / fixed {r.ours_fixed or '-'} "
                         f"({r.case_id}); suite: {r.suite_error[:160] or '-'}; ours: "
                         f"{r.ours_message[:160] or '-'}")
    return "\n".join(lines)


def write(out: Path, rows: list[Row], timing: dict | None = None) -> None:
    """OUT/etsuite.csv (one row per subtest and flow), etsuite.json (rows + counts),
    etsuite.md (counts and the unexplained disagreements)."""
    import pandas as pd

    out = Path(out)
    data = [dataclasses.asdict(r) for r in rows]
    pd.DataFrame(data, columns=[f.name for f in dataclasses.fields(Row)]).to_csv(
        out / "etsuite.csv", index=False)
    (out / "etsuite.json").write_text(json.dumps({"counts": counts(rows), "timing": timing or {},
                                                  "rows": data}, indent=1))
    (out / "etsuite.md").write_text("```\n" + summary_text(rows, timing) + "\n```\n")


def minimal_case_dict(case) -> dict:
    """A ConvCase as a corpus file spells it: every field off its default, and the ones that say
    what the conv is (dim, channels, kernel, input shape) always. Spelling is kept: padding
    ``[0]`` is not ``0``."""
    always = {"dim", "in_channels", "out_channels", "kernel_size", "input_shape"}
    defaults = {f.name: f.default for f in dataclasses.fields(case)
                if f.default is not dataclasses.MISSING}
    out = {}
    for name, value in case.to_dict().items():
        if name in always or name not in defaults or \
                json.loads(json.dumps(defaults[name])) != value:
            out[name] = value
    return out


def corpus_with_expectations(entries: list[dict], cells: list, rows: list[Row] = (),
                             stock_only: bool = True) -> list[dict]:
    """The configurations' case file entries with ``expect``: each lane's status in ``cells``
    (the stock lanes only by default: a fixed lane's name lists every fix, and that list grows);
    with ``rows``, also ``suite``: what ExecuTorch's suite said per flow (verdicts of several
    configurations of one case joined by ``|`` when they differ), for the reader, not checked."""
    from harness.lane import Lane
    from harness.spec import ConvCase

    by_case: dict = {}
    for c in cells:
        lane = Lane.of(c.backend, c.fixes)
        if not stock_only or not lane.fixes:
            by_case.setdefault(c.case_id, {})[lane.name] = c.status
    suite: dict = {}
    for r in rows:
        said = suite.setdefault(r.case_id, {}).setdefault(r.flow, [])
        if r.suite not in said:
            said.append(r.suite)
    out = []
    for entry in entries:
        case = ConvCase.from_dict(entry["case"])
        expect = dict(sorted(by_case.get(case.case_id, {}).items()))
        if expect:
            extra = {"suite": {f: "|".join(v) for f, v in suite[case.case_id].items()}} \
                if case.case_id in suite else {}
            out.append({**entry, "case": minimal_case_dict(case), "expect": expect, **extra})
    return out
