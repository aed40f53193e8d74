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


def print_summary(df, out: Path) -> None:
    from harness.results import matrix

    print()
    print(matrix.status_counts(df).to_string())
    for line in matrix.fix_summary_lines(df):
        print(line)
    agree = matrix.agreement(df)
    if len(agree):
        print("\nstatic contract check vs the runtime (executed cells):")
        print(agree.to_string(index=False))
    for line in matrix.isolation_lines(df):
        print(f"isolation finding: {line}")
    skew = (RunFolder(out).header_or_empty().vulkan or {}).get("skew_note")
    failed = df[(df.backend == "vulkan") & df.status.isin([Status.RUNTIME_ERROR, Status.CRASH, Status.MISMATCH])]
    if skew and len(failed):
        print(f"note: {len(failed)} Vulkan cell(s) failed at runtime; {skew}")
    print(f"{len(df)} cells -> {out / 'matrix.csv'}")


def check_known_issues() -> None:
    """The known-issues file findings are matched against (cases/upstream/known_issues.json or
    $CONVCONF_KNOWN_ISSUES) reads: else one line, exit 2, before anything is written."""
    from harness.results import known_issues

    try:
        known_issues.load(known_issues.default_path())
    except ValueError as e:
        raise UsageError(str(e)) from None


def write_report(out: Path, html: bool = True, verdict=None, first_seen=None) -> None:
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
    print(f"{len(found)} findings -> {out / 'findings.md'}; junit -> {out / 'junit.xml'}")
    header = RunFolder(out).header_or_empty()
    covered = coverage.write(out, cells, header)
    for line in coverage.summary_lines(covered):
        print(line)
    if html:
        path = report.write(out, df, header, found, covered)
        print(f"report -> {path} ({scripts} repro scripts in {out / 'repro'})")
