"""Command line: ``python -m harness {run,report,repro,diff,runtime}``.

Bad input (malformed case file, unknown backend/fix, unreadable results) ends in one line on
stderr, ``convconf: error: ...``, exit 2, before anything in the output folder is touched.
"""

from __future__ import annotations

import argparse
import logging
import sys
import warnings
from pathlib import Path

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, not a usage dump
        raise UsageError(f"{self.prog}: {message}")


def _quiet() -> None:
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="harness", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    r = sub.add_parser("run", help="generate cases, lower and run them, write the matrix")
    r.add_argument("--out", type=Path, help="run folder (matrix.csv, journal.jsonl, report.html)")
    r.add_argument("--backends", default="xnnpack,vulkan")
    r.add_argument("--fixes", default="", help='comma-separated fix names, or "all"')
    r.add_argument("--profile", choices=["ci", "nightly"], default="ci")
    r.add_argument("--max-examples", type=int, help="generated cases (default: by profile)")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--cases", nargs="+", default=[], metavar="FILE.json",
                   help="case files (JSON lists of ConvCase objects) run besides generated ones")
    r.add_argument("-j", "--jobs", type=int, help="worker processes (default: number of cores)")
    r.add_argument("--timeout", type=float, default=300.0, help="seconds per cell before CRASH")
    r.add_argument("--cache", dest="cache_dir", help="lowered-program cache folder "
                   "(default: $CONVCONF_CACHE or ~/.cache/convconf)")
    r.add_argument("--no-cache", action="store_true")
    r.add_argument("--resume", type=Path, metavar="DIR", help="continue a killed run in DIR")
    r.add_argument("--overwrite", action="store_true", help="replace an existing run in --out")
    r.add_argument("--fail-on-mismatch", action="store_true",
                   help="exit 1 when any cell is not PASS or NO_RUNTIME")
    r.add_argument("--save-failures", metavar="FILE.json",
                   help="add the cases of non-PASS/NO_RUNTIME cells to this case file")
    r.add_argument("--vulkan-runtime", default="auto", metavar="auto|PATH|none",
                   help="Vulkan runtime plug-in to execute the Vulkan lane with (default: the one "
                   "built for the installed executorch, if any)")
    r.add_argument("--no-progress", action="store_true")
    r.add_argument("--no-report", action="store_true")
    r.set_defaults(func=cmd_run)

    rep = sub.add_parser("report", help="write DIR/report.html from a run folder")
    rep.add_argument("dir", type=Path)
    rep.set_defaults(func=cmd_report)

    rp = sub.add_parser("repro", help="write a standalone script that reproduces one cell")
    rp.add_argument("case_id")
    rp.add_argument("--backend", required=True)
    rp.add_argument("--fixes", default="")
    rp.add_argument("--dir", type=Path, required=True, help="the run folder holding the case")
    rp.set_defaults(func=cmd_repro)

    d = sub.add_parser("diff", help="cells that regressed / got fixed / changed between two runs")
    d.add_argument("old", type=Path)
    d.add_argument("new", type=Path)
    d.add_argument("--out", type=Path, help="diff.csv path (default: NEW/diff.csv)")
    d.set_defaults(func=cmd_diff)

    bu = sub.add_parser("bundle", help="a run's cells as a folder that runs on another machine")
    bu.add_argument("run_dir", type=Path)
    bu.add_argument("--lane", default="vulkan", choices=["vulkan"])
    bu.add_argument("--out", type=Path, required=True)
    bu.add_argument("--select", nargs="+", metavar="STATUS", help="only cells with these statuses")
    bu.set_defaults(func=cmd_bundle)

    ing = sub.add_parser("ingest", help="add a bundle's device results to the run as a new lane")
    ing.add_argument("run_dir", type=Path)
    ing.add_argument("results", type=Path)
    ing.add_argument("--device-name", required=True)
    ing.set_defaults(func=cmd_ingest)

    rt = sub.add_parser("runtime", help="build or inspect native runtime plug-ins")
    rts = rt.add_subparsers(dest="action", required=True, parser_class=_Parser)
    b = rts.add_parser("build", help="build a runtime plug-in for the installed executorch")
    b.add_argument("name", choices=["vulkan", "runner"],
                   help="vulkan: the plug-in; runner: the native runner (built with it)")
    b.add_argument("--source", metavar="DIR|TARBALL", help="ExecuTorch source (default: "
                   "$CONVCONF_EXECUTORCH_SRC, else a git fetch of the wheel's commit)")
    b.add_argument("--jobs", type=int, help="parallel compile jobs (default: cores)")
    b.add_argument("--cache", dest="cache_dir", help="cache folder (default: $CONVCONF_CACHE)")
    b.set_defaults(func=cmd_runtime_build)
    st = rts.add_parser("status", help="installed plug-ins, registered backends, Vulkan device")
    st.add_argument("--cache", dest="cache_dir")
    st.set_defaults(func=cmd_runtime_status)
    return p


def _read_matrix(path: Path):
    from . import matrix

    try:
        return matrix.read(path)
    except ValueError as e:
        raise UsageError(str(e)) from None


def cmd_report(args) -> int:
    _read_matrix(args.dir)
    _write_report(args.dir)
    return EXIT_OK


def cmd_repro(args) -> int:
    from . import backends, fixes as fix_registry, repro
    from .report import repro_name

    try:
        backends.get(args.backend)
        fix_names = fix_registry.parse(args.fixes)
        cases = {c.case_id: c for c in repro.load_run_cases(args.dir)}
    except (KeyError, ValueError) as e:
        raise UsageError(str(e.args[0])) from None
    if args.case_id not in cases:
        raise UsageError(f"case {args.case_id!r} is not in {args.dir / 'cases.json'}")
    fixes = ",".join(fix_names)
    df = _read_matrix(args.dir) if (args.dir / "matrix.json").exists() else None
    status, message = "?", ""
    if df is not None:
        hit = df[(df.case_id == args.case_id) & (df.backend == args.backend) & (df.fixes == fixes)]
        if len(hit):
            status, message = hit.iloc[0]["status"], hit.iloc[0]["message"] or ""
    text = repro.script(cases[args.case_id], args.backend, fixes, status, message,
                        repro.run_runtime_library(args.dir))
    out = args.dir / "repro"
    out.mkdir(exist_ok=True)
    path = out / repro_name(args.case_id, args.backend, fixes)
    path.write_text(text)
    print(path)
    return EXIT_OK


def cmd_diff(args) -> int:
    from .diff import diff

    table = diff(_read_matrix(args.old), _read_matrix(args.new))
    out = args.out or args.new / "diff.csv"
    table.to_csv(out, index=False)
    counts = table["change"].value_counts()
    shown = table[table["change"] != "same"]
    if len(shown):
        print(shown.to_string(index=False, max_colwidth=60))
    print(", ".join(f"{k} {int(counts.get(k, 0))}" for k in
                    ("regressed", "fixed", "changed", "added", "removed", "same")) + f" -> {out}")
    return EXIT_FINDINGS if counts.get("regressed", 0) else EXIT_OK


def cmd_bundle(args) -> int:
    from .bundle import BundleError, write
    from .status import Status

    unknown = [s for s in args.select or [] if s not in {x.value for x in Status}]
    if unknown:
        raise UsageError(f"bundle: unknown status {unknown[0]!r}")
    try:
        info = write(args.run_dir, args.out, args.lane, args.select)
    except BundleError as e:
        raise UsageError(str(e)) from None
    print(f"{args.out}: {info['cells']} cells, {info['bytes'] / 2**20:.1f} MiB; on the device: "
          f"sh {args.out}/run.sh RESULTS, then python -m harness ingest {args.run_dir} RESULTS "
          f"--device-name NAME")
    return EXIT_OK


def cmd_ingest(args) -> int:
    from . import matrix
    from .ingest import IngestError, ingest

    try:
        rows, device = ingest(args.run_dir, args.results, args.device_name)
    except IngestError as e:
        raise UsageError(str(e)) from None
    print(f"{len(rows)} cells ingested as {rows[0]['backend'] if rows else '?'} on "
          f"{'; '.join(device['described']) or 'an unnamed device'}")
    _print_summary(matrix.read(args.run_dir), args.run_dir)
    _write_report(args.run_dir)
    return EXIT_OK


def cmd_runtime_build(args) -> int:
    from .runtimes import RuntimeBuildError, vulkan

    try:
        m = vulkan.build(args.source, args.jobs, args.cache_dir,
                         log=lambda line: print(f"runtime build: {line}", file=sys.stderr))
    except RuntimeBuildError as e:
        raise UsageError(str(e)) from None
    how = "cache hit" if m.cached else f"built in {m.build_seconds:g} s {m.phase_seconds}"
    what = m.runner if args.name == "runner" else m.library
    print(f"{what} ({how}; source {m.source_commit[:12]}, sha256 {m.library_sha256[:16]})")
    if m.skew_note:
        print(f"note: {m.skew_note}")
    return EXIT_OK


def cmd_runtime_status(args) -> int:
    from .runtimes.load import status_lines

    print("\n".join(status_lines(args.cache_dir)))
    return EXIT_OK


def cmd_run(args) -> int:
    from . import generate, runner
    from .cache import default_dir
    from .runtimes import RuntimeBuildError
    from .runtimes.load import resolve as resolve_runtime
    from .spec import CaseError, load_cases

    # Everything that can be wrong with the input is checked before the run folder is touched.
    if args.resume:
        out = args.resume
        if not (out / "run.json").exists() or not (out / "cases.json").exists():
            raise UsageError(f"--resume {out}: not a convconf run folder (no run.json/cases.json)")
        config, cases = runner.load_run(out)
        if args.jobs:
            config.jobs = args.jobs
        if config.vulkan_runtime and not Path(config.vulkan_runtime).is_file():
            raise UsageError(f"--resume {out}: its Vulkan runtime {config.vulkan_runtime} is gone")
        from . import journal

        read = journal.read(out / "journal.jsonl")
        for problem in read.problems:
            print(f"convconf: warning: {problem}", file=sys.stderr)
        if read.problems:
            journal.Journal(out / "journal.jsonl").mend(read)
        done_rows = read.rows
        print(f"resuming {out}: {len(done_rows)} cells already done", file=sys.stderr)
    else:
        if not args.out:
            raise UsageError("run: --out DIR is required (or --resume DIR)")
        out = args.out
        backends = [b.strip() for b in args.backends.split(",") if b.strip()]
        if not backends:
            raise UsageError("run: --backends is empty")
        try:
            fixes = runner.validate_names(backends, args.fixes)
        except KeyError as e:
            raise UsageError(str(e.args[0])) from None
        try:
            listed = [c for f in args.cases for c in load_cases(f)]
        except CaseError as e:
            raise UsageError(str(e)) from None
        if out.exists() and (out / "journal.jsonl").exists() and not args.overwrite:
            raise UsageError(f"{out} already holds a run; use --resume {out} to continue it "
                             f"or --overwrite to replace it")
        n = args.max_examples if args.max_examples is not None else generate.PROFILES[args.profile]
        if n < 0:
            raise UsageError("run: --max-examples must be >= 0")
        jobs = args.jobs or runner.default_jobs()
        if jobs < 1:
            raise UsageError("run: --jobs must be >= 1")
        cache_dir = None if args.no_cache else str(args.cache_dir or default_dir())
        try:
            vulkan_runtime = resolve_runtime(args.vulkan_runtime) if "vulkan" in backends else None
        except RuntimeBuildError as e:
            raise UsageError(str(e)) from None
        config = runner.RunConfig(backends=backends, fixes=fixes, profile=args.profile,
                                  max_examples=n, seed=args.seed, case_files=list(args.cases),
                                  timeout=args.timeout, jobs=jobs, cache_dir=cache_dir,
                                  vulkan_runtime=vulkan_runtime)
        cases = listed + [c for c in generate.generate(n, args.seed)
                          if c.case_id not in {x.case_id for x in listed}]
        runner.start(out, config, cases)
        done_rows = []

    df = runner.execute(out, config, cases, progress=not args.no_progress, done_rows=done_rows)
    _print_summary(df, out)
    if not args.no_report:
        _write_report(out)
    if args.save_failures:
        from .corpus import save_failures

        added = save_failures(df, cases, args.save_failures)
        print(f"{args.save_failures}: {added} new failing case(s) added")
    if args.fail_on_mismatch:
        from .status import OK

        if (~df["status"].isin([s.value for s in OK])).any():
            return EXIT_FINDINGS
    return EXIT_OK


def _print_summary(df, out: Path) -> None:
    from . import matrix

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
    skew = _vulkan_header(out).get("skew_note")
    failed = df[(df.backend == "vulkan") & df.status.isin(["RUNTIME_ERROR", "CRASH", "MISMATCH"])]
    if skew and len(failed):
        print(f"note: {len(failed)} Vulkan cell(s) failed at runtime; {skew}")
    print(f"{len(df)} cells -> {out / 'matrix.csv'}")


def _vulkan_header(out: Path) -> dict:
    import json

    try:
        return json.loads((out / "run.json").read_text()).get("vulkan") or {}
    except (OSError, ValueError):
        return {}


def _write_report(out: Path) -> None:
    from . import matrix, report, repro

    scripts = repro.write_for_run(out, matrix.read(out))
    path = report.write(out)
    print(f"report -> {path} ({scripts} repro scripts in {out / 'repro'})")


def main(argv: list[str] | None = None) -> int:
    _quiet()
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        return args.func(args)
    except UsageError as e:
        print(f"convconf: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("convconf: interrupted; finished cells are in the journal (resume with --resume)",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
