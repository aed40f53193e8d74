"""``harness run``: generate cases, lower and execute every cell, write the matrix."""

from __future__ import annotations

import sys
from pathlib import Path

from harness.cli.cache import after_run as cache_after_run
from harness.cli.common import (EXIT_FINDINGS, EXIT_OK, UsageError, check_known_issues,
                                print_summary, say, shown, write_report)


def add_parsers(sub) -> None:
    r = sub.add_parser("run", help="generate cases, lower and run them, write the matrix")
    r.add_argument("--out", type=Path, help="run folder (matrix.csv, journal.jsonl, report.html)")
    r.add_argument("--backends", default="xnnpack,vulkan")
    r.add_argument("--fixes", default="", help='comma-separated fix names, "all", or "each" (all '
                   'of them together and each alone: what every fix changes by itself)')
    r.add_argument("--profile", choices=["ci", "nightly"], default="ci")
    r.add_argument("--max-examples", type=int, help="generated cases (default: by profile)")
    r.add_argument("--large-rate", type=float, metavar="SHARE",
                   help="share of generated cases from the size axis (long reductions, texture "
                   "limits; default by profile: ci 0, nightly 0.1); > 0 adds the size strata")
    r.add_argument("--seed", type=int, default=None,
                   help="Hypothesis seed of the generated and steered cases (default 0; with "
                   "--profile nightly a fresh one per night: $GITHUB_RUN_ID when set, else the "
                   "UTC date as YYYYMMDD, printed and kept in run.json)")
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
    r.add_argument("--regression-corpus", metavar="FILE.json",
                   help="a corpus that grows night by night: its cases run first (a missing file "
                   "is an empty corpus), and this run's new failing cases are added to it "
                   "(--save-failures) and written to DIR/new_failures.json")
    r.add_argument("--coverage-state", metavar="FILE.json",
                   help="what earlier nights reached (paths, case-space cells), read at the start "
                   "(missing: a first night) for --steer and written back at the end with this "
                   "run's; the console and report say what this run reached first (nights.py)")
    r.add_argument("--vulkan-runtime", default="auto", metavar="auto|PATH|none",
                   help="Vulkan runtime plug-in to execute the Vulkan lane with (default: the one "
                   "built for the installed executorch, if any)")
    r.add_argument("--shard", metavar="K/N", help="run only shard K of N (whole cases, balanced "
                   "by expected cost, the same on every machine); combine with `harness merge`")
    r.add_argument("--no-progress", action="store_true")
    r.add_argument("--no-report", action="store_true")
    r.add_argument("--baseline", type=Path, metavar="DIR|EXPECTED.json",
                   help="known failures (a run folder, or what `harness expect` writes): they are "
                   "xfail in junit.xml and exit 1 comes only from new failures or regressions")
    r.add_argument("--steer", type=int, default=0, metavar="N",
                   help="add up to N generated cases that the routing models predict reach a "
                   "Vulkan shader or XNNPACK conv path the other cases leave unreached "
                   "(generation/steering.py; default 0: off)")
    r.add_argument("--shrink", type=float, default=0, metavar="SECONDS",
                   help="after the run, shrink one case per finding with Hypothesis, this many "
                   "seconds per finding (default 0: off; the nightly session turns it on); a "
                   "finding the --baseline has a minimal case for keeps it when it still fails "
                   "the same way (one cell)")
    r.add_argument("--diagnose", action="store_true",
                   help="after the run (and --shrink), find what decides each finding: its "
                   "representative's one-step variants run as real cells in its lane")
    r.add_argument("--diagnose-budget", type=float, default=None, metavar="SECONDS",
                   help="seconds per finding for --diagnose (default 90; implies --diagnose)")
    at = r.add_argument_group("at an ExecuTorch commit or tree (harness/run/at_tree.py)")
    at.add_argument("--executorch", metavar="REF", help="run at this commit of the --source "
                    "repository: its Python side over the installed wheel, the Vulkan plug-in "
                    "built from it; every cell says what its verdict rests on")
    at.add_argument("--source", metavar="GITDIR", help="the ExecuTorch git repository of "
                    "--executorch (a checkout or a bare git dir)")
    at.add_argument("--executorch-tree", metavar="DIR", help="run at this ExecuTorch checkout, "
                    "uncommitted changes included (the run says 'dirty')")
    r.set_defaults(func=cmd_run)

    le = sub.add_parser("learn", help="carry a finished (merged) nightly run over to the next "
                        "night: add it to the coverage state and its new failures to the "
                        "regression corpus")
    le.add_argument("dir", type=Path, metavar="RUN_DIR")
    le.add_argument("--coverage-state", metavar="FILE.json", required=True)
    le.add_argument("--regression-corpus", metavar="FILE.json")
    le.set_defaults(func=cmd_learn)


def cmd_run(args) -> int:
    # Everything that can be wrong with the input is checked before the run folder is touched.
    if args.executorch or args.executorch_tree or args.source:  # at an ExecuTorch tree
        return _at_tree(args, resume=False)
    if args.resume and (code := _at_tree(args, resume=True)) is not None:
        return code  # a run at a tree resumes at it
    base = _checked_options(args)
    earlier, problem = _earlier(args)
    corpus_ids = _corpus_ids(args.regression_corpus)
    if args.resume:
        out, config, cases, done_rows = _resumed(args)
    else:
        out, config, cases, done_rows = _started(args, earlier)
    from harness.run import runner

    try:
        df = runner.execute(out, config, cases, progress=not args.no_progress, done_rows=done_rows)
    except OSError as e:  # a full disk or file-size limit: stop in one line, resumable
        return _stopped_by_disk(e, out)
    print_summary(df, out)
    shrunk = _investigate(args, out, config, df, base.minimal if base else None)
    verdict = _against_baseline(df, base)
    if args.coverage_state or args.regression_corpus:
        _learn(args, out, config.seed, df, cases, earlier, problem, shrunk, corpus_ids)
    write_report(out, html=not args.no_report, verdict=verdict,
                 first_seen=base.first_seen if base else None,
                 baseline_ids=base.finding_ids if base else None)
    if args.save_failures:
        from harness.results.corpus import save_failures

        added = save_failures(df, cases, args.save_failures, shrunk)
        say(f"{shown(args.save_failures)}: {added} new failing case(s) added")
    cache_after_run(config.cache_dir, df, out)  # hit/miss counts recorded, the max size kept
    return _exit_code(args, df, verdict)


def _at_tree(args, resume: bool):
    """The run (or its resume) at an ExecuTorch tree (run/at_tree.py); a bad tree or ref is one
    usage line. ``resume``: None when the run folder is not a run at a tree."""
    from harness.run import at_tree
    from harness.runtimes.tree import TreeError

    try:
        return (at_tree.resume if resume else at_tree.run)(args, getattr(args, "argv",
                                                                           sys.argv[1:]))
    except TreeError as e:
        raise UsageError(str(e)) from None


def _earlier(args):
    """--coverage-state's state (or None) and, when its file holds none, the line saying why
    (the night runs as a first night)."""
    if not getattr(args, "coverage_state", None):
        return None, ""
    from harness import nights, versions

    state, problem = nights.read_or_first(args.coverage_state, versions.stack()["executorch"])
    if problem:
        print(f"convconf: warning: {problem}", file=sys.stderr)
    return state, problem


def _learn(args, out: Path, seed, df, cases: list, earlier, problem: str, shrunk,
           corpus_ids: set) -> None:
    """The night carried over: the regression corpus grown by the new failing cases (also
    DIR/new_failures.json), the coverage state with this run added, DIR/first_reached.json.
    ``corpus_ids``: the case ids the corpus held before this run."""
    import json

    from harness import nights
    from harness.record import CellResult
    from harness.runfolder import RunFolder, atomic_write

    added: list = []
    rerun = sum(c.case_id in corpus_ids for c in cases)
    if args.regression_corpus:
        from harness.results.corpus import grow

        added = grow(df, cases, args.regression_corpus, shrunk)
        atomic_write(out / "new_failures.json", json.dumps(added, indent=1) + "\n")
        say(f"regression corpus {shown(args.regression_corpus)}: {rerun} case(s) re-run, "
            f"{len(added)} new failing case(s) added (also in {shown(out / 'new_failures.json')})")
    if not args.coverage_state:
        return
    header = RunFolder(out).header_or_empty()
    night = nights.Night(seed, header.run_id, header.started, len(cases))
    cells = [CellResult.from_row(r) for r in df.to_dict(orient="records")]
    state, tonight = nights.learn(earlier, cells, night)
    tonight.corpus_cases, tonight.corpus_added, tonight.problem = rerun, len(added), problem
    nights.write(args.coverage_state, state)
    nights.write_tonight(out, tonight)
    for line in tonight.lines():
        say(line)
    say(f"coverage state -> {shown(args.coverage_state)} ({len(state.nights)} night(s), "
        f"{sum(map(len, state.reached.values()))} paths, {len(state.cells)} case-space cells)")


def _corpus_ids(path) -> set:
    """The case ids a regression corpus file holds now (none when it is missing)."""
    if not path or not Path(path).exists():
        return set()
    from harness.results.corpus import CorpusError, read
    from harness.spec import CaseError

    try:
        return {case.case_id for case, _ in read(path)}
    except (CaseError, CorpusError) as e:
        raise UsageError(f"--regression-corpus: {e}") from None


def cmd_learn(args) -> int:
    """``harness learn RUN_DIR``: the nightly's merge job carries the merged run over."""
    from harness.cli.common import read_matrix
    from harness.results import findings, report
    from harness.runfolder import RunFolder

    folder = RunFolder(args.dir)
    df = read_matrix(args.dir)  # a bad folder is one line
    try:
        header = folder.header()
        cases = folder.cases()
    except ValueError as e:
        raise UsageError(f"learn: {e}") from None
    corpus_ids = _corpus_ids(args.regression_corpus)
    earlier, problem = _earlier(args)
    _learn(args, folder.path, header.seed, df, cases, earlier, problem,
           findings.load_shrunk(folder.path) or None, corpus_ids)
    if (folder.path / "report.html").exists():  # its "reached for the first time" section
        report.write(folder.path)
    return EXIT_OK


EXIT_STOPPED = 3  # the run had to stop (a full disk): its journal keeps every finished cell


def _stopped_by_disk(e: OSError, out: Path) -> int:
    from harness.status import machine_full

    if not machine_full(e):
        raise e
    from harness.run import journal

    done = len(journal.read(out / "journal.jsonl").rows)
    print(f"convconf: error: the run stopped: cannot write {shown(e.filename or out)} "
          f"({e.strerror}); {done} finished cells are in its journal: free space, then "
          f"python -m harness run --resume {shown(out)}", file=sys.stderr)
    return EXIT_STOPPED


def _checked_options(args):
    """The known-issues file and the options that stand alone; -> the --baseline (or None)."""
    check_known_issues()
    if args.diagnose_budget is not None and args.diagnose_budget < 0:
        raise UsageError("run: --diagnose-budget must be >= 0")
    if not args.baseline:
        return None
    from harness.results.baseline import load as load_baseline

    try:
        return load_baseline(args.baseline)
    except ValueError as e:
        raise UsageError(str(e)) from None


def _resumed(args) -> tuple:
    """--resume DIR: the run's configuration and cases, its journal mended -> (out, config,
    cases, the cells already done)."""
    from harness.record import CellResult
    from harness.run import journal, runner

    out = args.resume
    try:
        config, cases = runner.load_run(out)
    except ValueError as e:  # RunFolderError: which file is missing, unreadable or too new
        raise UsageError(f"--resume {out}: {e}") from None
    if args.jobs:
        config.jobs = args.jobs
    if config.vulkan_runtime and not Path(config.vulkan_runtime).is_file():
        raise UsageError(f"--resume {out}: its Vulkan runtime {config.vulkan_runtime} is gone")
    read = journal.read(out / "journal.jsonl")
    for problem in read.problems:
        print(f"convconf: warning: {problem}", file=sys.stderr)
    if read.problems:
        journal.Journal(out / "journal.jsonl").mend(read)
    done_rows = [CellResult.from_row(r) for r in read.rows]
    print(f"resuming {out}: {len(done_rows)} cells already done", file=sys.stderr)
    return out, config, cases, done_rows


def _started(args, earlier=None) -> tuple:
    """A new run: its configuration and cases checked, the run folder started -> (out, config,
    cases, no cells done). ``earlier``: the --coverage-state (steering's nights so far)."""
    from harness import nights
    from harness.run import runner

    if not args.out:
        raise UsageError("run: --out DIR is required (or --resume DIR)")
    out = args.out
    backends, fixes, fixes_each = _lanes(args)
    if args.regression_corpus and Path(args.regression_corpus).exists():
        args.cases = [*args.cases, str(args.regression_corpus)]  # run first, kept in the header
    listed = _listed_cases(args)
    if out.exists() and (out / "journal.jsonl").exists() and not args.overwrite:
        raise UsageError(f"{out} already holds a run; use --resume {out} to continue it "
                         f"or --overwrite to replace it")
    given = args.seed
    args.seed, origin = nights.run_seed(args.seed, args.profile)
    if given is None and args.profile == "nightly":
        say(f"seed {args.seed} (this night's, from {origin}; --seed {args.seed} runs it again)")
    config = _config(args, backends, fixes, fixes_each)
    cases = _all_cases(args, listed, config.max_examples, earlier)
    if not cases:  # before anything is written (an empty matrix has no columns to report on)
        given = (f"--cases {' '.join(map(str, args.cases))} hold(s) no case" if args.cases
                 else "no --cases")
        raise UsageError(f"run: nothing to run: --max-examples {config.max_examples} and {given}")
    runner.start(out, config, cases)
    from harness.runtimes import tree

    if tree.current():  # a run at an ExecuTorch tree (run/at_tree.py started this process)
        from harness.runfolder import RunFolder

        at, folder = tree.current(), RunFolder(out)
        vulkan = folder.header().vulkan
        if vulkan and at.vulkan_plugin and vulkan.get("library") == at.vulkan_plugin:
            vulkan = {**vulkan, "source_commit": at.commit, "source_origin": f"the tree {at.label}",
                      "skew_note": f"built from the tree {at.label} the run is at"}
        folder.update_header(executorch_tree=at.to_dict(), vulkan=vulkan)
    return out, config, cases, []


def _lanes(args) -> tuple[list[str], list[str], bool]:
    """--backends and --fixes -> (backends, fixes, fixes_each); unknown names are usage errors."""
    from harness.run import runner

    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if not backends:
        raise UsageError("run: --backends is empty")
    try:
        fixes_each = args.fixes.strip() == "each"
        fixes = runner.validate_names(backends, "all" if fixes_each else args.fixes)
    except KeyError as e:
        raise UsageError(str(e.args[0])) from None
    if args.fixes.strip() in ("all", "each"):  # the header keeps them too (fixes_unavailable)
        from harness.stages import fixes as fix_registry

        for name, why in fix_registry.unavailable().items():
            print(f"run: fix {name} left out: {why}", file=sys.stderr)
    return backends, fixes, fixes_each


def _listed_cases(args) -> list:
    """The --cases files' cases; a case in two files (the corpus' files overlap) is one case."""
    from harness.spec import CaseError, load_cases

    try:
        return list({c.case_id: c for f in args.cases for c in load_cases(f)}.values())
    except CaseError as e:
        raise UsageError(str(e)) from None


def _config(args, backends: list[str], fixes: list[str], fixes_each: bool):
    """The run's RunConfig from the options (each checked)."""
    from harness.generation import generate
    from harness.run import runner
    from harness.runtimes import RuntimeBuildError
    from harness.runtimes.load import resolve as resolve_runtime
    from harness.stages.cache import default_dir

    n = args.max_examples if args.max_examples is not None else generate.PROFILES[args.profile]
    if n < 0:
        raise UsageError("run: --max-examples must be >= 0")
    if args.shard:
        from harness.run.shard import parse as parse_shard

        try:
            parse_shard(args.shard)
        except ValueError as e:
            raise UsageError(str(e)) from None
    jobs = args.jobs or runner.default_jobs()
    if jobs < 1:
        raise UsageError("run: --jobs must be >= 1")
    cache_dir = None if args.no_cache else str(args.cache_dir or default_dir())
    try:
        vulkan_runtime = resolve_runtime(args.vulkan_runtime) if "vulkan" in backends else None
    except RuntimeBuildError as e:
        raise UsageError(str(e)) from None
    if args.steer < 0:
        raise UsageError("run: --steer must be >= 0")
    if args.large_rate is not None and not 0 <= args.large_rate <= 1:
        raise UsageError(f"run: --large-rate must be between 0 and 1, not {args.large_rate}")
    return runner.RunConfig(backends=backends, fixes=fixes, profile=args.profile,
                            max_examples=n, seed=args.seed, case_files=list(args.cases),
                            timeout=args.timeout, jobs=jobs, cache_dir=cache_dir,
                            vulkan_runtime=vulkan_runtime, shard=args.shard,
                            fixes_each=fixes_each)


def _all_cases(args, listed: list, n: int, earlier=None) -> list:
    """The listed cases, then ``n`` generated ones (not already listed), then --steer's
    (toward what no earlier night reached, with ``earlier``)."""
    from harness.generation import generate

    known = {c.case_id for c in listed}
    rate = generate.LARGE_RATE[args.profile] if args.large_rate is None else args.large_rate
    cases = listed + [c for c in generate.generate(n, args.seed, large_rate=rate)
                      if c.case_id not in known]
    if args.steer:
        from harness.generation.steering import steer

        cases += steer(cases, args.steer, args.seed, earlier=earlier)
    return cases


def _investigate(args, out: Path, config, df, known_minimal: dict | None = None):
    """--shrink and --diagnose, after the run, in one lab; -> what shrinking found (or None).
    ``known_minimal``: the --baseline's minimal cases (a known finding keeps its case)."""
    diagnose = args.diagnose or args.diagnose_budget is not None
    if args.shrink <= 0 and not diagnose:
        return None
    from harness.run.diagnose import DEFAULT_BUDGET_S, diagnose_all
    from harness.run.shrink import Lab, shrink_all

    shrunk = None
    with Lab(out, config, df) as lab:  # one kept worker per plug-in for both, answers shared
        if args.shrink > 0:
            shrunk = shrink_all(out, df, args.shrink, config, lab, known_minimal)
        if diagnose:
            budget = DEFAULT_BUDGET_S if args.diagnose_budget is None else args.diagnose_budget
            diagnose_all(out, df, budget, config, lab)
        print(lab.summary())
    return shrunk


def _against_baseline(df, base):
    """Each cell against --baseline ("known: ...", "new: ...", "regressed: ...") or None."""
    if base is None:
        return None
    from harness.results.baseline import classify

    verdict = classify(df, base)
    new = verdict[verdict.str.startswith(("new", "regressed"))]
    say(f"against {shown(base.source)}: {int(verdict.str.startswith('known').sum())} known "
        f"failure(s), {len(new)} new or regressed")
    for line in sorted(set(new)):
        say(f"  {line}", indent=4)
    return verdict


def _exit_code(args, df, verdict) -> int:
    """EXIT_FINDINGS for new/regressed cells against a baseline, or (--fail-on-mismatch) for any
    finding; else EXIT_OK."""
    if verdict is not None:
        return EXIT_FINDINGS if verdict.str.startswith(("new", "regressed")).any() else EXIT_OK
    if args.fail_on_mismatch:
        from harness.status import OK

        if (~df["status"].isin([s.value for s in OK])).any():
            return EXIT_FINDINGS
    return EXIT_OK
