"""Commands over finished run folders: report, repro, bug-report, expect, corpus, shrink,
diagnose, merge, diff."""

from __future__ import annotations

from harness.lane import Lane

from pathlib import Path

from harness.cli.common import (EXIT_FINDINGS, EXIT_OK, UsageError, check_known_issues,
                                print_summary, read_matrix, write_report)
from harness.results.diff import CHANGES
from harness.status import Status


def add_parsers(sub) -> None:
    rep = sub.add_parser("report", help="write DIR/report.html from a run folder")
    rep.add_argument("dir", type=Path)
    rep.set_defaults(func=cmd_report)

    rp = sub.add_parser("repro", help="write a standalone script that reproduces one cell")
    rp.add_argument("case_id")
    rp.add_argument("--backend", required=True)
    rp.add_argument("--fixes", default="")
    rp.add_argument("--dir", type=Path, required=True, help="the run folder holding the case")
    rp.set_defaults(func=cmd_repro)

    br = sub.add_parser("bug-report", help="one finding as GitHub markdown for an upstream issue "
                        "(environment, self-contained script, expected vs actual, picture, fix)")
    br.add_argument("dir", type=Path, metavar="RUN_DIR")
    br.add_argument("finding_id", metavar="FINDING_ID")
    br.add_argument("--out", type=Path, metavar="FILE.md", help="write it here (default: stdout)")
    br.add_argument("--releases", type=Path, nargs="+", metavar="RUN",
                    help="bisect runs, one run folder per release (oldest first): which have it")
    br.set_defaults(func=cmd_bug_report)

    ex = sub.add_parser("expect", help="a run's findings as an expectations file (--baseline); "
                        "an existing --out keeps its earlier first-seen dates and minimal cases")
    ex.add_argument("dir", type=Path)
    ex.add_argument("--out", type=Path, required=True)
    ex.set_defaults(func=cmd_expect)

    co = sub.add_parser("corpus", help="a run against the corpus' expected statuses for its "
                        "executorch release (cases/*.json expect / expect_by_release)")
    co.add_argument("dir", type=Path)
    co.add_argument("--cases", type=Path, nargs="+", metavar="FILE",
                    help="corpus files (default: the run's own --cases files)")
    co.set_defaults(func=cmd_corpus)

    sh = sub.add_parser("shrink", help="shrink one case per finding of a finished run")
    sh.add_argument("dir", type=Path)
    sh.add_argument("--seconds", type=float, default=60.0, help="budget per finding")
    sh.set_defaults(func=cmd_shrink)

    dg = sub.add_parser("diagnose", help="what decides each finding of a finished run: its "
                        "representative's one-step variants run as real cells in its lane")
    dg.add_argument("dir", type=Path, metavar="RUN_DIR")
    dg.add_argument("--budget", type=float, default=90.0, metavar="SECONDS",
                    help="seconds per finding (default 90)")
    dg.add_argument("--finding", nargs="+", metavar="FINDING_ID",
                    help="only these findings (default: all of them)")
    dg.set_defaults(func=cmd_diagnose)

    m = sub.add_parser("merge", help="combine the shard folders of one run (run --shard K/N)")
    m.add_argument("dirs", type=Path, nargs="+", metavar="SHARD_DIR")
    m.add_argument("--out", type=Path, required=True)
    m.add_argument("--no-report", action="store_true")
    m.set_defaults(func=cmd_merge)

    d = sub.add_parser("diff", help="cells that regressed / got fixed / changed between two runs")
    d.add_argument("old", type=Path)
    d.add_argument("new", type=Path)
    d.add_argument("more", type=Path, nargs="*", metavar="RUN",
                   help="further runs, oldest first (e.g. one per executorch release): the "
                   "releases view, OUT/releases.html, .csv and .json")
    d.add_argument("--releases", action="store_true", help="the releases view for two runs too")
    d.add_argument("--out", type=Path, help="diff.csv path (default: NEW/diff.csv); for the "
                   "releases view a folder (default: the last run's)")
    d.add_argument("--lanes", nargs=2, metavar=("OLD_LANE", "NEW_LANE"),
                   help="compare lane OLD_LANE of OLD with lane NEW_LANE of NEW (OLD and NEW may "
                   "be the same run, e.g. RUN RUN --lanes vulkan vulkan@h200)")
    d.set_defaults(func=cmd_diff)


def cmd_merge(args) -> int:
    from harness.run.merge import MergeError, merge

    check_known_issues()
    try:
        n = merge(args.dirs, args.out)
    except MergeError as e:
        raise UsageError(f"merge: {e}") from None
    print(f"{len(args.dirs)} shards merged: {n} cells")
    print_summary(read_matrix(args.out), args.out)
    write_report(args.out, html=not args.no_report)
    return EXIT_OK


def cmd_report(args) -> int:
    read_matrix(args.dir)
    write_report(args.dir)
    return EXIT_OK


def cmd_bug_report(args) -> int:
    from harness.results.bug_report import render

    read_matrix(args.dir)  # not a run folder: one line
    for d in args.releases or []:
        read_matrix(d)
    check_known_issues()
    if args.out is not None and args.out.is_dir():
        raise UsageError(f"bug-report: --out {args.out} is a folder; name a .md file")
    try:
        text = render(args.dir, args.finding_id, args.out, args.releases)
    except ValueError as e:  # BugReportError, RunFolderError: one line
        raise UsageError(str(e)) from None
    if args.out is None:
        print(text, end="")
    else:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
        print(f"bug report for {args.finding_id} -> {args.out}")
    return EXIT_OK


def cmd_expect(args) -> int:
    import json

    from harness.results.baseline import BaselineError, expectations, load

    read_matrix(args.dir)  # a bad folder is one line
    earlier = None
    if args.out.exists():  # refreshed: what it knew first stays (never a file it cannot read)
        try:
            earlier = load(args.out)
        except BaselineError as e:
            raise UsageError(f"expect: --out {args.out} is there and is not an expectations "
                             f"file ({str(e).split(': ', 1)[-1]}); not overwritten") from None
    known = expectations(args.dir, earlier)
    args.out.write_text(json.dumps(known, indent=1, sort_keys=True) + "\n")
    print(f"{len(known['findings'])} known findings -> {args.out}")
    return EXIT_OK


def cmd_corpus(args) -> int:
    from harness.results.corpus import check
    from harness.runfolder import RunFolder
    from harness.spec import CaseError

    df = read_matrix(args.dir)
    try:
        header = RunFolder(args.dir).header()
    except ValueError as e:
        raise UsageError(str(e)) from None
    release = header.executorch
    paths = args.cases or [Path(p) for p in header.case_files]
    if not paths:
        raise UsageError(f"{args.dir}: the run read no case files; name them with --cases")
    try:
        same, moved, absent = check(df, paths, release)
    except (CaseError, ValueError) as e:
        raise UsageError(str(e)) from None
    print(f"corpus on executorch {release}: {same} cells as expected, {len(moved)} moved"
          + (f", {absent} expected cells not in the run" if absent else ""))
    for line in moved:
        print(f"  {line}")
    return EXIT_FINDINGS if moved else EXIT_OK


def cmd_shrink(args) -> int:
    from harness.run import runner
    from harness.run.shrink import shrink_all

    df = read_matrix(args.dir)
    check_known_issues()
    try:
        config, _ = runner.load_run(args.dir)
    except ValueError as e:
        raise UsageError(str(e)) from None
    shrink_all(args.dir, df, args.seconds, config)
    write_report(args.dir)
    return EXIT_OK


def cmd_diagnose(args) -> int:
    from harness.run import runner

    df = read_matrix(args.dir)
    check_known_issues()
    if args.budget < 0:
        raise UsageError("diagnose: --budget must be >= 0")
    from harness.results import findings
    from harness.run.diagnose import diagnose_all

    ids = [f.id for f in findings.find(df, args.dir)]
    if not ids:
        raise UsageError(f"diagnose: {args.dir} has no findings (every cell is PASS or NO_RUNTIME)")
    unknown = [i for i in args.finding or [] if i not in ids]
    if unknown:
        raise UsageError(f"diagnose: no finding {unknown[0]!r} in {args.dir} (its findings: "
                         f"{', '.join(ids)})")
    try:
        config, _ = runner.load_run(args.dir)
    except ValueError as e:
        raise UsageError(str(e)) from None
    diagnose_all(args.dir, df, args.budget, config, only=args.finding)
    write_report(args.dir)
    return EXIT_OK


def cmd_repro(args) -> int:
    from harness.stages import backends
    from harness.stages import fixes as fix_registry
    from harness.results import repro
    from harness.runfolder import RunFolder

    try:
        backends.get(args.backend)
        fix_names = fix_registry.parse(args.fixes)
        cases = {c.case_id: c for c in repro.load_run_cases(args.dir)}
    except (KeyError, ValueError) as e:
        raise UsageError(str(e.args[0])) from None
    if args.case_id not in cases:
        raise UsageError(f"case {args.case_id!r} is not in {args.dir / 'cases.json'}")
    fixes = ",".join(fix_names)
    df = read_matrix(args.dir) if (args.dir / "matrix.json").exists() else None
    status, message = "?", ""
    if df is not None:
        hit = df[(df.case_id == args.case_id) & (df.backend == args.backend) & (df.fixes == fixes)]
        if len(hit):
            status, message = hit.iloc[0]["status"], hit.iloc[0]["message"] or ""
    text = repro.script(cases[args.case_id], args.backend, fixes, status, message,
                        repro.run_runtime_library(args.dir, Lane.of(args.backend, fixes)))
    path = RunFolder(args.dir).repro_path(args.case_id, args.backend, fixes)
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    print(path)
    return EXIT_OK


def cmd_releases(args) -> int:
    from harness.results import releases

    dirs = [args.old, args.new, *args.more]
    try:
        runs = releases.load(dirs)
    except ValueError as e:
        raise UsageError(str(e)) from None
    out = args.out or dirs[-1]
    table, moves = releases.write(runs, out)
    print(table.to_string())
    counts = moves["change"].value_counts() if len(moves) else {}
    for (a, b), part in (moves.groupby(["from", "to"], sort=False) if len(moves) else []):
        kinds = part["change"].value_counts()
        print(f"{a} -> {b}: " + ", ".join(f"{k} {int(kinds.get(k, 0))}" for k in CHANGES[:-1]))
    print(f"releases view -> {out / 'releases.html'}")
    return EXIT_FINDINGS if counts.get("regressed", 0) else EXIT_OK


def cmd_diff(args) -> int:
    from harness.results.diff import diff, lanes

    if args.more or args.releases:
        if args.lanes:
            raise UsageError("diff: --lanes compares two runs; not with the releases view")
        return cmd_releases(args)

    old, new = read_matrix(args.old), read_matrix(args.new)
    from harness.cli.common import say, shown
    from harness.results.diff import run_label

    say(f"{shown(args.old)}: {run_label(args.old)} -> {shown(args.new)}: {run_label(args.new)}")
    if args.lanes:
        try:
            old, new, unpaired = lanes(old, new, *args.lanes)
        except ValueError as e:
            raise UsageError(str(e)) from None
        print(f"{len(old)} cells in both lanes; {unpaired} in only one (not executed there)")
    table = diff(old, new)
    out = args.out or args.new / ("diff-" + "-vs-".join(args.lanes) + ".csv" if args.lanes
                                  else "diff.csv")
    table.to_csv(out, index=False)
    counts = table["change"].value_counts()
    shown = table[table["change"] != "same"]
    if len(shown):
        print(shown.to_string(index=False, max_colwidth=60))
    if "max_abs_error_old" in table:
        # Same wrong verdict, different wrong numbers: e.g. a shader reading memory it never wrote.
        same_bad = table[(table["change"] == "same") & (table["new"] == Status.MISMATCH)
                         & (table["max_abs_error_old"] != table["max_abs_error_new"])]
        if len(same_bad):
            print("same status, different values:")
            print(same_bad[["case_id", "backend", "fixes", "new", "max_abs_error_old",
                            "max_abs_error_new"]].to_string(index=False, max_colwidth=60))
    print(", ".join(f"{k} {int(counts.get(k, 0))}" for k in CHANGES) + f" -> {out}")
    return EXIT_FINDINGS if counts.get("regressed", 0) else EXIT_OK
