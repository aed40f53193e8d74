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

A key's cells then split where the run's own cells say two causes (another component, a fix
that clears some of them and not others, another kind of error pattern, two deciding
parameters), and keys merge where they say one (one specific fix clears them all, the same check
at another line, one rule picks exactly their cells): ``Evidence``, issue 48. A finding that
neither splits nor merges keeps its key's id; ``quality`` measures the findings against the
known-issue list (purity, completeness).

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
            "padding_mode": c.padding_mode, "padding_mode not zeros": c.padding_mode != "zeros",
            "dtype": c.dtype, "batch > 1": c.input_shape[0] > 1,
            "output_padding > 0": max(c.spatial("output_padding")) > 0,
            # with "transposed" as the second feature of a rule: transposed with dilation
            "dilation > 1": max(c.spatial("dilation")) > 1, "stride > 1": max(c.spatial("stride")) > 1,
            # the conv in context (spec.py): what runs before and after it, where its weights come from
            "epilogue": ".".join(e if isinstance(e, str) else e[0] for e in c.epilogue) or "none",
            "prologue": c.prologue is not None, "weights": c.weights,
            # the layout (issue 39): the input's memory format, the module's, dynamic sizes
            "memory_format": c.memory_format, "module channels-last": c.module_channels_last,
            "dynamic": c.dynamic}


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
    # split and merged by evidence (``find``): the key id this finding is a part of (when its
    # key's cells split: the largest part keeps that id, the others ``F-xxxxxxxx.yyyy``) and why;
    # the ids of the findings merged into this one and why; every id it answers to (its own, its
    # cells' key ids: a baseline that knew any of them knows it); its cells (case_id, backend, fixes)
    split_from: str = ""
    split_why: str = ""
    merged_from: list = field(default_factory=list)
    merge_why: str = ""
    aliases: list = field(default_factory=list)
    cell_keys: list = field(default_factory=list)


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
    when that file is malformed).

    Cells are grouped by their key (``cell_finding_id``); a key's cells then split where the
    evidence says two causes and keys merge where it says one (``Evidence``, docs/findings.md)."""
    from harness.results import known_issues

    if isinstance(results, pd.DataFrame):
        results = [CellResult.from_row(r) for r in results.to_dict(orient="records")]
    issues = known_issues.load(known_issues.default_path()) if known is None else known
    folder = RunFolder(run_dir) if run_dir else None
    shrunk = load_shrunk(run_dir)
    diagnosed = diagnosis.load(run_dir)
    ev = Evidence(results, issues)
    groups: dict[tuple, list[CellResult]] = {}
    for r in results:
        if ev.k(r) in ev.keys:
            groups.setdefault(ev.keys[ev.k(r)], []).append(r)
    parts = [p for key, cells in groups.items() for p in ev.split(key, cells)]
    found = []
    for cluster in ev.merge(parts):
        cells = [r for p in cluster for r in p.cells]
        fam, status, sig = cluster[0].key
        if len({p.key[0] for p in cluster}) > 1:
            fam = "*"
        lanes = sorted({ev.lane[ev.k(r)] for r in cells})
        # a merged finding: the smallest id of its parts (a key's own id before a split part's)
        own = min(cluster, key=lambda p: (p.id != p.base, p.id))
        # the representative: the first cell (of the part whose id the finding keeps), or for a
        # MISMATCH the first whose evidence (the picture's data) the folder holds
        example = own.cells[0]
        if folder is not None and status == Status.MISMATCH.value:
            example = next((r for r in own.cells if folder.evidence_path(
                r.case_id, r.backend, r.fixes).exists()), example)
        repro = ""
        if folder is not None:
            path = folder.repro_path(example.case_id, example.backend, example.fixes)
            repro = f"repro/{path.name}" if path.exists() else ""
        families = sorted({family(r.backend) for r in cells})
        f = Finding(id=own.id, backend=fam if fam != "*" else ",".join(families), status=status,
                    signature=own.key[2], count=len(cells), lanes=lanes,
                    case_ids=sorted({r.case_id for r in cells}),
                    example={"case_id": example.case_id, "backend": example.backend,
                             "fixes": example.fixes, "message": example.message[:400],
                             "case": example.case.to_dict(), "repro": repro},
                    fixed_by=_fixed_by(cells, results, ev.by_key),
                    error_pattern=example.error_pattern or "",
                    component=_component(example, cells), runtime_line=runtime_line(example),
                    cells_by_lane=_cells_by_lane(cells) if fam == "*" else {},
                    split_from=own.base if own.split else "", split_why=own.split,
                    merged_from=sorted(p.id for p in cluster) if len(cluster) > 1 else [],
                    merge_why=ev.why.get(frozenset(p.id for p in cluster), ""),
                    aliases=sorted({own.id} | {p.id for p in cluster} | {p.base for p in cluster}),
                    cell_keys=sorted(list(ev.k(r)) for r in cells))
        f.minimal = shrunk.get(f.id)
        d = diagnosed.get(f.id)
        if d is not None:
            f.deciding, f.variants, f.diagnosis = d.deciding, d.variants, d.summary
        _known(f, example, cells, issues)
        _decide(f, cells, ev.lane_cells(cells, status), ev.feats, ev.k)
        found.append(f)
    if run_dir is not None:
        when, started = {**(first_seen or {}), **seen(run_dir)}, started_at(run_dir)
        for f in found:
            f.first_seen, f.last_seen = when.get(f.id) or started, started
    return sorted(found, key=lambda f: (-f.count, f.id))


def finding_of(found: list[Finding]) -> dict:
    """Cell key (case_id, backend, fixes) -> the id of the finding that holds the cell."""
    return {tuple(k): f.id for f in found for k in f.cell_keys}


def cells_of(f: Finding, cells: list[CellResult]) -> list[CellResult]:
    """The cells of this run that ``f`` holds (its split part or merged whole, not its key)."""
    keys = {tuple(k) for k in f.cell_keys}
    return [c for c in cells if c.key in keys]


def lands_in(key_id: str, f: Finding, component: str = "") -> bool:
    """Whether a cell whose key id (``cell_finding_id``) is ``key_id`` lands in ``f``: its own
    key, or one merged into it, or the key it is a split part of (a shrink or diagnosis try),
    and, where both name one, at the same culprit ``component``. A key can be shared by two bugs
    whose runtime says the same words: XNNPACK's "Propagating input shapes failed" for a
    transposed conv's output padding and for a channels-last 1x1 conv; a shrink that accepted
    the second for the first drafted the tconv fix's issue around a Conv2d (nightly, 2026-12-07)."""
    same_key = bool(key_id) and key_id in (f.aliases or [f.id])
    return same_key and (not component or not f.component or component == f.component)


def known_as(f: Finding, ids) -> str:
    """How a baseline that knew ``ids`` knows the finding: "" (new), its own id, or a note that
    it is a part split off a known finding, or merged from known ones."""
    if f.id in ids:
        return f.id
    if f.split_from and f.split_from in ids:
        return f"{f.split_from} (this is a part of it, split by evidence: {f.split_why})"
    knew = sorted(set(f.merged_from) & set(ids)) or sorted(set(f.aliases) & set(ids))
    return f"{', '.join(knew)} (merged into {f.id}: {f.merge_why})" if knew else ""


MIN_SPLIT_CELLS = 3  # a split by deciding parameters: each side holds at least this many cells


@dataclass
class Part:
    """Cells of one finding key (or one part of it, ``split`` saying why), before merging."""
    key: tuple  # (family, status, signature)
    base: str  # the key's id
    cells: list
    split: str = ""  # "" : the key's cells, whole
    id: str = ""


class Evidence:
    """What ``find`` splits and merges by, from the run's own cells: each cell's key, lane and
    features, the cell of the same case in every fix lane, the known issues each cell matches.

    Split (within one key): by component (the cell's culprit: a generic runtime message seen in
    two XNNPACK nodes is two findings), by fix (a fix lane turns some of its stock cells PASS and
    leaves others failing in the same key), by error kind (a MISMATCH's pattern: which axes are
    wrong and where, counts out), by deciding parameters (two one-feature rules, each catching
    only the finding's cells, together all of them: one part decided by groups, another by
    memory_format). Merge (keys of one family and status): the same specific fix turns every
    stock cell of each PASS, or one rule over the case features picks exactly their cells
    together (>= MIN_RULE_CELLS cells); never two whose cells mostly match different known
    issues."""

    def __init__(self, results: list[CellResult], issues: tuple):
        from harness.results import known_issues

        self.results, self.issues = results, issues
        self._key = {id(r): r.key for r in results}  # a case id is worked out, not stored
        self.by_key = {self.k(r): r for r in results}
        self.lane = {self.k(r): Lane.of(r.backend, r.fixes).name for r in results}
        self.keys = {self.k(r): (key_family(r.backend, r.status, r.message), r.status,
                             signature(r.status, r.message, r.error_pattern))
                     for r in results if Status(r.status).is_finding}
        self._feats: dict = {}
        self._match = {k: {i.id for i in known_issues.match(
            r.backend, r.case, r.status, r.message, issues=issues,
            error_pattern=r.error_pattern, component=r.component)}
            for k, r in ((k, self.by_key[k]) for k in self.keys)}
        self.fix_sets: dict[str, list[str]] = {}
        for r in results:
            if r.fixes:
                self.fix_sets.setdefault(family(r.backend), [])
                if r.fixes not in self.fix_sets[family(r.backend)]:
                    self.fix_sets[family(r.backend)].append(r.fixes)
        self.why: dict = {}  # frozenset of merged ids -> why
        self._hits: dict = {}

    def k(self, r: CellResult) -> tuple:
        """``r.key``, worked out once per cell."""
        return self._key[id(r)] if id(r) in self._key else r.key

    def feats(self, r: CellResult) -> dict:
        if self.k(r) not in self._feats:
            self._feats[self.k(r)] = features(r)
        return self._feats[self.k(r)]

    def lane_cells(self, cells: list[CellResult], status: str) -> list[CellResult]:
        """The cells of the lanes of ``cells`` a rule tells them apart from: for a finding at
        execution the other cells that executed (a lowering error says nothing about what a
        runtime would do)."""
        lanes, executed = {self.lane[self.k(r)] for r in cells}, Status(status).executed
        return [r for r in self.results if self.lane[self.k(r)] in lanes
                and (not executed or Status(r.status).executed)]

    # --- split -----------------------------------------------------------------------------
    def split(self, key: tuple, cells: list[CellResult]) -> list[Part]:
        base = "F-" + hashlib.sha1("|".join(key).encode()).hexdigest()[:8]
        parts = [([], cells)]
        for step in (self._by_component, self._by_fix, self._by_kind, self._by_rule):
            parts = [(why + [w] if w else why, sub) for why, p in parts for w, sub in step(key, p)]
        out = [Part(key, base, sub, "; ".join(why)) for why, sub in parts]
        if len(out) == 1:
            out[0].split, out[0].id = "", base
            return out
        out.sort(key=lambda p: (-len(p.cells), p.split))
        for i, p in enumerate(out):  # the largest part keeps the key's id
            p.id = base if i == 0 else f"{base}.{hashlib.sha1(p.split.encode()).hexdigest()[:4]}"
        return out

    @staticmethod
    def _apart(labelled: dict, cells: list[CellResult], label_of) -> list[tuple[str, list]]:
        """``cells`` by label (``labelled``: label -> cells); cells whose label is None join the
        largest part; one label: no split."""
        if len(labelled) < 2:
            return [("", cells)]
        ordered = sorted(labelled.items(), key=lambda kv: (-len(kv[1]), str(kv[0])))
        parts = {label: list(sub) for label, sub in ordered}
        largest = ordered[0][0]
        for r in cells:
            if label_of(r) is None:
                parts[largest].append(r)
        return [(label, parts[label]) for label, _ in ordered]

    def _by_component(self, key: tuple, cells: list[CellResult]) -> list[tuple[str, list]]:
        named: dict = {}
        for r in cells:
            if r.component:
                named.setdefault(r.component, []).append(r)
        out = self._apart(named, cells, lambda r: r.component or None)
        return out if len(out) == 1 else [(f"component {c}", sub) for c, sub in out]

    def _by_fix(self, key: tuple, cells: list[CellResult]) -> list[tuple[str, list]]:
        """A fix lane that turns some of the stock cells PASS and leaves others in this key."""
        stock = [r for r in cells if not r.fixes]
        for fx in sorted({fx for r in stock for fx in self.fix_sets.get(family(r.backend), [])}):
            passed, same = set(), set()
            for r in stock:
                after = self.by_key.get(cell_key(r.case_id, r.backend, fx))
                if after is not None and after.status == Status.PASS.value:
                    passed.add(r.case_id)
                elif after is not None and self.keys.get(self.k(after)) == key:
                    same.add(r.case_id)
            if passed and same:
                lane = Lane.of(cells[0].backend, fx).name
                a = [r for r in cells if r.case_id in passed]
                b = [r for r in cells if r.case_id not in passed]
                if len(b) > len(a):
                    return [(f"still failing on {lane}", b), (f"PASS on {lane}", a)]
                return [(f"PASS on {lane}", a), (f"still failing on {lane}", b)]
        return [("", cells)]

    def _by_kind(self, key: tuple, cells: list[CellResult]) -> list[tuple[str, list]]:
        """A MISMATCH keyed by its code alone: its cells' error patterns of different kinds
        (``pattern_kind``: one kind within another, "everything" within any, is one kind)."""
        if key[1] != Status.MISMATCH.value or "@" in key[2]:  # the pattern is in the key already
            return [("", cells)]
        kinds: dict = {}
        for r in cells:
            k = pattern_kind(r.error_pattern or "", *_shape_and_kernel(r))
            if k:
                kinds.setdefault(k, []).append(r)
        groups: list[list] = []  # [kind, cells]: a kind joins the first larger one it fits
        for k, sub in sorted(kinds.items(), key=lambda kv: (-len(kv[1]), sorted(kv[0]))):
            home = next((g for g in groups if k <= g[0] or g[0] <= k), None)
            if home is None:
                groups.append([k, list(sub)])
            else:
                home[0], home[1] = home[0] | k, home[1] + sub
        if len(groups) < 2:
            return [("", cells)]
        for r in cells:
            if not pattern_kind(r.error_pattern or "", *_shape_and_kernel(r)):
                groups[0][1].append(r)
        return [(f"wrong at {' · '.join(sorted(k))}", sub) for k, sub in groups]

    def _atom_hits(self, cells: list[CellResult], status: str) -> dict:
        """(feature, value) -> the keys of the cells of the lanes of ``cells`` (``lane_cells``)
        that have it; kept per lanes."""
        lanes = (frozenset(self.lane[self.k(r)] for r in cells), Status(status).executed)
        if lanes not in self._hits:
            hits: dict = {}
            for r in self.lane_cells(cells, status):
                for atom in self.feats(r).items():
                    hits.setdefault(atom, set()).add(self.k(r))
            self._hits[lanes] = hits
        return self._hits[lanes]

    def _by_rule(self, key: tuple, cells: list[CellResult]) -> list[tuple[str, list]]:
        """Two one-feature rules on different features, each catching only this part's cells
        (and at least MIN_SPLIT_CELLS of its own), together all of them, where no one feature
        value separates the part by itself (F1 below 0.8)."""
        inside = {self.k(r) for r in cells}
        if len(inside) < 2 * MIN_SPLIT_CELLS:
            return [("", cells)]
        hits = self._atom_hits(cells, key[1])
        best = max((2 * len(h & inside) / (len(h) + len(inside)) for h in hits.values()), default=0)
        if best >= 0.8:
            return [("", cells)]
        pure = sorted((a for a, h in hits.items() if h <= inside and len(h) >= MIN_SPLIT_CELLS),
                      key=str)
        pairs = [(min(len(hits[a] - hits[b]), len(hits[b] - hits[a])), a, b)
                 for a, b in itertools.combinations(pure, 2)
                 if a[0] != b[0] and hits[a] | hits[b] == inside]
        pairs = [p for p in pairs if p[0] >= MIN_SPLIT_CELLS]
        if not pairs:
            return [("", cells)]
        _, a, b = sorted(pairs, key=lambda p: (-p[0], str(p[1]), str(p[2])))[0]
        if len(hits[b]) > len(hits[a]):
            a, b = b, a
        one = [r for r in cells if self.k(r) in hits[a]]
        two = [r for r in cells if self.k(r) not in hits[a]]
        return [(f"decided by {_term(*a)}", one), (f"decided by {_term(*b)}", two)]

    # --- merge -----------------------------------------------------------------------------
    def _complete_fix(self, part: Part) -> str:
        """The smallest specific fix set that turns every stock cell of the part PASS ("" when
        none): specific, one fix, or a set not holding every other fix set of the family
        (``--fixes all``'s one lane of every fix is no evidence of which fix)."""
        stock = [r for r in part.cells if not r.fixes]
        fam = family(stock[0].backend) if stock else ""
        sets = self.fix_sets.get(fam, [])
        good = []
        for fx in sets:
            mine = set(fx.split(","))
            if len(mine) > 1 and all(set(o.split(",")) <= mine for o in sets if o != fx):
                continue
            after = [self.by_key.get(cell_key(r.case_id, r.backend, fx)) for r in stock]
            if stock and all(a is not None and a.status == Status.PASS.value for a in after):
                good.append(fx)
        return min(good, key=lambda fx: (fx.count(","), fx)) if good else ""

    def _issues(self, part: Part) -> set:
        """The known issues most of the part's cells match."""
        counts: dict = {}
        for r in part.cells:
            for i in self._match.get(self.k(r), ()):
                counts[i] = counts.get(i, 0) + 1
        return {i for i, n in counts.items() if 2 * n > len(part.cells)}

    def _one_rule(self, cells: list[CellResult], status: str,
                  others: dict | None = None) -> tuple[str, list]:
        """A rule of one or two feature values that holds for every one of ``cells`` and for no
        other cell of their lanes, over at least MIN_RULE_CELLS cells (("", []) when none).
        ``others``: the other clusters of the same family and status (root -> their cells'
        keys): the rule may also catch whole ones of them, which then join (-> their roots)."""
        inside = {self.k(r) for r in cells}
        common = set(self.feats(cells[0]).items())
        for r in cells[1:]:
            common &= set(self.feats(r).items())
        if not common or (len(inside) < MIN_RULE_CELLS and not others):
            return "", []
        hits = self._atom_hits(cells, status)
        for size in (1, 2):
            for terms in itertools.combinations(sorted(common, key=str), size):
                caught = set.intersection(*(hits.get(t, set()) for t in terms))
                extra = caught - inside
                joined = [k for k, keys in (others or {}).items() if keys & extra]
                if len(caught) < MIN_RULE_CELLS or extra != set().union(
                        *(others[k] for k in joined)):
                    continue
                return " and ".join(_term(*t) for t in terms), joined
        return "", []

    def merge(self, parts: list[Part]) -> list[list[Part]]:
        """Parts in clusters: one finding each."""
        root = list(range(len(parts)))

        def top(i: int) -> int:
            while root[i] != i:
                i = root[i]
            return i

        fix = [self._complete_fix(p) for p in parts]
        cells = {i: list(p.cells) for i, p in enumerate(parts)}  # a cluster's, by its root
        known = {i: self._issues(p) for i, p in enumerate(parts)}  # ... and its known issues
        by_kind: dict = {}
        for i, p in enumerate(parts):
            by_kind.setdefault((family(p.cells[0].backend) if p.key[0] != "*" else "*",
                                p.key[1]), []).append(i)

        def apart(*roots: int) -> bool:  # the known-issue list says two bugs
            named = [known[r] for r in roots if known[r]]
            return any(not a & b for a, b in itertools.combinations(named, 2))

        for (fam, status), idx in sorted(by_kind.items()):
            for i, j in itertools.combinations(idx, 2):
                a, b = top(i), top(j)
                if a == b or parts[i].base == parts[j].base or apart(a, b):
                    continue
                why, joined = "", []
                if fix[i] and fix[i] == fix[j]:
                    lane = Lane.of(parts[i].cells[0].backend, fix[i]).name
                    why = f"{lane} turns every stock cell PASS"
                elif _LINE.sub(":N", parts[i].key[2]) == _LINE.sub(":N", parts[j].key[2]):
                    why = "the same check at another line (a patched runtime's source)"
                else:
                    others = {top(k): {self.k(r) for r in cells[top(k)]} for k in idx
                              if top(k) not in (a, b)}
                    rule, joined = self._one_rule(cells[a] + cells[b], status, others)
                    if rule and not apart(a, b, *joined):
                        why = f"one rule picks exactly their cells: {rule}"
                if why:
                    for c in [b, *joined]:
                        root[c] = a
                        cells[a] += cells.pop(c)
                        known[a] |= known.pop(c)
                    members = [k for k in range(len(parts)) if top(k) == a]
                    self.why[frozenset(parts[k].id for k in members)] = why
        clusters: dict = {}
        for i in range(len(parts)):
            clusters.setdefault(top(i), []).append(parts[i])
        return list(clusters.values())


_LINE = re.compile(r"(?<=\.cpp):\d+|(?<=\.h):\d+|(?<=\.py):\d+")  # a source file's line


_KIND_NUMBER = re.compile(r"\d+(\.\d+)?|\(.*?\)")
_KIND_UNIT = re.compile(r"\b(col|row|slice|channel|batch|group)(?:e?s)\b")


def _shape_and_kernel(r: CellResult) -> tuple:
    """A cell's output shape (its row's, else the conv's own) and its largest kernel size."""
    return (r.out_shape or r.case.output_shape()), max(r.case.spatial("kernel_size"))


def pattern_kind(pattern: str, out_shape=None, kernel: int = 1) -> frozenset:
    """What kind of wrong a MISMATCH's error pattern (stages/fingerprint.py) says, counts and
    plurals out: its restricted parts only ("right edge N col", "N of N batch"; "all batches",
    "everything spatial" say nothing), so "right edge 1 col" and "right edge 3 cols" are one
    kind; "everything" (no axis restricted) is a kind of its own, except on an output so small
    that every element lies in an edge band (a spatial size of at most half the ``kernel``, at
    least 1: ``out_shape``), where an edge bug is all of it; no pattern (a matrix from before
    the column) none."""
    if (pattern or "").strip() == "everything":
        flat = (out_shape is not None and len(out_shape) > 2
                and min(out_shape[2:]) <= max(1, kernel // 2))
        return frozenset() if flat else frozenset({"everything"})
    out = set()
    for part in re.split(r" · | × | \+ | & ", pattern or ""):
        part = part.strip()
        if not part or part.startswith(("all ", "every", "sparse")):
            continue
        out.add(" ".join(_KIND_UNIT.sub(r"\1", _KIND_NUMBER.sub("N", part)).split()))
    return frozenset(out)


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


def _decide(f: Finding, cells: list[CellResult], lane_cells: list[CellResult],
            feats=features, key=lambda r: r.key) -> None:
    """The simplest rule (one feature value, else two) that picks this finding's cells out of
    the cells of its lanes: best F1, fewer terms first; 'no simple rule' below F1 0.8."""
    inside_keys = {key(r) for r in cells}
    masks: dict = {}  # (feature, value) -> the lane cells that have it, as bits
    inside = 0
    for i, r in enumerate(lane_cells):
        bit = 1 << i
        inside |= bit if key(r) in inside_keys else 0
        for atom in feats(r).items():
            masks[atom] = masks.get(atom, 0) | bit
    atoms = sorted(masks, key=str)
    n_in = len(inside_keys)
    best = None
    for size in (1, 2):
        for terms in itertools.combinations(atoms, size):
            if len({k for k, _ in terms}) < size:
                continue
            hit = masks[terms[0]] if size == 1 else masks[terms[0]] & masks[terms[1]]
            tp = (hit & inside).bit_count()
            if not tp:
                continue
            fp = hit.bit_count() - tp
            precision, recall = tp / (tp + fp), tp / n_in
            f1 = 2 * precision * recall / (precision + recall)
            if best is None or f1 > best[0] + 1e-9:
                best = (f1, terms, tp, fp, precision, recall)
        if best and best[0] == 1.0:
            break
    f.data_limited = n_in < MIN_RULE_CELLS
    if best is None or best[0] < 0.8:
        return
    _, terms, tp, fp, precision, recall = best
    outside = len(lane_cells) - inside.bit_count()
    f.rule = " and ".join(_term(k, v) for k, v in terms)
    f.rule_in, f.rule_out = f"{tp}/{n_in} in", f"{fp}/{outside} out"
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


# --- how well findings match the known-issue list ------------------------------------------------
@dataclass
class Quality:
    """Findings measured against the known-issue list (the ground truth, results/known_issues.py)
    on one run's cells: purity, the share of findings holding cells of known issues that hold
    one (cells matching several entries count once, by the fewest entries that cover them);
    completeness, the share of (known issue, status, backend) seen whose cells are in one
    finding (a finding has one status, and one backend unless the code is shared: an entry
    naming MISMATCH and a guard's RUNTIME_ERROR, or two delegates' partitioners, is two)."""
    findings: int = 0  # findings holding a cell that matches a known issue
    pure: int = 0  # ... of them, those one known issue covers
    issues: int = 0  # (known issue, status, backend) with a cell in the run
    whole: int = 0  # ... of them, those whose cells are in one finding
    mixed: dict = field(default_factory=dict)  # finding id -> the known issues it holds
    spread: dict = field(default_factory=dict)  # "issue (status, backend)" -> its findings

    @property
    def purity(self) -> float:
        return round(self.pure / self.findings, 3) if self.findings else 1.0

    @property
    def completeness(self) -> float:
        return round(self.whole / self.issues, 3) if self.issues else 1.0

    def line(self) -> str:
        text = (f"known-issue clustering: purity {self.purity} ({self.pure}/{self.findings} "
                f"findings hold one known issue), completeness {self.completeness} ({self.whole}/"
                f"{self.issues} known issues (per status and backend) in one finding)")
        text += "".join(f"; {f} holds {', '.join(i)}" for f, i in sorted(self.mixed.items()))
        return text + "".join(f"; {i} is in {', '.join(f)}" for i, f in sorted(self.spread.items()))


def quality(results: list[CellResult], found: list[Finding] | None = None,
            known: tuple | None = None) -> Quality:
    """Purity and completeness of ``found`` (None: cells grouped by their key alone, as findings
    were before they split and merged by evidence) against the known issues (default: the
    shipped file's)."""
    from harness.results import known_issues

    issues = known_issues.load(known_issues.default_path()) if known is None else known
    holder = finding_of(found) if found is not None else None
    labels: dict[str, list[set]] = {}  # finding id -> its cells' known issues
    where: dict[str, set] = {}  # "issue (status, backend)" -> finding ids
    for r in results:
        if not Status(r.status).is_finding:
            continue
        fid = holder.get(r.key) if holder is not None else cell_finding_id(r)
        ids = {k.id for k in known_issues.match(r.backend, r.case, r.status, r.message,
                                                 issues=issues, error_pattern=r.error_pattern,
                                                 component=r.component)}
        if not ids or fid is None:
            continue
        labels.setdefault(fid, []).append(ids)
        for i in ids:
            where.setdefault(f"{i} ({r.status}, {family(r.backend)})", set()).add(fid)
    q = Quality(findings=len(labels), issues=len(where))
    for fid, sets in labels.items():
        cover: list[str] = []
        left = [s for s in sets]
        while left:  # the fewest known issues that cover the finding's cells (greedy)
            best = max(sorted(set().union(*left)), key=lambda i: sum(i in s for s in left))
            cover.append(best)
            left = [s for s in left if best not in s]
        if len(cover) == 1:
            q.pure += 1
        else:
            q.mixed[fid] = sorted(cover)
    for issue, fids in where.items():
        if len(fids) == 1:
            q.whole += 1
        else:
            q.spread[issue] = sorted(fids)
    return q


def markdown(findings: list[Finding], cells_not_pass: int, legend: list[str] | None = None,
             clustering: str = "") -> str:
    """findings.md: one table row per finding, lanes by their short names (``vulkan+fixes``);
    ``legend``: the lines saying which fixes a short name stands for (results/lanes.py);
    ``clustering``: the findings measured against the known-issue list (``Quality.line``)."""
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
    regrouped = [f for f in findings if f.split_from or f.merged_from]
    if regrouped:
        lines += ["", "#### Split and merged by evidence", ""]
        for f in regrouped:
            if f.split_from:
                lines.append(f"- **{f.id}**: a part of {f.split_from} ({f.split_why})")
            if f.merged_from:
                lines.append(f"- **{f.id}**: {', '.join(f.merged_from)} merged ({f.merge_why})")
    if clustering:
        lines += ["", clustering]
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
    q = quality(cells, found)
    (run_dir / "findings.json").write_text(json.dumps(
        {"cells_not_pass": not_pass, "findings": [asdict(f) for f in found],
         "clustering": {**asdict(q), "purity": q.purity, "completeness": q.completeness}},
        indent=1))
    from harness.results import lanes as lane_names

    md = markdown(found, not_pass, lane_names.legend_lines(
        {Lane.of(c.backend, c.fixes) for c in cells}), q.line())
    (run_dir / "findings.md").write_text(md)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a") as fh:
            fh.write(md)


if __name__ == "__main__":  # python -m harness.results.findings RUN_DIR ...: the clustering, before/after
    import sys

    from harness.results import matrix

    for arg in sys.argv[1:]:
        try:
            cells = [CellResult.from_row(r) for r in matrix.read(Path(arg)).to_dict(orient="records")]
        except (OSError, ValueError) as e:
            print(f"{arg}: {e}".replace("\n", " "), file=sys.stderr)
            sys.exit(2)
        found = find(cells)
        print(f"{arg}: {len(cells)} cells, {len({cell_finding_id(c) for c in cells} - {None})} "
              f"keys -> {len(found)} findings ({sum(bool(f.split_from) for f in found)} split "
              f"parts, {sum(bool(f.merged_from) for f in found)} merged)")
        print(f"  by key alone: {quality(cells).line()}")
        print(f"  by evidence:  {quality(cells, found).line()}")
