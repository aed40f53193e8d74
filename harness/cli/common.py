"""What every command shares: the one-line usage error, exit codes, and the run summary."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.runfolder import RunFolder
from harness.status import Status

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """Bad input: printed as ``convconf: error: ...`` and exit 2, before any output is touched."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, not a usage dump
        raise UsageError(f"{self.prog}: {message}")


def read_matrix(path: Path):
    from harness.results import matrix

    try:
        return matrix.read(path)
    except ValueError as e:
        raise UsageError(str(e)) from None


def width() -> int:
    """The console's width ($COLUMNS, else the terminal's, else 100): every line the run prints
    fits it; the full tables stay in the files."""
    import shutil

    return max(40, shutil.get_terminal_size((100, 24)).columns)


def say(line: str = "", indent: int = 2) -> None:
    """Print one line, wrapped to the console's width (continuations indented)."""
    import textwrap

    if len(line) <= width():
        print(line)
        return
    for part in textwrap.wrap(line, width(), subsequent_indent=" " * indent,
                              break_long_words=True, break_on_hyphens=False):
        print(part)


def shown(path) -> str:
    """A path as the console shows it: relative to the working directory when inside it (a
    clone or run folder at any depth prints the same line), else ``~`` for the home folder."""
    import os

    text, home = str(path), str(Path.home())
    try:
        rel = Path(os.path.abspath(text)).relative_to(Path.cwd())
        return str(rel) if str(rel) != "." else "."
    except ValueError:
        pass
    return "~" + text[len(home):] if home != "/" and (text + "/").startswith(home + "/") else text


def lane_table(df) -> list[str]:
    """Per lane (its short name): cells, PASS, and every other status with its count."""
    from harness.results import matrix

    counts = matrix.status_counts(df)
    name_w = max([len("lane")] + [len(str(i)) for i in counts.index])
    lines = [f"{'lane':<{name_w}}  cells  PASS  not PASS"]
    for lane, row in counts.iterrows():
        others = ", ".join(f"{s} {int(n)}" for s, n in row.items() if s != Status.PASS and n)
        lines.append(f"{lane:<{name_w}}  {int(row.sum()):>5}  {int(row.get(Status.PASS, 0)):>4}  "
                     f"{others or '-'}")
    return lines


def print_summary(df, out: Path) -> None:
    """The run's console summary: a short table per lane, what the fixes changed, the contract
    check in one line per lane; every line fits the console (``width``)."""
    from harness.results import matrix

    print()
    for line in lane_table(df):
        say(line, indent=4)
    for line in matrix.fix_summary_lines(df):
        say(line)
    agree = matrix.agreement(df)
    if len(agree):
        say("static contract check vs the runtime (executed cells; flagged: predicted to fail):")
        name_w = max(len(str(n)) for n in agree["lane"])
        for r in agree.itertuples():
            say(f"  {r.lane:<{name_w}}  {r.executed} executed; flagged: "
                f"{r.predicted_and_failed} failed, {r.predicted_but_passed} passed; not flagged: "
                f"{r.unpredicted_failures} failed, {r.clean_and_passed} passed", 4)
    for line in matrix.isolation_lines(df):
        say(f"isolation finding: {line}")
    skew = (RunFolder(out).header_or_empty().vulkan or {}).get("skew_note")
    failed = df[(df.backend == "vulkan") & df.status.isin([Status.RUNTIME_ERROR, Status.CRASH, Status.MISMATCH])]
    if skew and len(failed):
        say(f"note: {len(failed)} Vulkan cell(s) failed at runtime; {skew}")
    say(f"{len(df)} cells -> {shown(out / 'matrix.csv')}")


def print_legend(df) -> None:
    """The console footer: which fixes each short lane name stands for."""
    from harness.results import lanes

    for line in lanes.legend_lines(lanes.of_frame(df)):
        say(f"lane {line}", indent=4)


def print_findings(found: list) -> None:
    """Each finding's one-line title (id, lanes, status, cells, culprit), cut to the width."""
    from harness.results import lanes

    for f in found:
        names = [lanes.short(lanes.parse(n)) for n in (f.cells_by_lane or f.lanes)]
        where = ", ".join(names) if len(", ".join(names)) <= 30 else f"{len(names)} lanes"
        line = (f"  {f.id} {f.status} x{f.count} on {where}"
                + (f" [{f.component}]" if f.component else "") + f": {' '.join(f.signature.split())}")
        print(line if len(line) <= width() else line[:width() - 1] + "…")


def check_known_issues() -> None:
    """The known-issues file findings are matched against (cases/upstream/known_issues.json or
    $CONVCONF_KNOWN_ISSUES) reads: else one line, exit 2, before anything is written."""
    from harness.results import known_issues

    try:
        known_issues.load(known_issues.default_path())
    except ValueError as e:
        raise UsageError(str(e)) from None


def write_report(out: Path, html: bool = True, verdict=None, first_seen=None,
                 baseline_ids=None) -> None:
    """Everything derived from the run's cells (read once), with its findings computed once:
    repro scripts, findings.json/md and pictures/, junit.xml, report.html."""
    from harness.record import CellResult
    from harness.results import coverage, findings, junit, matrix, report, repro

    check_known_issues()
    df = matrix.read(out)
    cells = [CellResult.from_row(r) for r in df.to_dict(orient="records")]
    scripts = repro.write_for_run(out, df) if html else 0
    found = findings.find(cells, out, first_seen)
    findings.write(out, cells, found)
    junit.write(out, df, verdict)
    say(f"{len(found)} findings -> {shown(out / 'findings.md')}; junit -> "
        f"{shown(out / 'junit.xml')}")
    print_findings(found)
    header = RunFolder(out).header_or_empty()
    covered = coverage.write(out, cells, header)
    for line in coverage.summary_lines(covered):
        say(line)
    print_legend(df)
    if html:
        path = report.write(out, df, header, found, covered, verdict, baseline_ids)
        say(f"report -> {shown(path)} ({scripts} repro scripts in {shown(out / 'repro')})")
