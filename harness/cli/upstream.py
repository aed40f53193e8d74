"""``harness upstream RUN --out DIR``: every finding no upstream thread tracks, as an issue draft
folder (results/upstream.py), and index.md ordered by what a maintainer would fix first."""

from __future__ import annotations

from pathlib import Path

from harness.cli.common import EXIT_OK, UsageError, check_known_issues, read_matrix


def add_parsers(sub) -> None:
    up = sub.add_parser("upstream", help="one upstream issue draft folder per unreported finding "
                        "(issue.md, repro.py, patch.diff, validation.log, picture) and index.md")
    up.add_argument("dir", type=Path, metavar="RUN_DIR")
    up.add_argument("--out", type=Path, required=True, metavar="DIR")
    up.add_argument("--run-repros", action="store_true",
                    help="run each repro.py alone (fresh Python, the run's Vulkan plug-in by "
                    "$VULKAN_RUNTIME) and put what it printed into the draft")
    up.set_defaults(func=cmd_upstream)


def cmd_upstream(args) -> int:
    from harness.results import upstream

    read_matrix(args.dir)  # not a run folder: one line
    check_known_issues()
    try:
        upstream.check_out(args.out)
        drafts = upstream.build(args.dir)
    except ValueError as e:  # UpstreamError, RunFolderError: one line
        raise UsageError(str(e)) from None
    if args.run_repros:
        from harness.run.upstream import run_repros

        run_repros(args.dir, drafts)
    upstream.write(args.dir, args.out, drafts)
    lines = sorted(d.repro_lines for d in drafts)
    median = lines[len(lines) // 2] if lines else 0
    print(f"{len(drafts)} draft(s) -> {args.out}/index.md: "
          f"{sum(d.validated for d in drafts)} with a validated patch, "
          f"{sum(len(d.single_fixes) == 1 for d in drafts)} with a single fix, "
          f"{sum(bool(d.single_fixes) for d in drafts)} with at least one fix alone clearing it; "
          f"repro lines median {median}, max {max(lines, default=0)}"
          + (f"; {sum(d.repro_status == d.stated for d in drafts)} repro(s) printed the stated "
             "status" if args.run_repros else ""))
    return EXIT_OK
