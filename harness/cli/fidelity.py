"""``harness fidelity WHEEL_RUN TREE_RUN``: the overlay's fidelity, measured -- a run on a
release's own wheel against a run at that release's tag over the installed wheel, every cell
where they differ with its reason class (results/fidelity.py) -> OUT/fidelity.{csv,md,json}."""

from __future__ import annotations

from pathlib import Path

from harness.cli.common import EXIT_FINDINGS, EXIT_OK, UsageError, say, shown


def add_parsers(sub) -> None:
    f = sub.add_parser("fidelity", help="a release's own wheel vs a run at its tag over the "
                       "installed wheel: every cell where they differ, with its reason")
    f.add_argument("wheel_run", type=Path, metavar="WHEEL_RUN",
                   help="a run on the release's own wheel (its own venv)")
    f.add_argument("tree_run", type=Path, metavar="TREE_RUN",
                   help="the same cases run at the release's tag (run --executorch vX --source ..)")
    f.add_argument("--out", type=Path, metavar="DIR",
                   help="where fidelity.{csv,md,json} go (default: TREE_RUN)")
    f.set_defaults(func=cmd_fidelity)


def cmd_fidelity(args) -> int:
    from harness.results import fidelity

    try:
        result = fidelity.compare(args.wheel_run, args.tree_run)
    except fidelity.FidelityError as e:
        raise UsageError(f"fidelity: {e}") from None
    paths = fidelity.write(result, args.out or args.tree_run)
    say(f"{result.tree} vs {result.wheel}: {result.summary_line()}")
    for reason, n in result.counts().items():
        say(f"  {reason} {n}{' (by design)' if reason in fidelity.EXPECTED else ''}: "
            f"{fidelity.REASONS[reason]}", indent=4)
    say(f"-> {', '.join(shown(p) for p in paths)}")
    return EXIT_FINDINGS if result.unexpected else EXIT_OK
