"""Failures -> findings: non-PASS cells grouped into distinct problems, each with the simplest rule
over case features that separates its cells from the rest of its lanes.

A finding is (backend family, status, signature). The family is the backend without its device
(``vulkan`` and ``vulkan@h200`` are one family, so one bug seen on two devices is one finding);
the signature is the message with what varies from cell to cell taken out: for a runtime check,
the check itself (``Exception raised from FUNC at FILE:LINE: (cond)``); for a contract violation,
its rules; otherwise numbers, shapes, case ids and paths. A MISMATCH adds where the output is
wrong (the cell's ``error_pattern``, stages/fingerprint.py) with its numbers taken out too, so
the Vulkan depthwise right-edge bug ("right edge N cols · all channels · all batches") and the
grouped-conv bug ("channels of group >= N · ...") are two findings, and the same bug at another
size (another edge width, another channel count) stays one. A matrix written before the column
existed has no pattern: its MISMATCH cells keep the message-only key (and id) they had. The id
hashes the key, so the same problem keeps its id across runs and machines.

Each finding says which known upstream issue tracks it (cases/upstream/known_issues.json,
results/known_issues.py: "known: #22774 (open), #22778 (open)", "known, not reported upstream")
or "new"; a MISMATCH finding gets a picture of |out - ref| of its representative
(``pictures/F-....png``, drawn from the cell's evidence/ file) beside findings.md.

What decides a finding is found by experiment where the run was diagnosed (``--diagnose``,
``harness diagnose``; diagnosis.json, results/diagnosis.py): the fields whose one-step variants
of its representative, run as real cells in its lane, left the finding (``deciding``, with every
variant in ``variants``). The correlational rule below stays as supporting evidence with its
counts, marked ``data_limited`` when the finding has fewer than MIN_RULE_CELLS cells.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from harness.lane import Lane
from harness.record import CellResult, cell_key
from harness.results import diagnosis
from harness.runfolder import RunFolder
from harness.stages import culprit
from harness.status import Status

_RUNTIME_CHECK = re.compile(r"Exception raised from (\w+) at ([\w./-]+:\d+): (.*?)( is false!|$)")
_RULE = re.compile(r"(?:^|; )\[([a-z][a-z0-9-]*)\] ([\w.]+)")  # "[rule] op: ..." joined by "; "
_VARIABLE = [
    (re.compile(r"conv(T)?[123]d_\S+-[0-9a-f]{8}"), "CASE"),
    (re.compile(r"(/[\w.-]+)+/(site-packages|executorch)/"), r"\2/"),
    (re.compile(r"0x[0-9a-fA-F]+"), "0x?"),
    (re.compile(r"\d+(\.\d+)?(e[-+]?\d+)?"), "N"),
]


# a pattern's unit after its count: "right edge 1 col" and "right edge 3 cols" are one bug at two
# kernel sizes (fingerprint.py words a count of 1 in the singular)
_UNIT = re.compile(r"\bN (col|row|slice|channel|batch)(?:e?s)?\b")
_PLURAL = {"batch": "batches"}


def _plural_units(text: str) -> str:
    return _UNIT.sub(lambda m: f"N {_PLURAL.get(m.group(1), m.group(1) + 's')}", text)


def signature(status: str, message: str, error_pattern: str = "") -> str:
    """What a cell's failure is, with what varies from cell to cell taken out, keyed by its
    culprit where the message names one (stages/culprit.py ``key_component``):

    - a MISMATCH whose message names the code that computed it (``— culprit: delegate:vulkan:
      conv2d_dw_float``, the XNNPACK node, a portable kernel): that component; the shader is
      the bug, whatever size or spelling made it show (another edge width, a width-1 output
      wrong "everything"); one with only a generic culprit adds its error pattern, as before;
    - a failed kernel call or a portable kernel's abort: ``portable:<operator>`` and the check
      that failed (numbers out);
    - a lowering error in a pass or stage: ``lowering:<pass>`` / ``to_executorch`` / ... and
      the message;
    - otherwise the message (and a MISMATCH's pattern) as it always was, so a matrix written
      before culprits existed keeps its ids."""
    component = culprit.key_component(status, message)
    pattern = error_pattern if isinstance(error_pattern, str) else ""  # NaN: an older matrix
    if status == Status.MISMATCH.value and component:
        if _specific(component):
            return f"{component}"
        base = _message_signature(status, message.split(culprit.CULPRIT_MARK, 1)[0])
        return f"{component}: {base}" + (f" @ {_plural_units(_normalise(pattern.strip()))}"
                                          if pattern.strip() else "")
    if component.startswith("runtime:"):  # the binding's one refusal (culprit._BINDING_INPUT)
        return component
    if component.startswith("portable:"):
        check = culprit.failed_check(message)
        return f"{component}: {_normalise(check)[:200]}" if check else component
    base = _message_signature(status, message)
    if status == Status.MISMATCH.value and pattern.strip():
        return f"{base} @ {_plural_units(_normalise(pattern.strip()))}"
    return base


def _specific(component: str) -> bool:
    """A culprit that names the code itself (a shader, an XNNPACK node), not just a delegate:
    enough to key a wrong-value finding on. Not a portable kernel: every program left outside
    a delegate runs the same aten::convolution.out, so its wrong values key on where they are
    wrong too (the nightly merged an XNNPACK int8 runtime-weight conv, wrong everywhere, with a
    Vulkan int8 transposed conv1d, wrong in one channel, under the kernel's name alone)."""
    return not component.startswith("portable:") and component.count(":") >= 2


def key_family(backend: str, status: str, message: str) -> str:
    """The backend part of a finding's key: ``*`` for a component every lane runs the same code
    of (portable kernels, exir passes and stages, the quantizer: one finding across lanes),
    else the backend family."""
    return "*" if culprit.shared(culprit.key_component(status, message)) else family(backend)


def _message_signature(status: str, message: str) -> str:
    message = (message or "").strip()
    head = message.split(culprit.RUNTIME_MARK, 1)[0]
    check = _RUNTIME_CHECK.search(head)  # the delegate's own exception says it already
    if check:  # the same check at the same place, whatever the values in its condition
        return f"{check.group(1)} at {check.group(2)}: {_normalise(check.group(3))}"
    if status == Status.CONTRACT_VIOLATION.value:
        rules = sorted({f"[{r}] {op}" for r, op in _RULE.findall(message)})
        if rules:
            return "; ".join(rules)
    death, _, said = message.partition("; it printed: ")
    if said:  # a dying process: what killed it, and the last thing it said (the native assert)
        return f"{_normalise(death)}: {_normalise(said.split(' | ')[-1])}"[:240]
    return _normalise(message)[:200]


def _normalise(text: str) -> str:
    for pattern, repl in _VARIABLE:
        text = pattern.sub(repl, text)
    return text


def finding_id(backend: str, status: str, message: str, error_pattern: str = "") -> str | None:
    """The id of the finding a cell belongs to (None for PASS / NO_RUNTIME)."""
    if not Status(status).is_finding:  # PASS; NO_RUNTIME: nothing was tried, nothing found
        return None
    key = (f"{key_family(backend, status, message)}|{status}|"
           f"{signature(status, message, error_pattern)}")
    return "F-" + hashlib.sha1(key.encode()).hexdigest()[:8]


def cell_finding_id(cell) -> str | None:
    """``finding_id`` of a CellResult, a matrix row (dict) or an ``itertuples`` row; a row of a
    matrix from before the error_pattern column reads as having none."""
    get = cell.get if isinstance(cell, dict) else lambda k, d=None: getattr(cell, k, d)
    return finding_id(get("backend"), get("status"), get("message") or "",
                      get("error_pattern", "") or "")


def family(backend: str) -> str:
    return Lane.of(backend).backend


def features(r: CellResult) -> dict:
    """Derived case features a rule may use (what a reader would name a bug by)."""
    c = r.case
    ks = c.kernel_size if isinstance(c.kernel_size, tuple) else (c.kernel_size,)
    return {"dim": c.dim, "transposed": c.transposed, "quant": c.quant or "fp32",
            "padding_spelling": c.padding_spelling, "kernel_parity": c.kernel_parity,
            "has a length-1 list": c.has_short_int_list(),
            "grouped": c.groups > 1, "depthwise": c.groups > 1 and c.groups == c.in_channels,
            "channels per group % 4": (c.in_channels // c.groups) % 4 == 0
            and (c.out_channels // c.groups) % 4 == 0,
            "kernel 1": all(k == 1 for k in ks), "bias": c.bias,
            "padding_mode": c.padding_mode, "dtype": c.dtype, "batch > 1": c.input_shape[0] > 1,
            "output_padding > 0": max(c.spatial("output_padding")) > 0,
            # with "transposed" as the second feature of a rule: transposed with dilation
            "dilation > 1": max(c.spatial("dilation")) > 1, "stride > 1": max(c.spatial("stride")) > 1,
            # the conv in context (spec.py): what runs before and after it, where its weights come from
            "epilogue": ".".join(e if isinstance(e, str) else e[0] for e in c.epilogue) or "none",
            "prologue": c.prologue is not None, "weights": c.weights}


@dataclass
class Finding:
    id: str
    backend: str
    status: str
    signature: str
    count: int
    lanes: list
    case_ids: list
    example: dict  # one cell: case_id, backend, fixes, message, repro
    fixed_by: dict = field(default_factory=dict)  # fix -> "k/n of its stock cells PASS with it"
    rule: str = "no simple rule"
    rule_in: str = ""
    rule_out: str = ""
    precision: float | None = None
    recall: float | None = None
    minimal: dict | None = None  # from --shrink: case, case_id, seconds, tries, note, repro
    first_seen: str = ""  # run start times: from the baseline where it knew the finding
    last_seen: str = ""
    error_pattern: str = ""  # a MISMATCH: where its representative (example) is wrong
    known: str = "new"  # "known: #22774 (open), ..." / "known, not reported upstream" / "new" /
    # "new (2/6 cells also match #20517 ...)": a minority matched, not the representative
    known_issues: list = field(default_factory=list)  # [{id, title, label, cells: "k/n"}]
    picture: str = ""  # a MISMATCH: pictures/F-....png (relative to the run folder), if drawn
    # --diagnose (results/diagnosis.py): the fields whose one-step variants of the
    # representative, run as real cells in its lane, left the finding; every variant run; and
    # how far it got ("12 of 12 variants in 40 s", "budget ran out after 3 of 12 variants")
    deciding: list = field(default_factory=list)
    variants: list = field(default_factory=list)  # [diagnosis.Variant]
    diagnosis: str = ""
    data_limited: bool = False  # the rule is a correlation over < MIN_RULE_CELLS cells
    # the culprit (stages/culprit.py): the representative's component ("portable:aten::
    # convolution.out", "delegate:vulkan:conv2d_dw_float", "lowering:FuseBatchNormPass", ...)
    component: str = ""
    runtime_line: str = ""  # the runtime's own decisive line(s) for a runtime failure
    # a finding across lanes (a component they share): lane -> its cells' case ids
    cells_by_lane: dict = field(default_factory=dict)


MIN_RULE_CELLS = 5  # fewer cells than this: the rule is a correlation over too few to trust


def load_shrunk(run_dir: Path | None) -> dict:
    """A run's shrink results (shrunk.json, written by ``harness run --shrink``), by finding id."""
    path = run_dir / "shrunk.json" if run_dir else None
    if path is None or not path.exists():
        return {}
    return json.loads(path.read_text())


def find(results: list[CellResult] | pd.DataFrame, run_dir: Path | None = None,
         first_seen: dict | None = None, known: tuple | None = None) -> list[Finding]:
    """The findings of a run's cells. ``first_seen``: what a baseline knew (finding id ->
    when); with ``run_dir``, what the run's findings.json already says wins, and a finding new
    to both is first seen in this run. ``known``: the known upstream issues to match (default:
    known_issues.load(), the shipped file or $CONVCONF_KNOWN_ISSUES; ValueError, one line,
    when that file is malformed)."""
    from harness.results import known_issues

    if isinstance(results, pd.DataFrame):
        results = [CellResult.from_row(r) for r in results.to_dict(orient="records")]
    issues = known_issues.load(known_issues.default_path()) if known is None else known
    folder = RunFolder(run_dir) if run_dir else None
    shrunk = load_shrunk(run_dir)
    diagnosed = diagnosis.load(run_dir)
    by_key = {r.key: r for r in results}
    groups: dict[tuple, list[CellResult]] = {}
    for r in results:
        if Status(r.status).is_finding:
            groups.setdefault((key_family(r.backend, r.status, r.message), r.status,
                               signature(r.status, r.message, r.error_pattern)), []).append(r)
    found = []
    for (fam, status, sig), cells in groups.items():
        lanes = sorted({Lane.of(r.backend, r.fixes).name for r in cells})
        # the representative: the first cell, or for a MISMATCH the first whose evidence (the
        # picture's data) the folder holds
        example = cells[0]
        if folder is not None and status == Status.MISMATCH.value:
            example = next((r for r in cells if folder.evidence_path(r.case_id, r.backend,
                                                                     r.fixes).exists()), example)
        repro = ""
        if folder is not None:
            path = folder.repro_path(example.case_id, example.backend, example.fixes)
            repro = f"repro/{path.name}" if path.exists() else ""
        families = sorted({family(r.backend) for r in cells})
        f = Finding(id=cell_finding_id(example),
                    backend=fam if fam != "*" else ",".join(families), status=status,
                    signature=sig, count=len(cells), lanes=lanes,
                    case_ids=sorted({r.case_id for r in cells}),
                    example={"case_id": example.case_id, "backend": example.backend,
                             "fixes": example.fixes, "message": example.message[:400],
                             "case": example.case.to_dict(), "repro": repro},
                    fixed_by=_fixed_by(cells, results, by_key),
                    error_pattern=example.error_pattern or "",
                    component=_component(example, cells), runtime_line=runtime_line(example),
                    cells_by_lane=_cells_by_lane(cells) if fam == "*" else {})
        f.minimal = shrunk.get(f.id)
        d = diagnosed.get(f.id)
        if d is not None:
            f.deciding, f.variants, f.diagnosis = d.deciding, d.variants, d.summary
        _known(f, example, cells, issues)
        # told apart from the other cells of its lanes; a finding at execution from the other
        # cells that executed (a lowering error says nothing about what a runtime would do)
        executed = Status(status).executed
        _decide(f, cells, [r for r in results if Lane.of(r.backend, r.fixes).name in lanes
                           and (not executed or Status(r.status).executed)])
        found.append(f)
    if run_dir is not None:
        when, started = {**(first_seen or {}), **seen(run_dir)}, started_at(run_dir)
        for f in found:
            f.first_seen, f.last_seen = when.get(f.id) or started, started
    return sorted(found, key=lambda f: (-f.count, f.id))


def _component(example: CellResult, cells: list[CellResult]) -> str:
    """The finding's component: its representative's, else the one its message keys on, else
    the most common among its cells (a matrix from before the column has none: "")."""
    if example.component:
        return example.component
    keyed = culprit.key_component(example.status, example.message)
    if keyed:
        return keyed
    named = [c.component for c in cells if c.component]
    return max(set(named), key=named.count) if named else ""


def runtime_line(cell: CellResult) -> str:
    """What the runtime itself said about a cell: the decisive lines its message carries, else
    those of its runtime log, else a delegate exception's own text."""
    message = cell.message or ""
    if culprit.RUNTIME_MARK in message:
        return message.split(culprit.RUNTIME_MARK, 1)[1][:400]
    said = culprit.decisive(cell.runtime_log or "")
    if said:
        return " | ".join(said)[:400]
    if "; it printed: " in message:
        return message.split("; it printed: ", 1)[1].split(" | ")[-1][:400]
    if cell.status in (Status.RUNTIME_ERROR.value, Status.CRASH.value):
        return message.split(culprit.CULPRIT_MARK, 1)[0][:400]
    return ""


def _cells_by_lane(cells: list[CellResult]) -> dict:
    out: dict = {}
    for r in cells:
        out.setdefault(Lane.of(r.backend, r.fixes).name, []).append(r.case_id)
    return {k: sorted(v) for k, v in sorted(out.items())}


def _known(f: Finding, example: CellResult, cells: list[CellResult], issues: tuple) -> None:
    """The known upstream issues the finding's cells show, most cells first; the label of the
    one its representative shows (else of the one most cells show, if that is most of them), or
    "new" when none matches ("new (k/n cells also match ...)" when only a minority does)."""
    from harness.results import known_issues

    hits: dict[str, list] = {}
    for r in cells:
        for k in known_issues.match(r.backend, r.case, r.status, r.message, issues=issues,
                                    error_pattern=r.error_pattern, component=r.component):
            hits.setdefault(k.id, [k, 0])[1] += 1
    if not hits:
        f.known, f.known_issues = "new", []
        return
    shown = {k.id for k in known_issues.match(example.backend, example.case, example.status,
                                              example.message, issues=issues,
                                              error_pattern=example.error_pattern,
                                              component=example.component)}
    ordered = sorted(hits.values(), key=lambda kv: (kv[0].id not in shown, -kv[1], kv[0].id))
    f.known_issues = [{"id": k.id, "title": k.title, "label": k.label, "cells": f"{n}/{len(cells)}",
                       "upstream": [u._asdict() for u in k.upstream], "fixed_in": k.fixed_in}
                      for k, n in ordered]
    top, n = ordered[0]
    if top.id in shown or 2 * n > len(cells):
        f.known = top.label
    else:  # a few cells match by coincidence (e.g. also "same" + even kernel): not the bug's name
        f.known = f"new ({n}/{len(cells)} cells also match {top.label.removeprefix('known: ')})"


def _fixed_by(cells: list[CellResult], results: list[CellResult], by_key: dict) -> dict:
    stock = [r for r in cells if not r.fixes]
    fixes = sorted({r.fixes for r in results if r.fixes and family(r.backend) in
                    {family(c.backend) for c in stock}})
    out = {}
    for fx in fixes:
        after = [by_key.get(cell_key(r.case_id, r.backend, fx)) for r in stock]
        tried = [a for a in after if a is not None]
        passed = sum(a.status == Status.PASS.value for a in tried)
        if tried and passed:
            out[fx] = f"{passed}/{len(tried)}"
    return out


def _decide(f: Finding, cells: list[CellResult], lane_cells: list[CellResult]) -> None:
    """The simplest rule (one feature value, else two) that picks this finding's cells out of
    the cells of its lanes: best F1, fewer terms first; 'no simple rule' below F1 0.8."""
    inside = {r.key for r in cells}
    rows = [(features(r), r.key in inside) for r in lane_cells]
    atoms = sorted({(k, v) for feats, _ in rows for k, v in feats.items()}, key=str)
    best = None
    for size in (1, 2):
        for terms in itertools.combinations(atoms, size):
            if len({k for k, _ in terms}) < size:
                continue
            hit = [hit_in for feats, hit_in in rows if all(feats[k] == v for k, v in terms)]
            tp, fp = sum(hit), len(hit) - sum(hit)
            if not tp:
                continue
            precision, recall = tp / (tp + fp), tp / len(inside)
            f1 = 2 * precision * recall / (precision + recall)
            if best is None or f1 > best[0] + 1e-9:
                best = (f1, terms, tp, fp, precision, recall)
        if best and best[0] == 1.0:
            break
    f.data_limited = len(inside) < MIN_RULE_CELLS
    if best is None or best[0] < 0.8:
        return
    _, terms, tp, fp, precision, recall = best
    outside = len(rows) - len(inside)
    f.rule = " and ".join(_term(k, v) for k, v in terms)
    f.rule_in, f.rule_out = f"{tp}/{len(inside)} in", f"{fp}/{outside} out"
    f.precision, f.recall = round(precision, 3), round(recall, 3)


def _term(k: str, v) -> str:
    if v is True:
        return k
    if v is False:
        return f"not {k}"
    return f"{k}={v}"


def rule_text(f: Finding) -> str:
    """The correlational rule with its counts, marked data-limited on too few cells."""
    return (f.rule + (f" ({f.rule_in}, {f.rule_out})" if f.rule_in else "")
            + (" data-limited" if f.data_limited else ""))


def shrink_totals(findings: list[Finding]) -> tuple[int, float]:
    """(tries, seconds) the shrinker spent over the findings (shrunk.json's entries)."""
    entries = [f.minimal for f in findings if f.minimal]
    return (sum(int(e.get("tries") or 0) for e in entries),
            round(sum(float(e.get("seconds") or 0) for e in entries), 1))


def per_minute(tries: int, seconds: float) -> float:
    return round(60.0 * tries / seconds, 1) if seconds > 0 else 0.0


def shrink_line(tries: int, seconds: float) -> str:
    """'shrink: N tries in S s, T tries/min' (the run summary's and findings.md's line)."""
    return f"shrink: {tries} tries in {round(seconds, 1)} s, {per_minute(tries, seconds)} tries/min"


def markdown(findings: list[Finding], cells_not_pass: int, legend: list[str] | None = None) -> str:
    """findings.md: one table row per finding, lanes by their short names (``vulkan+fixes``);
    ``legend``: the lines saying which fixes a short name stands for (results/lanes.py)."""
    from harness.results import lanes as lane_names

    lines = [f"### convconf: {len(findings)} findings from {cells_not_pass} cells that are not "
             "PASS/NO_RUNTIME", "",
             "| id | lane | status | cells | upstream | component | deciding (variants run) | rule "
             "(correlation) | fixed by | minimal case | first seen | signature | runtime said | "
             "where wrong |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for f in findings:
        fixed = ", ".join(f"{fix_set_name(f, k)} {v}" for k, v in f.fixed_by.items()) or "-"
        sig = f.signature.replace("|", "\\|")[:140]
        small = (f.minimal or {}).get("case_id") or (f.minimal or {}).get("note") or "-"
        if f.minimal and f.minimal.get("tries") is not None:
            small += f" ({f.minimal['tries']} tries, {f.minimal.get('tries_per_min', '?')}/min)"
        where = (f.error_pattern.replace("|", "\\|") if f.error_pattern else "-") + (
            f" [picture]({f.picture})" if f.picture else "")
        deciding = (", ".join(f.deciding) or "none found") if f.diagnosis else "-"
        said = (f"`{f.runtime_line.replace('|', '/')[:200]}`" if f.runtime_line else "-")
        lanes = ("; ".join(f"{lane_names.short(lane_names.parse(lane))}: {len(ids)}"
                           for lane, ids in f.cells_by_lane.items())
                 if f.cells_by_lane else f.backend)
        lines.append(f"| {f.id} | {lanes} | {f.status} | {f.count} | {f.known} | "
                     f"`{f.component or '-'}` | {deciding} | {rule_text(f)} | {fixed} | {small} | "
                     f"{f.first_seen or '-'} | `{sig}` | {said} | {where} |")
    diagnosed = [f for f in findings if f.diagnosis]
    if diagnosed:
        lines += ["", "#### Deciding parameters: the representative's one-step variants, each "
                  "run as a real cell in the finding's lane", ""]
        for f in diagnosed:
            lines.append(f"- **{f.id}** ({f.status}): deciding: "
                         f"**{', '.join(f.deciding) or 'none found'}** [{f.diagnosis}]"
                         + (f" — supporting correlation: {rule_text(f)}" if f.rule_in else ""))
            if f.variants:
                lines.append(f"  - {diagnosis.variants_line(f.variants)}")
    tries, seconds = shrink_totals(findings)
    if any(f.minimal for f in findings):
        lines += ["", shrink_line(tries, seconds)]
    pictures = [f for f in findings if f.picture]
    if pictures:
        lines += ["", "#### |out - ref| of each MISMATCH finding's representative", ""]
        for f in pictures:
            lines += [f"**{f.id}** ({f.example['case_id']} on {f.example['backend']}"
                      f"{' + ' + f.example['fixes'] if f.example['fixes'] else ''}): "
                      f"{f.error_pattern}", "", f"![{f.id}]({f.picture})", ""]
    if legend:
        lines += ["", "#### Lanes", ""] + [f"- `{line}`" for line in legend]
    return "\n".join(lines) + "\n"


def fix_set_name(f: Finding, fixes: str) -> str:
    """A ``fixed_by`` key (a fix set, comma-joined) as the short name of the lane it makes on the
    finding's backend that the fixes apply to (``vulkan+fixes``)."""
    from harness.results import lanes as lane_names

    names = [lane_names.short(b, fixes) for b in f.backend.split(",")]
    return next((n for n in names if n.endswith("+" + "fixes")), names[0])


def draw_pictures(run_dir: Path, found: list[Finding]) -> int:
    """pictures/F-....png for every MISMATCH finding whose representative's evidence the run
    folder holds (a folder from before evidence existed has none: no picture, no error);
    sets ``Finding.picture`` (relative to the folder). -> pictures drawn."""
    from harness.results.pictures import render_evidence

    folder, n = RunFolder(run_dir), 0
    for f in found:
        if f.status != Status.MISMATCH.value:
            continue
        ex = f.example
        ev = folder.evidence(ex["case_id"], ex["backend"], ex["fixes"])
        if ev is None:
            f.picture = ""
            continue
        lane = Lane.of(ex["backend"], ex["fixes"]).name
        path = render_evidence(ev, folder.picture_path(f.id),
                               f"{f.id}: |out - ref| of {ex['case_id']} on {lane}\n"
                               f"{f.error_pattern}")
        f.picture = folder.relative(path)
        n += 1
    return n


def seen(run_dir: Path) -> dict:
    """finding id -> first seen, from a run folder's findings.json (its start time if older)."""
    path = run_dir / "findings.json"
    if not path.exists():
        return {}
    started = started_at(run_dir)
    return {f["id"]: f.get("first_seen") or started
            for f in json.loads(path.read_text()).get("findings", [])}


def started_at(run_dir: Path) -> str:
    return RunFolder(run_dir).header_or_empty().started


def write(run_dir: Path, cells: list[CellResult], found: list[Finding]) -> None:
    """findings.json, findings.md and pictures/ (one PNG per MISMATCH finding) in the run folder;
    findings.md is appended to $GITHUB_STEP_SUMMARY when that is set (a GitHub Actions job
    summary)."""
    not_pass = sum(Status(c.status).is_finding for c in cells)
    draw_pictures(run_dir, found)
    (run_dir / "findings.json").write_text(json.dumps(
        {"cells_not_pass": not_pass, "findings": [asdict(f) for f in found]}, indent=1))
    from harness.results import lanes as lane_names

    md = markdown(found, not_pass, lane_names.legend_lines(
        {Lane.of(c.backend, c.fixes) for c in cells}))
    (run_dir / "findings.md").write_text(md)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a") as fh:
            fh.write(md)
