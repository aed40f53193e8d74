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
    p.add_argument("--backend", help="the lane's backend (xnnpack, vulkan)")
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
    b.add_argument("--good", required=True, metavar="REF", help="the older end (tag, commit)")
    b.add_argument("--bad", required=True, metavar="REF", help="the newer end")
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


def _check(args) -> None:
    if not args.probe and not (args.cases and args.backend):
        raise UsageError(f"{args.command}: name the cell (--cases FILE --backend NAME) or --probe")
    if args.probe and args.cases:
        raise UsageError(f"{args.command}: --probe or --cases, not both")
    if args.cases and not Path(args.cases).is_file():
        raise UsageError(f"{args.cases}: no such case file")


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

    _check(args)
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


def cmd_step(args) -> int:
    from harness.run.bisect_step import ABORT, SKIP, run_step
    from harness.runtimes.git_source import GitError, Repo

    _check(args)
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
