"""``harness upstream RUN --out DIR`` (issue 47): every finding no upstream thread tracks yet,
as an issue draft an ExecuTorch maintainer can take as it is.

One folder per unreported finding (a finding whose stock cells match no known issue, or only
known issues without an upstream link): ``issue.md`` (ready to paste: title, environment,
the minimal reproducer, expected vs actual with numbers, root cause at a source line, the one
fix, the tracker search), ``repro.py`` (results/repro.minimal_script: torch + executorch only,
the Vulkan plug-in from $VULKAN_RUNTIME), ``patch.diff`` (a runtime fix's ExecuTorch diff, or a
line saying there is no upstream patch yet), ``validation.log`` (each single fix's cells, stock
status -> fixed status, and what else the fix's lane changed) and ``picture.png`` (attached:
the issue links it by its own name, never a local path). ``index.md`` orders the drafts as a
maintainer would fix them: silent wrong values (MISMATCH) before loud errors, most cells first.

Everything comes from the run folder (its cells, ``--fixes each`` lanes, shrunk cases,
evidence); nothing is executed here. A finding only a fix lane shows is our fix's bug, not
ExecuTorch's: no draft.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from pathlib import Path

from harness.header import RunHeader
from harness.lane import Lane
from harness.record import CellResult, cell_key
from harness.results import bug_report, findings as findings_mod, known_issues, lanes, repro
from harness.runfolder import RunFolder
from harness.spec import ConvCase
from harness.status import Status

GITHUB = "https://github.com/pytorch/executorch/blob"
# Statuses whose cell is right: a fix that leaves a cell here cleared it (NOT_DELEGATED is
# "executed within tolerance, part of the conv outside the delegate").
RIGHT = (Status.PASS.value, Status.NOT_DELEGATED.value)
scrub = repro.scrub  # local paths out of a message (results/repro.py)


class UpstreamError(ValueError):
    """One line: why no drafts can be written (not a run, a run without findings, --out)."""


@dataclasses.dataclass(frozen=True)
class FixEffect:
    """What one fix alone did to a finding's stock cells (its ``--fixes each`` lane)."""
    fix: str
    kind: str  # "graph" / "runtime"
    summary: str
    runtime_patch: str  # the ExecuTorch diff's name, "" for a graph fix
    tried: int  # the finding's stock cells the lane ran
    cleared: int  # of them, PASS or NOT_DELEGATED (right values) with the fix
    after: tuple  # ((status, count), ...) of those cells with the fix
    cells: tuple  # ((case_id, stock status, fixed status), ...)
    regressed: tuple  # ((case_id, stock status, fixed status), ...): right in stock, not now
    also_cleared: int  # other cells of the lane failing in stock and right with the fix

    @property
    def clears(self) -> bool:
        return self.tried > 0 and self.cleared == self.tried

    @property
    def validated(self) -> bool:
        """Clears every cell of the finding and makes no cell of its lane worse."""
        return self.clears and not self.regressed

    def line(self) -> str:
        after = ", ".join(f"{n} {s}" for s, n in self.after)
        return (f"`{self.fix}` [{self.kind}]: {self.cleared}/{self.tried} cells right ({after})"
                + (f"; {len(self.regressed)} other cell(s) of the lane worse" if self.regressed
                   else "; no other cell of the lane worse")
                + (f"; also clears {self.also_cleared} other failing cell(s)"
                   if self.also_cleared else ""))


@dataclasses.dataclass(frozen=True)
class SourceRef:
    """Where the bug is in ExecuTorch's source (a known issue's ``source``)."""
    path: str
    line: int
    anchor: str
    commit: str
    why: str = ""

    @property
    def url(self) -> str:
        return f"{GITHUB}/{self.commit}/{self.path}#L{self.line}"

    @classmethod
    def of(cls, raw: dict) -> "SourceRef":
        return cls(raw["path"], raw["line"], raw["anchor"], raw["commit"], raw.get("why", ""))


def locate(text: str, anchor: str) -> int | None:
    """The 1-based line of ``text`` holding ``anchor`` (a known issue's source re-located at
    another commit), or None."""
    for i, line in enumerate(text.splitlines(), 1):
        if anchor in line:
            return i
    return None


@dataclasses.dataclass
class Draft:
    """One finding as an upstream issue draft (the folder's files are its fields)."""
    finding: findings_mod.Finding
    cell: CellResult  # the stock cell the draft states
    title: str
    case: ConvCase
    case_note: str
    stated: str  # the stock cell's status, which repro.py prints
    detail: str  # the stock cell's message, local paths scrubbed
    repro: str
    repro_lines: int
    effects: list  # [FixEffect], each single fix of the finding's backend the run had
    patch: str  # patch.diff's text
    patch_from: str  # the fix whose diff it is, "" for none
    sources: list  # [SourceRef]
    known: list  # [KnownIssue] the finding matches (none upstream)
    picture: Path | None
    values: list  # expected vs actual rows (markdown), from the evidence
    issue: str = ""
    # what repro.py printed when `harness upstream --run-repros` ran it alone (run/upstream.py)
    repro_output: str = ""
    repro_status: str = ""  # its STATUS line's status, "" when not run
    validation: str = ""
    folder: str = ""
    stock_cells: int = 0  # the finding's cells on the stock lane (its fix lanes' not counted)
    # patch.diff run at an ExecuTorch tree (``--validate-at``; run/upstream.py), None: not run
    at_tree: "TreeValidation | None" = None

    @property
    def single_fixes(self) -> list:
        return [e for e in self.effects if e.clears]

    @property
    def validated(self) -> bool:
        return any(e.validated and e.fix == self.patch_from for e in self.effects)

    @property
    def silent(self) -> bool:
        return self.finding.status == Status.MISMATCH.value

    def order(self) -> tuple:
        return (not self.silent, -self.stock_cells, self.finding.id)


def unreported(f: findings_mod.Finding) -> bool:
    """No upstream thread tracks it: it matches no known issue, or only ones without a link."""
    return not any(k.get("upstream") for k in f.known_issues)


def fix_effects(f: findings_mod.Finding, cells: list[CellResult]) -> list[FixEffect]:
    """Each single fix's lane on the finding's stock cells (``--fixes each``), best first.
    A lane of several fixes is never reported: it attributes nothing."""
    from harness.stages import fixes as fix_registry

    by_key = {c.key: c for c in cells}
    stock = [c for c in findings_mod.cells_of(f, cells) if not c.fixes]
    fams = {findings_mod.family(c.backend) for c in stock}
    out = []
    for fx in sorted({c.fixes for c in cells if c.fixes and "," not in c.fixes
                      and findings_mod.family(c.backend) in fams}):
        pairs = [(c, by_key.get(cell_key(c.case_id, c.backend, fx))) for c in stock]
        pairs = [(c, a) for c, a in pairs if a is not None]
        if not pairs:
            continue
        lane_cells = [c for c in cells if c.fixes == fx and findings_mod.family(c.backend) in fams]
        mine = {c.key for c, _ in pairs}
        regressed, also = [], 0
        for a in lane_cells:
            s = by_key.get(cell_key(a.case_id, a.backend, ""))
            if s is None or cell_key(s.case_id, s.backend, s.fixes) in mine:
                continue
            if s.status in RIGHT and a.status not in RIGHT:
                regressed.append((a.case_id, s.status, a.status))
            elif s.status not in RIGHT and a.status in RIGHT:
                also += 1
        after: dict[str, int] = {}
        for _, a in pairs:
            after[a.status] = after.get(a.status, 0) + 1
        try:
            fix = fix_registry.get(fx)
            kind, summary, patch = fix.kind, fix.summary, fix.runtime_patch or ""
        except KeyError:
            kind, summary, patch = "?", "", ""
        out.append(FixEffect(fx, kind, summary, patch, len(pairs),
                             sum(a.status in RIGHT and a.status != c.status for c, a in pairs),
                             tuple(sorted(after.items(), key=lambda kv: -kv[1])),
                             tuple((c.case_id, c.status, a.status) for c, a in pairs),
                             tuple(regressed), also))
    return sorted(out, key=lambda e: (not e.validated, not e.clears, -e.cleared, e.fix))


# Graph fixes' upstream form: the change ExecuTorch itself would make, as a diff against its
# main (cases/upstream/patches/NAME.diff, NAME the convconf fix it mirrors).
UPSTREAM_PATCHES = known_issues.KNOWN_ISSUES_FILE.parent / "patches"


def patch_for(effects: list[FixEffect]) -> tuple[str, str]:
    """(patch.diff text, the fix it comes from): for the first single fix that clears the
    finding, its ExecuTorch diff (a runtime patch's, or a graph fix's upstream form in
    cases/upstream/patches/); else a line saying why there is none."""
    from harness.runtimes import patching

    known = {p.name: p.path for p in patching.list_patches()}
    for e in [e for e in effects if e.clears]:
        path = known.get(e.runtime_patch) or UPSTREAM_PATCHES / f"{e.fix}.diff"
        if path.is_file():
            return path.read_text(), e.fix
    clears = [e for e in effects if e.clears]
    if clears:
        return (f"# no upstream patch yet: the fix that clears it, {clears[0].fix} "
                f"[{clears[0].kind}], is a graph rewrite in convconf (harness/stages/fixes/); "
                "its upstream form is not written yet (cases/upstream/patches/)\n", "")
    return "# no upstream patch yet: no single fix of this run clears it\n", ""


# --- a diff run at an ExecuTorch tree (``harness upstream --validate-at``) ---------------------

# ExecuTorch's own test files beside the code a diff changes: (changed path prefix, test file,
# pytest -k expression). Run with the patched tree's Python over the wheel (run/upstream.py).
TESTS_BESIDE = (
    ("backends/vulkan/", "backends/vulkan/test/test_vulkan_delegate.py", "conv"),
    ("backends/vulkan/", "backends/vulkan/test/test_vulkan_passes.py", ""),
    ("backends/vulkan/serialization/", "backends/vulkan/test/test_serialization.py", ""),
    ("backends/xnnpack/", "backends/xnnpack/test/ops/test_conv1d.py", "conv"),
    ("backends/xnnpack/", "backends/xnnpack/test/ops/test_conv2d.py", "conv"),
)


def diff_paths(patch: str) -> list[str]:
    """The files a unified diff changes (its ``+++ b/PATH`` lines), in order."""
    out = []
    for line in patch.splitlines():
        if line.startswith("+++ ") and line[4:].strip() != "/dev/null":
            path = line[4:].strip()
            path = path[2:] if path.startswith("b/") else path
            if path not in out:
                out.append(path)
    return out


def tests_beside(paths: list[str]) -> list[tuple[str, str]]:
    """(test file, -k expression) of ExecuTorch's tests beside the changed ``paths``."""
    out = []
    for prefix, test, select in TESTS_BESIDE:
        if any(p.startswith(prefix) for p in paths) and (test, select) not in out:
            out.append((test, select))
    return out


def fix_cases(fix: str, files=None) -> list[tuple[ConvCase, dict, bool]]:
    """The corpus entries (``cases/*.json``) whose expectations name ``fix`` alone in a lane
    (``BACKEND+FIX``): (case, entry, bug) with ``bug`` true where the fix is expected to change
    the stock status (a cell it fixes), false for a control (expected to stay as it is)."""
    from harness.spec import load_entries

    root = known_issues.KNOWN_ISSUES_FILE.parents[1]
    out, seen = [], set()
    for path in sorted(files if files is not None else root.glob("*.json")):
        try:
            entries = load_entries(str(path))
        except ValueError:
            continue  # not a case file
        for case, entry in entries:
            expect = entry.get("expect") or {}
            for lane, status in expect.items():
                stock, _, fixes = lane.partition("+")
                if fixes != fix or case.case_id in seen or stock not in expect:
                    continue
                seen.add(case.case_id)
                out.append((case, entry, expect[stock] != status))
    return out


def executed(cell: CellResult) -> bool:
    """Whether a cell's program ran (at a tree a partly delegated or XNNPACK cell may be judged
    by its lowering alone: NOT_DELEGATED '(not executed: ...)', NO_RUNTIME)."""
    return cell.status not in (Status.NO_RUNTIME.value,) and "(not executed:" not in cell.message


@dataclasses.dataclass(frozen=True)
class EtTests:
    """One ExecuTorch test file beside the patched code, run with the tree's Python."""
    path: str
    select: str  # the -k expression, "" for the whole file
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    errors: int = 0
    why_not: str = ""  # why it did not run ("" when it did)
    failures: tuple = ()  # the failing test ids (at most a few)

    def line(self) -> str:
        what = self.path + (f" -k {self.select}" if self.select else "")
        if self.why_not:
            return f"{what}: not run ({self.why_not})"
        return (f"{what}: {self.passed} passed, {self.failed} failed, {self.skipped} skipped"
                + (f", {self.errors} errors" if self.errors else ""))


@dataclasses.dataclass(frozen=True)
class TreeCell:
    """One case of a diff's validation: its status at the clean tree and at the patched one."""
    case_id: str
    role: str  # "finding" (the draft's own cells), "bug" (a corpus cell the fix fixes), "control"
    clean: str
    patched: str
    executed: bool  # the patched cell's program ran (not only lowered)
    # a cell only lowered at the tree: its status executed with the patched Python over the
    # wheel and its kernels (run/upstream.values_on_wheel), "" when not run
    on_wheel: str = ""

    @property
    def fixed(self) -> bool:
        return (self.clean not in RIGHT and self.patched in RIGHT
                and (self.executed or not self.on_wheel or self.on_wheel in RIGHT))

    @property
    def moved(self) -> bool:
        return self.clean != self.patched


@dataclasses.dataclass(frozen=True)
class TreeValidation:
    """A draft's patch.diff run at an ExecuTorch tree and at the same tree with the diff applied
    (``harness run --executorch-tree``): the finding's cells and the fix's corpus cells."""
    fix: str
    backend: str
    clean_at: str  # the clean tree's label ("cff6f4dd32e6")
    patched_at: str  # the patched tree's ("cff6f4dd32e6 (dirty)")
    cells: tuple = ()  # (TreeCell, ...)
    tests: tuple = ()  # (EtTests, ...) at the patched tree
    base_tests: tuple = ()  # the same files at the clean tree
    problem: str = ""  # why it could not be validated ("" when it ran)
    plugin: str = ""  # how the patched tree's Vulkan plug-in came ("kept ..." / "built ...")

    @property
    def targets(self) -> list:
        return [c for c in self.cells if c.role != "control"]

    @property
    def failing(self) -> list:
        return [c for c in self.targets if c.clean not in RIGHT]

    @property
    def controls_moved(self) -> list:
        """Controls whose status changed, except a failing one the diff turned right."""
        return [c for c in self.cells if c.role == "control" and c.moved and not c.fixed]

    @property
    def also_fixed(self) -> list:
        """Controls failing at the clean tree (another bug's cells) the diff turned right."""
        return [c for c in self.cells if c.role == "control" and c.fixed]

    @property
    def worse(self) -> list:
        return [c for c in self.cells if c.clean in RIGHT and c.patched not in RIGHT]

    @property
    def validated(self) -> bool:
        return (not self.problem and bool(self.failing)
                and all(c.fixed for c in self.failing) and not self.controls_moved
                and not self.worse)

    def summary(self) -> str:
        """The validation.log's verdict line."""
        if self.problem:
            return f"not validated at {self.clean_at} (patched): {self.problem}"
        fixed = [c for c in self.failing if c.fixed]
        after: dict[str, int] = {}
        for c in fixed:
            after[c.patched] = after.get(c.patched, 0) + 1
        to = "/".join(f"{s} {n}" for s, n in sorted(after.items())) or "-"
        controls = [c for c in self.cells if c.role == "control"]
        return (f"{'validated' if self.validated else 'NOT validated'} at {self.patched_at}: "
                f"{len(fixed)}/{len(self.failing)} cells failing -> PASS/NOT_DELEGATED ({to}), "
                + (f"{len(self.controls_moved)}/{len(controls)} controls moved"
                   if self.controls_moved else
                   f"{len(controls) - len(self.also_fixed)} controls unchanged")
                + (f", {len(self.worse)} cells worse" if self.worse else "")
                + (f"; also {len(self.also_fixed)} failing control(s) right" if self.also_fixed
                   else ""))

    def lines(self) -> list[str]:
        out = [self.summary()]
        if self.problem:
            return out
        if self.plugin:
            out.append(f"  Vulkan plug-in of the patched tree: {self.plugin}")
        for c in self.cells:
            note = "" if c.executed or c.patched not in RIGHT else (
                f" (lowered only at the tree; executed with the patched Python over the wheel's "
                f"kernels: {c.on_wheel})" if c.on_wheel else
                " (lowered only: not executed at the tree, see the fix lane for values)")
            mark = ("MOVED " if c in self.controls_moved else
                    "WORSE " if c in self.worse else "")
            out.append(f"  {mark}{c.role} {c.case_id}: {c.clean} -> {c.patched}{note}")
        if self.tests or self.base_tests:
            out += ["", "ExecuTorch's own tests beside the patched code (the tree's Python over "
                        "the wheel):"]
            base = {(t.path, t.select): t for t in self.base_tests}
            for t in self.tests:
                b = base.get((t.path, t.select))
                out.append(f"  patched: {t.line()}" + (f"; clean: {b.line().split(': ', 1)[1]}"
                                                       if b else ""))
                out += [f"    failed: {f}" for f in t.failures]
        return out


def _known_issues(f: findings_mod.Finding) -> list:
    by_id = {k.id: k for k in known_issues.load(known_issues.default_path())}
    return [by_id[k["id"]] for k in f.known_issues if k["id"] in by_id]


def build(run_dir: Path) -> list[Draft]:
    """The drafts of a run's unreported findings, in index order. UpstreamError (one line)
    when the run has no finding; RunFolderError for a folder that is not a run."""
    folder = RunFolder(run_dir)
    header = folder.header()
    cells = folder.cells()
    found = findings_mod.find(cells, folder.path)
    if not found:
        raise UpstreamError(f"{folder.path}: the run has no findings (every cell is PASS or "
                            "NO_RUNTIME)")
    findings_mod.draw_pictures(folder.path, found)
    drafts = []
    for f in found:
        stock = [c for c in findings_mod.cells_of(f, cells) if not c.fixes]
        if not stock or not unreported(f) or f.status == Status.NOT_DELEGATED.value:
            continue  # reported, our fix's own, or right values the partitioner left out
        drafts.append(_draft(folder, header, f, stock[0], cells))
        drafts[-1].stock_cells = len(stock)
    drafts.sort(key=Draft.order)
    for i, d in enumerate(drafts, 1):
        d.folder = f"{i:02d}-{d.finding.id}"
        render(d, header)
    return drafts


def _draft(folder: RunFolder, header: RunHeader, f: findings_mod.Finding, cell: CellResult,
           cells: list[CellResult]) -> Draft:
    minimal = f.minimal if f.minimal and f.minimal.get("case") else None
    if minimal and lanes.parse(minimal.get("lane", cell.backend)).fixes == ():
        case = ConvCase.from_dict(minimal["case"])
        note = (f"the smallest case `--shrink` found in the finding ({minimal.get('tries', '?')} "
                f"tries, from `{cell.case_id}`)")
    else:
        case, note = cell.case, "the finding's representative (not shrunk in this run)"
    title = bug_report.title(f, cell, case)
    detail = scrub(cell.message.strip().splitlines()[-1] if cell.message.strip() else "")
    backend = Lane.of(cell.backend, "").backend
    script = repro.minimal_script(case, backend, cell.status, detail, scrub(title))
    effects = fix_effects(f, cells)
    patch, patch_from = patch_for(effects)
    known = _known_issues(f)
    sources = [SourceRef.of(k.source) for k in known if k.source]
    ev = folder.evidence(cell.case_id, cell.backend, cell.fixes) if case == cell.case else None
    picture = folder.path / f.picture if f.picture else None
    return Draft(f, cell, scrub(title), case, note, cell.status, detail, script,
                 repro.code_lines(script), effects, patch, patch_from, sources, known,
                 picture if picture and picture.exists() else None,
                 bug_report.values_table(ev, cell))


def render(d: Draft, header: RunHeader) -> None:
    """issue.md and validation.log from the draft as it is now (again after its repro ran)."""
    d.issue = issue_markdown(d, header)
    d.validation = validation_log(d, header)


def issue_markdown(d: Draft, header: RunHeader) -> str:
    """issue.md: what ExecuTorch's issue template asks for, in its order."""
    f = d.finding
    vulkan = Lane.of(f.example["backend"], "").backend == "vulkan"
    env = [scrub(line) for line in bug_report.environment(header, d.cell)]
    what = ("silently wrong output values" if d.silent else
            {"RUNTIME_ERROR": "the runtime refuses it", "CRASH": "the process dies",
             "LOWER_ERROR": "lowering fails", "NOT_DELEGATED": "the conv is not delegated"}.get(
                f.status, f.status))
    md = [f"# {d.title}", "",
          f"**{what}**: {d.stock_cells} stock cell(s) of a differential conformance run "
          f"(convconf finding `{f.id}`).", "",
          "## Environment", "", *env, "",
          "## Reproducer", "",
          f"`{bug_report.module_call(d.case)}` ({d.case_note}). Needs torch and executorch only"
          + ("; the Vulkan runtime comes from a plug-in built from ExecuTorch's source "
             "(`VULKAN_RUNTIME=/path/to/libexecutorch_backend_vulkan.so python repro.py`), "
             "since the PyPI wheel registers no VulkanBackend" if vulkan else "")
          + f". {d.repro_lines} lines of code; attached as `repro.py`.", "",
          "```python", d.repro.rstrip("\n"), "```", "",
          *(["What it printed here (the environment above):", "", "```",
             scrub(d.repro_output).rstrip("\n"), "```", ""] if d.repro_output else []),
          "## Expected vs actual", "",
          "- expected: the eager PyTorch module's output (the quantized eager model for int8), "
          "within the rounding-error bound of a float64 reference for fp32/fp16/bf16 (per "
          "element `2((gamma_K + r u) M + u |ref|)`, M = |W| conv |X| + |b|, computed in repro.py, "
          "which prints the worst error as a multiple of it), one output step for int8",
          f"- actual: **{d.stated}**" + (f": `{d.detail[:400]}`" if d.detail else "")]
    if d.silent:
        md.append(f"- where the output is wrong: **{f.error_pattern or '-'}** "
                  f"({len(f.case_ids)} case(s))")
        md += d.values
        if d.picture:
            md += ["", "![|out - ref| per output channel (black is right)](picture.png)", "",
                   "(`picture.png`, attached: |out - ref| per output channel tile, rows = height, "
                   "columns = width)"]
    if f.runtime_line:
        md.append(f"- the runtime said: `{scrub(f.runtime_line)}`")
    md += ["", "## Root cause", ""]
    if d.sources:
        for s in d.sources:
            md.append(f"- [`{s.path}#L{s.line}`]({s.url}) (at `{s.commit[:12]}`): `{s.anchor}`")
            if s.why:
                md.append(f"  {s.why}")
    else:
        md.append("- not located in ExecuTorch's source yet"
                  + (f" (culprit: `{scrub(f.component)}`)" if f.component else ""))
    if f.deciding:
        md.append(f"- deciding parameters (one-step variants run as real cells): "
                  f"{', '.join(f.deciding)}")
    md += ["", "## Fix", ""]
    singles = d.single_fixes
    if singles:
        md += [f"- **{'the one fix' if len(singles) == 1 else 'clears it alone'}**: {e.line()}"
               + (f" — {e.summary}" if e.summary else "") for e in singles]
    else:
        md.append("- no single fix of this run turns its cells right")
    partial = [e for e in d.effects if not e.clears and e.cleared]
    nothing = [e.fix for e in d.effects if not e.cleared]
    md += [f"- partly: {e.line()}" for e in partial]
    if nothing:
        md.append(f"- no effect on its cells: {', '.join(f'`{n}`' for n in nothing)}")
    md.append(f"- patch: {'`patch.diff` (attached), the ExecuTorch change of `' + d.patch_from + '`' if d.patch_from else d.patch.lstrip('# ').strip()}"
              + ("; validated in `validation.log`" if d.validated else ""))
    md += ["", "## Tracker", ""]
    searched = [s for k in d.known for s in k.searched]
    md += [f"- searched {s['date']}: \"{s['query']}\": {s['result']}" for s in searched] or [
        "- not searched yet"]
    md.append("")
    return "\n".join(md)


def validation_log(d: Draft, header: RunHeader) -> str:
    """Each single fix's lane on the finding's cells, and what else it changed."""
    v = header.versions
    lines = [f"finding {d.finding.id}: {d.stock_cells} stock cell(s), stated {d.stated}",
             f"executorch {v.get('executorch', '?')}, torch {v.get('torch', '?')}; Vulkan plug-in "
             f"source {(header.vulkan or {}).get('source_commit', '-')}", ""]
    if not d.effects:
        lines.append("no single-fix lane ran for this finding's cells (run with --fixes each)")
    for e in d.effects:
        lines.append(f"fix {e.fix} [{e.kind}]: {e.cleared}/{e.tried} right; "
                     + ("VALIDATED" if e.validated else "clears" if e.clears else "not enough"))
        lines += [f"  {c}: {s} -> {a}" for c, s, a in e.cells]
        lines += [f"  REGRESSED {c}: {s} -> {a}" for c, s, a in e.regressed]
        lines.append(f"  other cells of the lane: {len(e.regressed)} worse, {e.also_cleared} "
                     "failing cells now right")
    if d.repro_status:
        lines += ["", f"repro.py run alone: STATUS: {d.repro_status} (stated: {d.stated}): "
                      + ("as stated" if d.repro_status == d.stated else "NOT as stated")]
    graph = [e for e in d.effects if e.fix == d.patch_from and e.kind == "graph"]
    if d.at_tree is not None:
        lines += ["", f"patch.diff (the upstream form of {d.patch_from}) at an ExecuTorch tree, "
                      "the finding's cells and the fix's corpus cells (cases/*.json naming it):"]
        lines += d.at_tree.lines()
        if not (d.at_tree.tests or d.at_tree.base_tests):
            changed = diff_paths(d.patch)
            lines += ["", "ExecuTorch's own tests beside the patched code: "
                      + (f"not run (--no-et-tests; {', '.join(t for t, _ in tests_beside(changed))}"
                         " would run)" if tests_beside(changed) else
                         f"none mapped to {', '.join(changed) or 'the diff'}")]
        return "\n".join(lines + [""])
    if graph:
        lines += ["", f"patch.diff is the upstream form of the graph fix {d.patch_from} (against "
                      "ExecuTorch main); the cells above ran with the fix lane, the same rule "
                      "applied while lowering: the diff itself has not been run at a tree "
                      "(harness upstream --validate-at REF --source GITDIR runs it)"]
    lines += ["", "ExecuTorch's own tests beside the patched code: not run (--validate-at runs "
              "them)", ""]
    return "\n".join(lines)


def index_markdown(drafts: list[Draft], run: str) -> str:
    lines = [f"# Upstream issue drafts ({len(drafts)})", "",
             f"From run `{run}`: one folder per finding no upstream thread tracks, silent wrong "
             "values first, then by cells.", "",
             "| # | finding | status | cells | title | one fix | patch | repro lines | repro printed |",
             "|---|---|---|---|---|---|---|---|---|"]
    for d in drafts:
        one = ", ".join(e.fix for e in d.single_fixes) or "-"
        patch = ("validated" if d.validated else "yes") if d.patch_from else "-"
        if d.at_tree is not None and d.patch_from:
            patch += (" (at tree)" if d.at_tree.validated else " (not at tree)")
        lines.append(f"| [{d.folder}]({d.folder}/issue.md) | {d.finding.id} | {d.finding.status} "
                     f"| {d.stock_cells} | {d.title.replace('|', '/')[:140]} | {one} | {patch} "
                     f"| {d.repro_lines} | {d.repro_status or '-'} |")
    return "\n".join(lines) + "\n"


def check_out(out: str | Path) -> Path:
    """``out`` when it is new, empty, or an earlier drafts folder; else UpstreamError."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or (any(out.iterdir())
                                              and not (out / "index.md").exists())):
        raise UpstreamError(f"--out {out}: exists and is not an upstream drafts folder; "
                            "name a new or empty folder")
    return out


def write(run_dir: str | Path, out: str | Path, drafts: list[Draft] | None = None) -> list[Draft]:
    """The drafts (default: ``build(run_dir)``) into ``out`` (replaced whole only once every
    file is written; an ``out`` that holds something other than drafts is refused:
    UpstreamError)."""
    out = check_out(out)
    drafts = build(Path(run_dir)) if drafts is None else drafts
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".upstream-", dir=out.parent))
    for d in drafts:
        sub = tmp / d.folder
        sub.mkdir()
        (sub / "issue.md").write_text(d.issue)
        (sub / "repro.py").write_text(d.repro)
        (sub / "patch.diff").write_text(d.patch)
        (sub / "validation.log").write_text(d.validation)
        if d.repro_output:
            (sub / "repro.log").write_text(scrub(d.repro_output))
        if d.picture:
            shutil.copyfile(d.picture, sub / "picture.png")
    (tmp / "index.md").write_text(index_markdown(drafts, RunFolder(run_dir).run_id))
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)
    return drafts
