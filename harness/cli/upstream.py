"""``harness upstream RUN --out DIR``: every finding no upstream thread tracks, as an issue draft
folder (results/upstream.py), and index.md ordered by what a maintainer would fix first.

``--validate-at REF --source GITDIR`` (or ``--validate-at CHECKOUT``) also runs each draft's
patch.diff (a graph fix's upstream form) at that ExecuTorch tree and at the tree with the diff
applied (run/upstream.py, through ``harness run --executorch-tree``) and puts the result into its
validation.log; ``--patches FIX,...`` does that for the named fixes' diffs without a run."""

from __future__ import annotations

import os
from pathlib import Path

from harness.cli.common import EXIT_OK, UsageError, check_known_issues, read_matrix


def add_parsers(sub) -> None:
    up = sub.add_parser("upstream", help="one upstream issue draft folder per unreported finding "
                        "(issue.md, repro.py, patch.diff, validation.log, picture) and index.md")
    up.add_argument("dir", type=Path, metavar="RUN_DIR", nargs="?")
    up.add_argument("--out", type=Path, required=True, metavar="DIR")
    up.add_argument("--run-repros", action="store_true",
                    help="run each repro.py alone (fresh Python, the run's Vulkan plug-in by "
                    "$VULKAN_RUNTIME) and put what it printed into the draft")
    up.add_argument("--python", metavar="PYTHON",
                    help="with --run-repros: the interpreter each repro.py runs with (e.g. a "
                    "fresh venv's bin/python with only torch and executorch installed; default: "
                    "this one, isolated with -I)")
    up.add_argument("--validate-at", metavar="REF_OR_CHECKOUT",
                    help="run each draft's upstream diff at this ExecuTorch commit (with "
                    "--source) or checkout, clean and patched, on the finding's cells and the "
                    "fix's corpus cells, and ExecuTorch's tests beside the patched code")
    up.add_argument("--source", type=Path, metavar="GITDIR",
                    help="the ExecuTorch git repository of --validate-at REF (a bare one too)")
    up.add_argument("--patches", metavar="FIX,...",
                    help="with --validate-at and no RUN_DIR: validate these fixes' upstream "
                    "diffs (cases/upstream/patches/FIX.diff), OUT/FIX/validation.log each")
    up.add_argument("--no-et-tests", action="store_true",
                    help="with --validate-at: leave out ExecuTorch's own tests")
    up.set_defaults(func=cmd_upstream)


def check_validate_args(args) -> list[str]:
    """The --validate-at options, checked (UsageError: one line) -> the --patches fixes."""
    from harness.results import upstream
    from harness.stages import fixes

    if (args.source or args.patches) and not args.validate_at:
        raise UsageError("--source and --patches go with --validate-at")
    if args.validate_at and args.source is None and not Path(args.validate_at).is_dir():
        raise UsageError(f"--validate-at {args.validate_at}: not a checkout; a commit needs "
                         "--source GITDIR")
    if args.source is not None and not args.source.exists():
        raise UsageError(f"--source {args.source}: no such repository")
    chosen = [p.strip() for p in (args.patches or "").split(",") if p.strip()]
    for fix in chosen:
        try:
            fixes.get(fix)
        except KeyError:
            raise UsageError(f"--patches: no fix named {fix}") from None
        if not (upstream.UPSTREAM_PATCHES / f"{fix}.diff").is_file():
            raise UsageError(f"--patches: {fix} has no upstream diff "
                             f"(cases/upstream/patches/{fix}.diff)")
    if args.dir is None and not chosen:
        raise UsageError("upstream: RUN_DIR is required (or --validate-at with --patches)")
    if args.dir is not None and chosen:
        raise UsageError("--patches validates diffs without a run: leave out RUN_DIR")
    return chosen


def cmd_upstream(args) -> int:
    from harness.results import upstream

    chosen = check_validate_args(args)
    if args.python and not args.run_repros:
        raise UsageError("--python goes with --run-repros")
    if args.python and not (Path(args.python).is_file() and os.access(args.python, os.X_OK)):
        raise UsageError(f"--python {args.python}: not an executable interpreter")
    try:
        upstream.check_out(args.out)
    except ValueError as e:
        raise UsageError(str(e)) from None
    work = args.out.parent / (args.out.name + ".validate")
    if chosen:
        return validate_patches(args, chosen, work)
    read_matrix(args.dir)  # not a run folder: one line
    check_known_issues()
    try:
        drafts = upstream.build(args.dir)
    except ValueError as e:  # UpstreamError, RunFolderError: one line
        raise UsageError(str(e)) from None
    if args.run_repros:
        from harness.run.upstream import run_repros

        run_repros(args.dir, drafts, python=args.python)
    if args.validate_at:
        from harness.run.upstream import validate_drafts

        validate_drafts(args.dir, drafts, args.validate_at, args.source, work,
                        not args.no_et_tests)
    upstream.write(args.dir, args.out, drafts)
    lines = sorted(d.repro_lines for d in drafts)
    median = lines[len(lines) // 2] if lines else 0
    at_tree = [d for d in drafts if d.at_tree is not None]
    print(f"{len(drafts)} draft(s) -> {args.out}/index.md: "
          f"{sum(d.validated for d in drafts)} with a validated patch, "
          f"{sum(len(d.single_fixes) == 1 for d in drafts)} with a single fix, "
          f"{sum(bool(d.single_fixes) for d in drafts)} with at least one fix alone clearing it; "
          f"repro lines median {median}, max {max(lines, default=0)}"
          + (f"; {sum(d.repro_status == d.stated for d in drafts)} repro(s) printed the stated "
             "status" if args.run_repros else "")
          + (f"; {len(at_tree)} diff(s) run at {args.validate_at}, "
             f"{sum(d.at_tree.validated for d in at_tree)} validated there" if args.validate_at
             else ""))
    return EXIT_OK


def validate_patches(args, chosen: list[str], work: Path) -> int:
    """``--validate-at ... --patches FIX,...``: each fix's diff at the tree, OUT/FIX/validation.log
    and OUT/index.md (one line per diff)."""
    import shutil
    import tempfile

    from harness.results import upstream
    from harness.run.upstream import validate_fix
    from harness.stages import fixes

    results = []
    for fix in chosen:
        backend = fixes.get(fix).backends[0]
        print(f"{fix}: {fix}.diff at {args.validate_at}, clean and patched")
        v = validate_fix(fix, backend, args.validate_at, args.source, work / fix,
                         et_tests=not args.no_et_tests)
        print(f"  {v.summary()}")
        results.append(v)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".upstream-", dir=args.out.parent))
    for v in results:
        (tmp / v.fix).mkdir()
        (tmp / v.fix / "validation.log").write_text("\n".join(v.lines()) + "\n")
        shutil.copyfile(upstream.UPSTREAM_PATCHES / f"{v.fix}.diff", tmp / v.fix / "patch.diff")
    (tmp / "index.md").write_text("\n".join(
        [f"# Upstream diffs at {args.validate_at}", ""]
        + [f"- [{v.fix}]({v.fix}/validation.log): {v.summary()}" for v in results]) + "\n")
    if args.out.exists():
        shutil.rmtree(args.out)
    tmp.rename(args.out)
    print(f"{len(results)} diff(s) -> {args.out}/index.md: "
          f"{sum(v.validated for v in results)} validated at {args.validate_at}")
    return EXIT_OK
