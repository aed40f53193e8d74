"""Commit bisection: ``bisect`` (git's own, over an ExecuTorch repository) and ``bisect-step``
(one commit; what ``git bisect run`` calls, and what a developer runs by hand). Not the
release sweep: that is ``nox -s releases``."""

from __future__ import annotations

import sys
from pathlib import Path

from harness.cli.common import EXIT_OK, UsageError


def _cell_args(p, step: bool) -> None:
    p.add_argument("--cases", metavar="FILE.json", help="the case file holding the cell")
    p.add_argument("--case", metavar="ID", help="its case id (or a prefix); not needed when "
                   "the file holds one case")
    p.add_argument("--run", metavar="DIR", help="a run folder to take the cell from: with "
                   "--finding F-xxxxxxxx its representative cell (case and lane), or with --case "
                   "ID one of its cases (name the lane with --backend/--fixes)")
    p.add_argument("--finding", metavar="F-ID", help="with --run: a finding id of its "
                   "findings.json (or a prefix)")
    p.add_argument("--backend", help="the lane's backend (xnnpack, vulkan); with --run-diff: "
                   "only that backend's flips")
    p.add_argument("--fixes", nargs="+", default=[], metavar="FIX", help="the lane's fix set")
    p.add_argument("--probe", metavar="CMD", help="instead of a cell: a shell command run in the "
                   "commit's tree, its last stdout line the outcome (a failing command: skip)")
    p.add_argument("--source", required=True, metavar="DIR",
                   help="an ExecuTorch git repository (a checkout or a bare git dir)")
    p.add_argument("--stage", choices=["lowering", "execution", "probe"],
                   help="compare outcomes at this stage" + (
                       "" if step else " (default: the earliest at which the ends differ)"))
    p.add_argument("--cache", dest="cache_dir", help="cache folder (default: $CONVCONF_CACHE)")


def add_parsers(sub) -> None:
    b = sub.add_parser("bisect", help="the first ExecuTorch commit that broke or fixed a cell "
                       "(git bisect run; the release sweep is `nox -s releases`)")
    _cell_args(b, step=False)
    b.add_argument("--good", metavar="REF", help="the older end (tag, commit)")
    b.add_argument("--bad", metavar="REF", help="the newer end")
    b.add_argument("--run-diff", nargs=2, type=Path, metavar=("OLD_RUN", "NEW_RUN"),
                   help="instead of one cell: every cell that flipped between two runs at "
                   "ExecuTorch commits (harness run --executorch), one git bisect run per "
                   "distinct flip; ends with the table cells -> first commit (PR)")
    b.add_argument("--max-flips", type=int, metavar="N", help="with --run-diff: bisect only "
                   "the N largest flips (with --backend: of that backend's)")
    b.add_argument("--out", required=True, type=Path, metavar="DIR",
                   help="writes DIR/bisect.json, bisect.html, steps/, git-bisect.log")
    b.set_defaults(func=cmd_bisect)

    s = sub.add_parser("bisect-step", help="one bisect step at one commit: exit 0 (the --good "
                       "end's outcome), 1 (the --bad end's), 125 (skip: cannot be evaluated "
                       "faithfully, reason printed)")
    _cell_args(s, step=True)
    s.add_argument("--commit", required=True, metavar="REF")
    s.add_argument("--old-outcome", metavar="OUTCOME", help="the --good end's outcome")
    s.add_argument("--new-outcome", metavar="OUTCOME", help="the --bad end's outcome")
    s.add_argument("--record", metavar="DIR", help="write the step (and the cell's row) here")
    s.add_argument("--work", metavar="DIR", help="scratch folder (overlay, row)")
    s.set_defaults(func=cmd_step, stage_default="lowering")


def _check(args, where: Path | None = None) -> None:
    """Bad input as one line; a cell named from a run folder (--run) becomes a one-case file
    ``where/cell.json`` (what every step reads), --backend/--fixes from the finding."""
    if args.run or args.finding:
        _from_run(args, where)
    if not args.probe and not (args.cases and args.backend):
        raise UsageError(f"{args.command}: name the cell (--cases FILE --backend NAME, --run DIR "
                         f"--finding F-ID, --run DIR --case ID --backend NAME) or --probe")
    if args.probe and args.cases:
        raise UsageError(f"{args.command}: --probe or --cases, not both")
    if args.cases and not Path(args.cases).is_file():
        raise UsageError(f"{args.cases}: no such case file")


def _from_run(args, where: Path | None) -> None:
    import json
    import tempfile

    from harness.runfolder import RunFolder

    if not args.run:
        raise UsageError(f"{args.command}: --finding needs --run DIR (the run folder it is in)")
    if args.probe or args.cases:
        raise UsageError(f"{args.command}: --run names the cell: no --cases or --probe with it")
    run = Path(args.run)
    if not run.is_dir():
        raise UsageError(f"{run}: no such run folder")
    if args.finding:
        path = run / "findings.json"
        if not path.is_file():
            raise UsageError(f"{run}: no findings.json (run `harness findings {run}` first)")
        try:
            found = json.loads(path.read_text()).get("findings", [])
        except ValueError as e:
            raise UsageError(f"{path}: unreadable ({e})") from None
        wanted = args.finding.lower()
        # an exact id first: a split finding's first part keeps its id F-x, which is a prefix of
        # its other parts' F-x.yyyy, so a prefix alone could never pick it
        hits = [f for f in found if f.get("id", "").lower() == wanted] or \
            [f for f in found if f.get("id", "").lower().startswith(wanted)]
        if len(hits) != 1:
            have = ", ".join(f.get("id", "?") for f in (hits if len(hits) > 1 else found)[:6]) \
                or "none"
            raise UsageError(f"{'no' if not hits else len(hits)} findings {args.finding!r} in "
                             f"{path} (findings: {have}{', ...' if len(found) > 6 else ''})")
        ex = hits[0].get("example") or {}
        if not ex.get("case"):
            raise UsageError(f"finding {hits[0]['id']} in {path} has no representative case")
        backend = ex.get("backend", hits[0].get("backend", "")).split("@")[0]
        fixes = [f for f in str(ex.get("fixes") or "").split(",") if f]
        if args.backend and args.backend != backend or args.fixes and sorted(args.fixes) != \
                sorted(fixes):
            raise UsageError(f"finding {hits[0]['id']} is a cell of lane {backend}"
                             f"{'+' + ','.join(fixes) if fixes else ''}: leave --backend/--fixes "
                             f"out or name that lane")
        args.backend, args.fixes = backend, fixes
        case = ex["case"]
        case_id = ex.get("case_id")
    else:
        if not args.case:
            raise UsageError(f"{args.command}: --run DIR names the cell with --finding F-ID or "
                             f"--case ID")
        try:
            cases = RunFolder(run).cases()
        except ValueError as e:
            raise UsageError(str(e)) from None
        hits = [c for c in cases if c.case_id == args.case] or \
            [c for c in cases if c.case_id.startswith(args.case)]
        if len(hits) != 1:
            raise UsageError(f"{'no' if not hits else len(hits)} cases {args.case!r} in "
                             f"{run / 'cases.json'}")
        case, case_id = hits[0].to_dict(), hits[0].case_id
    where = Path(where) if where else Path(tempfile.mkdtemp(prefix="convconf-cell-"))
    where.mkdir(parents=True, exist_ok=True)
    (where / "cell.json").write_text(json.dumps([case], indent=1) + "\n")
    args.cases, args.case = str(where / "cell.json"), None
    args.cell_from = {"run": str(run.resolve()), "finding": hits[0].get("id") if args.finding
                      else None, "case_id": case_id}


def _evaluator(args, repo, work: Path):
    from harness.run.bisect_step import evaluator_for

    try:
        return evaluator_for(args, repo, work)
    except (ValueError, KeyError) as e:
        raise UsageError(str(e).strip("'\"")) from None


def cmd_bisect(args) -> int:
    from harness.results import bisect_page
    from harness.run import bisect
    from harness.runtimes.git_source import GitError, Repo

    if args.run_diff:
        return _run_diff(args)
    if not (args.good and args.bad):
        raise UsageError("bisect: name the ends (--good REF --bad REF) or --run-diff OLD NEW")
    _check(args, args.out)
    try:
        repo = Repo(args.source)
        repo.rev(args.good), repo.rev(args.bad)
    except GitError as e:
        raise UsageError(str(e)) from None
    args.out.mkdir(parents=True, exist_ok=True)
    ev = _evaluator(args, repo, args.out / ".work" / "ends")
    try:
        result = bisect.run(ev, repo, args.good, args.bad, args.out, args.stage,
                            log=lambda s: print(s, flush=True))  # stderr: only the error line
    except (bisect.BisectError, GitError) as e:
        raise UsageError(str(e)) from None
    page = bisect_page.write(args.out, result)
    for s in result["steps"]:
        said = s["outcome"] if s["outcome"] is not None else f"skip ({s['skip_reason']})"
        print(f"  step {s['commit'][:12]}: {said} [{s['seconds']} s] {s['subject'][:70]}")
    for line in bisect.console_lines(result):
        print(line)
    print(f"{result['evaluated_steps']} evaluated steps (budget {result['step_budget']}), "
          f"{result['skipped_steps']} skipped, {result['seconds']} s -> {args.out / 'bisect.json'}, "
          f"{page}")
    return EXIT_OK


def _run_diff(args) -> int:
    """--run-diff OLD NEW: every flip between the two runs bisected (run/bisect_flips.py)."""
    from harness.run import bisect_flips

    if args.good or args.bad or args.cases or args.run or args.probe or args.finding:
        raise UsageError("bisect: --run-diff takes its ends and cells from the two runs: no "
                         "--good/--bad/--cases/--run/--probe/--finding with it")
    if args.max_flips is not None and args.max_flips < 1:
        raise UsageError("bisect: --max-flips must be >= 1")
    for run in args.run_diff:
        if not (run / "run.json").is_file():
            raise UsageError(f"{run}: not a run folder (no run.json)")
    try:
        summary = bisect_flips.run(*args.run_diff, Path(args.source), args.out, args.cache_dir,
                                   args.stage, log=lambda s: print(s, flush=True),
                                   limit=args.max_flips, backend=args.backend)
    except bisect_flips.FlipError as e:
        raise UsageError(str(e)) from None
    for line in bisect_flips.table_lines(summary):
        print(line)
    print(f"{summary['evaluated_steps']} evaluated steps over "
          f"{summary['distinct_commits_evaluated']} distinct commits (lowerings: "
          f"{summary['lowerings']['served']} served, {summary['lowerings']['lowered']} lowered), "
          f"{summary['seconds']} s -> {args.out / 'bisect.json'}")
    return EXIT_OK


def cmd_step(args) -> int:
    from harness.run.bisect_step import ABORT, SKIP, run_step
    from harness.runtimes.git_source import GitError, Repo

    _check(args, Path(args.work) if args.work else None)
    args.stage = args.stage or "lowering"
    try:
        Repo(args.source).rev(args.commit)
    except GitError as e:
        raise UsageError(str(e)) from None
    try:
        return run_step(args)
    except (ValueError, KeyError) as e:
        raise UsageError(str(e).strip("'\"")) from None
    except GitError as e:  # mid-bisect: a commit that cannot be read is skipped, said why
        print(f"bisect-step: skip: {e}", file=sys.stderr)
        return SKIP
    except Exception as e:  # noqa: BLE001 -- a harness failure is no verdict on the commit:
        # exit 1 would read "bad" to git bisect run; 128 aborts the bisection instead
        print(f"bisect-step: aborted: {type(e).__name__}: {e}", file=sys.stderr)
        return ABORT
