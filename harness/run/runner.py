"""``harness run``: cases x backends x fix sets -> worker pool -> journal -> matrix.

Runtime fixes (``stages/fixes/runtime_patches.py``: a fix that is a source patch of the Vulkan
runtime) do not change lowering; they change which plug-in a cell executes on. Every distinct
patch set among the run's Vulkan lanes gets its plug-in built (or taken from the cache) once,
before the run (``prepare_runtimes``; recorded in ``RunConfig.vulkan_patched`` and the run
header's ``vulkan.patched``), and its cells execute in a worker pool of their own whose
processes loaded that plug-in (one plug-in per process: a loaded library cannot be unloaded).
A patch set whose plug-in could not be built makes its lane's cells NO_RUNTIME saying why.

A lane whose program is another lane's (``Prepared.reused_from``: its fix passes change nothing
in the case's graph, prepare.py) executes only where execution could differ: on another
plug-in (a runtime fix). On the same plug-in it is that lane's cell again, so its row is that
lane's row, recorded as soon as that one is (after its isolation re-run, if it had one).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import os
import sys
import time
from concurrent.futures import FIRST_COMPLETED
from dataclasses import dataclass, field
from pathlib import Path

from harness import versions
from harness.lane import Lane
from harness import record
from harness.record import CellResult
from harness.results import matrix
from harness.run import journal as journal_mod
from harness.run import workers
from harness.runfolder import RunFolder, new_run_id
from harness.spec import ConvCase
from harness.stages import backends as backend_registry
from harness.stages import fixes as fix_registry
from harness.stages.cache import Cache
from harness.stages.prepare import Prepared
from harness.status import Status


@dataclass
class RunConfig:
    backends: list[str]
    fixes: list[str]
    profile: str
    max_examples: int
    seed: int
    case_files: list[str] = field(default_factory=list)
    timeout: float | None = 300.0
    jobs: int = 2
    cache_dir: str | None = None
    vulkan_runtime: str | None = None  # the plug-in library every process loads (None: no runtime)
    shard: str | None = None  # "K/N": this run is shard K of N (shard.py); None: the whole run
    # Exactly these lanes (Lane names, e.g. what a corpus file expects), instead of stock plus
    # every applicable fix per backend; "each" adds every fix alone beside them (attribution).
    lane_names: list[str] = field(default_factory=list)
    fixes_each: bool = False
    # The patched Vulkan plug-ins of the run's runtime-fix lanes (prepare_runtimes):
    # "patch,patch" -> {"library": path ("" when there is none), "problem": why not, "patches"}
    vulkan_patched: dict = field(default_factory=dict)


def lanes(config: RunConfig) -> list[Lane]:
    """Every lane of a case: stock always, plus the fix set where it applies (and, with
    ``fixes_each``, each of its fixes alone); or exactly ``lane_names``."""
    if config.lane_names:
        return sorted({Lane.parse(name, fix_registry.all_for) for name in config.lane_names})
    out = []
    for backend in config.backends:
        out.append(Lane(backend))
        applicable = fix_registry.for_backend(config.fixes, backend)
        if config.fixes_each and len(applicable) > 1:
            out += [Lane(backend, (fix,)) for fix in applicable]
        if applicable:
            out.append(Lane(backend, tuple(applicable)))
    return out


def lane_patches(lane: Lane) -> tuple[str, ...]:
    """The runtime source patches a lane's cells execute with: its runtime fixes' and the
    patches those need (a header's ``Needs:``, ``patching.resolve``), in name order; () for a
    stock or graph-fix-only lane, and for every lane but the local Vulkan one."""
    from harness.runtimes import patching

    if lane.backend != "vulkan" or lane.device:
        return ()
    named = {p for p in (fix_registry.get(f).runtime_patch for f in lane.fixes) if p}
    return tuple(p.name for p in patching.resolve(named)) if named else ()


def patch_key(patches) -> str:
    return ",".join(patches)


def patch_sets(config: RunConfig) -> list[tuple[str, ...]]:
    """The distinct non-empty patch sets among the run's lanes."""
    return sorted({lane_patches(lane) for lane in lanes(config)} - {()})


def check_patches(backends: list[str], fix_names: list[str]) -> None:
    """Every runtime patch the chosen fixes name applies, with the others, to the source the
    installed release's plug-in is built from. KeyError (one line: patch, tree, first hunk
    that does not match) when one does not; nothing is built or written. Having no source at
    all is not bad input: the lane then says why it could not run."""
    from harness.runtimes import RuntimeBuildError, patching, vulkan

    if "vulkan" not in backends:
        return
    patches = lane_patches(Lane("vulkan", tuple(fix_registry.for_backend(fix_names, "vulkan"))))
    if not patches:
        return
    try:
        vulkan.check(patches)
    except patching.PatchError as e:
        raise KeyError(str(e)) from None
    except RuntimeBuildError:
        pass


def prepare_runtimes(config: RunConfig, log=None) -> dict:
    """Build (or find in the cache) the patched Vulkan plug-in of every patch set of the run,
    once, from the source the stock plug-in was built from. Only where a Vulkan runtime is in
    use (``config.vulkan_runtime``); a set already in ``config.vulkan_patched`` (a resumed run)
    is kept, its library checked. -> ``config.vulkan_patched``."""
    from harness.runtimes import RuntimeBuildError, vulkan

    if log is None:
        def log(line: str) -> None:
            print(f"runtime build: {line}", file=sys.stderr)
    if not config.vulkan_runtime:
        return config.vulkan_patched
    stock = vulkan.for_library(Path(config.vulkan_runtime))
    source = stock.source_path() if stock else None
    for patches in patch_sets(config):
        key = patch_key(patches)
        known = config.vulkan_patched.get(key)
        if known is not None:
            if known.get("library") and not Path(known["library"]).is_file():
                known.update(library="", problem=f"its patched plug-in {known['library']} is gone")
            continue
        entry = {"patches": list(patches), "library": "", "problem": ""}
        try:
            m = vulkan.build(source, cache=None, log=log, patches=patches, install=False)
            entry.update(library=m.library, build_seconds=m.build_seconds, cached=m.cached)
            # one console line: the patch count and the cache entry (run.json has the names)
            log(f"patched plug-in ({len(patches)} patches): {Path(m.library).parent.name} "
                f"({'cache hit' if m.cached else f'built in {m.build_seconds:g} s'})")
        except RuntimeBuildError as e:
            entry["problem"] = f"the patched Vulkan runtime ({key}) could not be built: {e}"
            log(entry["problem"])
        config.vulkan_patched[key] = entry
    return config.vulkan_patched


def library_for(config: RunConfig, lane: Lane) -> tuple[str | None, str]:
    """(the plug-in the lane's cells execute on, why there is none: '' when there is one)."""
    patches = lane_patches(lane)
    if not patches:
        return config.vulkan_runtime, ""
    entry = config.vulkan_patched.get(patch_key(patches))
    if entry is None:
        return None, (f"no patched Vulkan runtime for {patch_key(patches)}: "
                      + ("no Vulkan runtime in use" if not config.vulkan_runtime
                         else "not prepared for this run"))
    return entry.get("library") or None, entry.get("problem", "")


RUNTIME_MARK = "@@convconf runtime "


def load_runtime(library: str | None) -> bool:
    """A worker's start: load the plug-in and say which in its log (the cells it serves after
    this line executed on that library)."""
    from harness.runtimes.load import load

    ok = load(library)
    os.write(2, f"{RUNTIME_MARK}{library or 'none'} registered={ok}\n".encode())
    return ok


@dataclass(frozen=True)
class CaseTask:
    """Step 1, in a lowering worker: the static stages of the case's lanes, shared work once."""
    case: ConvCase
    lanes: tuple
    cache_dir: str | None = None


@dataclass(frozen=True, eq=False)
class CellTask:
    """Step 2, in an execution worker: one cell, with what step 1 prepared for it (None only
    when the case's preparation died: the cell then prepares alone)."""
    case: ConvCase
    lane: Lane
    prepared: Prepared | None = None
    static_s: float = 0.0  # seconds this run spent on the cell's static stages
    cache_dir: str | None = None

    @property
    def key(self) -> tuple:
        return cell_key(self.case, self.lane)

    @property
    def tag(self) -> str:
        return f"{self.case.case_id}|{self.lane.name}"


def cells(cases: list[ConvCase], config: RunConfig) -> list[tuple[ConvCase, Lane]]:
    """Every (case, lane) cell of the run, or of its shard, in matrix order."""
    from harness.run.shard import select

    all_lanes = lanes(config)
    mine = select(cases, config.shard, len(all_lanes))
    return [(case, lane) for case in cases if case.case_id in mine for lane in all_lanes]


def cell_key(case: ConvCase, lane: Lane) -> tuple:
    return record.cell_key(case.case_id, lane.backend_column, lane.fixes_column)


def prepare_work(task: CaseTask) -> dict:
    """Runs in a lowering worker -> {lane: Prepared}; each stored in the cache when there is one."""
    from harness.stages.prepare import prepare_case

    workers.mark(f"{task.case.case_id}|prepare")
    prepared = prepare_case(task.case, list(task.lanes))
    if task.cache_dir:
        cache = Cache(task.cache_dir)
        for p in prepared.values():
            if p.status != Status.INVALID.value:
                cache.store(task.case.case_id, p)
    return prepared


def execute_work(task: CellTask) -> CellResult:
    """Runs in an execution worker: the prepared program executed and judged (cell.execute)."""
    from harness.stages.cell import execute, prepared_or_cached

    workers.mark(task.tag)
    t0 = time.perf_counter()
    prepared, static_s = task.prepared, task.static_s
    if prepared is None:
        prepared, cached = prepared_or_cached(task.case, task.lane,
                                              Cache(task.cache_dir) if task.cache_dir else None)
        static_s = 0.0 if cached else prepared.seconds
    row = execute(task.case, prepared, log_path=workers.current_cell_log(task.tag))
    row.cached = static_s == 0.0 and task.prepared is not None
    row.cell_time_s = round(static_s + time.perf_counter() - t0, 3)
    return row


def header(config: RunConfig, n_cases: int) -> dict:
    from harness.runtimes import load as runtime

    with runtime.use(config.vulkan_runtime):
        registered = [n for n in runtime.registered_backends()
                      if n != "VulkanBackend" or runtime.vulkan_enabled()]
    extra = {}
    if "vulkan" in config.backends:
        extra["vulkan"] = runtime.describe(config.vulkan_runtime)
        extra["vulkan"]["patched"] = [_describe_patched(config, key, entry)
                                      for key, entry in config.vulkan_patched.items()]
    return {"run_id": new_run_id(), "versions": versions.stack(), "registered_backends": registered,
            # fixes left out of "all"/"each" because this ExecuTorch cannot run them, and why
            "fixes_unavailable": fix_registry.unavailable(), **extra, "python": sys.version.split()[0],
            "started": time.strftime("%Y-%m-%d %H:%M:%S"), "argv": sys.argv[1:], "cases": n_cases,
            **config.__dict__}


def _describe_patched(config: RunConfig, key: str, entry: dict) -> dict:
    """One patched plug-in of the run, for the header: its patches (name, file, sha256), the
    lanes that execute on it, the library (or why there is none)."""
    from harness.runtimes import vulkan

    info = {"patches": entry.get("patches", key.split(",")),
            "lanes": [lane.name for lane in lanes(config) if patch_key(lane_patches(lane)) == key],
            "library": entry.get("library", ""), "problem": entry.get("problem", "")}
    manifest = vulkan.for_library(Path(info["library"])) if info["library"] else None
    if manifest:
        info.update({k: v for k, v in manifest.summary().items() if k not in info or k == "patches"})
        info.update(build_seconds=manifest.build_seconds, cached=entry.get("cached"))
    return info


def execute(out_dir: Path, config: RunConfig, cases: list[ConvCase], *,
            progress: bool = True, done_rows: list[CellResult] | None = None):
    from harness.runtimes.load import use

    prepare_runtimes(config)  # a no-op when start() did it
    with use(config.vulkan_runtime):  # static_result asks whether the runtime is there
        return _execute(RunFolder(out_dir), config, cases, progress, done_rows or [])


def _execute(folder: RunFolder, config: RunConfig, cases: list[ConvCase], progress: bool,
             done_rows: list[CellResult]):
    """1. Per case, once: eager, quantization, export, every lane lowered (prepare.py) - or
    all of it from the cache. 2. Per cell, as soon as its case is prepared: execution in a
    worker, so a native crash costs one cell. 3. A runtime failure in a worker that served
    earlier cells is re-run alone. -> the matrix, written."""
    run = _Run(folder, config, cases, progress, done_rows)
    with contextlib.ExitStack() as stack:
        run.open_pools(stack)
        run.start_cases()
        run.drain()
    run.rerun_alone()
    return run.finish()


class _Run:
    """One execution of a run's cells: what is recorded, what is pending in which pool, and
    which cells take another's verdict."""

    def __init__(self, folder: RunFolder, config: RunConfig, cases: list[ConvCase],
                 progress: bool, done_rows: list[CellResult]):
        from harness.generation.from_model import case_sources

        self.folder, self.config = folder, config
        self.tasks = cells(cases, config)
        self.rows = {r.key: r for r in done_rows}
        self.todo: dict[str, tuple[ConvCase, list[Lane]]] = {}
        for case, lane in self.tasks:
            if cell_key(case, lane) not in self.rows:
                self.todo.setdefault(case.case_id, (case, []))[1].append(lane)
        self.log_dir = str(folder / "logs")
        self.cache = Cache(config.cache_dir) if config.cache_dir else None
        self.journal = journal_mod.Journal(folder.journal_path)
        self.t0 = time.perf_counter()
        self.bar = _progress(len(self.tasks), len(done_rows), progress)
        self.sources = case_sources(config.case_files)
        self.pool_args = dict(jobs=config.jobs, timeout=config.timeout, on_start=load_runtime,
                              on_start_args=(config.vulkan_runtime,))
        # cell key of a lane that executes -> the cells whose verdict is its verdict (same
        # program, same plug-in): (case, lane, prepared, cached)
        self.followers: dict[tuple, list] = {}
        # A failure in a worker that served earlier cells may be state those cells left behind:
        # such a cell is re-run alone in a fresh process, and the alone outcome is recorded.
        self.shared: dict[tuple, tuple[CellTask, CellResult, str]] = {}
        self.pending: dict = {}
        self.prepared_cases = 0
        self.lowering = self.executing = None

    def args_for(self, library: str | None) -> dict:
        return {**self.pool_args, "on_start_args": (library,)}

    def open_pools(self, stack: contextlib.ExitStack) -> None:
        self.lowering = stack.enter_context(workers.Pool(log_dir=self.log_dir, lowering=True,
                                                         **self.pool_args))
        # An execution pool per plug-in (stock; each patch set's), started when its first cell
        # comes (a worker executes on the one library it loaded); EXECUTION_POOLS at a time.
        self.executing = stack.enter_context(workers.Pools(
            lambda library: workers.Pool(log_dir=self.log_dir, **self.args_for(library)),
            EXECUTION_POOLS, batch=EXECUTION_BATCH * self.config.jobs))

    def record(self, row: CellResult) -> None:
        copies = [_same_verdict(row, lane, p, cached) for _, lane, p, cached
                  in self.followers.pop(row.key, [])]  # before its evidence goes to the folder
        row.source = self.sources.get(row.case_id, row.source)  # a note beside the case
        if row.evidence is not None:  # a MISMATCH's |out - ref|, for its finding's picture
            self.folder.write_evidence(row.case_id, row.backend, row.fixes, row.evidence)
            row.evidence = None
        self.journal.append(row.to_row())
        self.rows[row.key] = row
        self.bar.set_postfix_str(f"{row.status} {row.backend}", refresh=False)
        self.bar.update(1)
        for copy in copies:
            self.record(copy)

    def submit(self, task: CellTask) -> None:
        from harness.stages.cell import static_result

        library, problem = library_for(self.config, task.lane)
        if problem:  # its patched plug-in is not there: the lane says why, never PASS
            self.record(_no_patched_runtime(task, problem, static_result))
            return
        self.pending[self.executing.submit(library, execute_work, task)] = task

    def hand_over(self, case: ConvCase, prepared: dict, cached: bool) -> None:
        """Step 1's result, as it is, to step 2: final cells recorded, the others executed
        (a lane with another's program on that lane's plug-in: recorded with that one)."""
        from harness.stages.cell import static_result

        outcomes = {lane: static_result(case, p) for lane, p in prepared.items()}
        waiting = set()  # first all of them: a source may be recorded as it is submitted
        for lane, p in prepared.items():
            source = verdict_source(self.config, lane, p, prepared)
            if source is not None and not outcomes[lane][1] and not outcomes[source][1]:
                self.followers.setdefault(cell_key(case, source), []).append(
                    (case, lane, p, cached))
                waiting.add(lane)
        for lane, p in prepared.items():
            row, final = outcomes[lane]
            if final:
                row.cached = cached
                row.cell_time_s = 0.0 if cached else row.cell_time_s
                self.record(row)
            elif lane not in waiting:
                self.submit(CellTask(case, lane, p, 0.0 if cached else p.seconds))

    def start_cases(self) -> None:
        """Every case to do: from the cache when all its lanes are there, else lowered."""
        for case, case_lanes in self.todo.values():
            found = ({lane: self.cache.load(case.case_id, lane) for lane in case_lanes}
                     if self.cache else {})
            if found and all(found.values()):
                self.hand_over(case, found, cached=True)
            else:
                task = CaseTask(case, tuple(case_lanes), self.config.cache_dir)
                self.pending[self.lowering.submit(prepare_work, task)] = task
        if self.lowered_all():
            self.executing.finish()  # every case came from the cache: no cell is to come

    def lowered_all(self) -> bool:
        """Whether no case is being lowered any more (so no cell is to come)."""
        return not any(isinstance(t, CaseTask) for t in self.pending.values())

    def drain(self) -> None:
        """Until nothing is pending: each finished case handed over, each finished cell
        recorded (or kept to be re-run alone); lost tasks rescued."""
        while self.pending:
            done, _ = concurrent.futures.wait(self.pending, timeout=30,
                                              return_when=FIRST_COMPLETED)
            for line in self.lowering.rescue() + self.executing.poll():
                self.bar.write(f"run: {line}", file=sys.stderr)
            for future in done:
                task = self.pending.pop(future)
                if isinstance(task, CaseTask):
                    self.case_done(task, future)
                else:
                    self.cell_done(task, future)

    def case_done(self, task: CaseTask, future) -> None:
        prepared, death = self.lowering.outcome(future)
        self.prepared_cases += 1
        if self.lowered_all():
            # the last case is lowered: its workers (torch and the lowering stack, ~240 MiB
            # PSS each) leave before the run's execution tail, and no cell is to come
            self.lowering.close()
            self.executing.finish()
        self.bar.set_postfix_str(f"prepared {self.prepared_cases} cases")
        if prepared is not None:
            self.hand_over(task.case, prepared, cached=False)
        else:  # its preparation died: each cell prepares alone, in step 2
            for lane in task.lanes:
                self.submit(CellTask(task.case, lane, None, cache_dir=self.config.cache_dir))

    def cell_done(self, task: CellTask, future) -> None:
        from harness.stages.cell import crash_result

        row, death = self.executing.outcome(future)
        row = row or _crash(task, death, self.log_dir, crash_result)
        before = workers.history(self.log_dir, task.tag)
        if Status(row.status).failed_at_runtime and before:
            self.shared[task.key] = (task, row, before[-1])
        elif row.status == Status.CRASH and "SIGKILL" in (row.message or ""):
            # nothing a cell does raises SIGKILL itself (an abort is SIGABRT, a bad access
            # SIGSEGV): a kill -9 from outside or the kernel's OOM killer; once more, alone
            self.shared[task.key] = (task, row, KILLED_FROM_OUTSIDE)
        else:
            self.record(row)

    def rerun_alone(self) -> None:
        """Each runtime failure from a shared worker, again in a fresh process of its own; the
        alone outcome is recorded, with how it compares (``isolation``)."""
        from harness.stages.cell import crash_result

        alone_logs = str(self.folder / "logs" / "alone")
        by_library: dict = {}
        for t, _, _ in self.shared.values():
            by_library.setdefault(library_for(self.config, t.lane)[0], []).append(t)
        for library, alone in by_library.items():
            for task, row, death in workers.run(alone, execute_work, log_dir=alone_logs,
                                                max_tasks=1, **self.args_for(library)):
                row = row or _crash(task, death, alone_logs, crash_result)
                _, first, previous = self.shared[task.key]
                row.isolation = isolation_note(first, row, previous)
                self.record(row)

    def finish(self):
        """The matrix in the run's cell order, written; the header's duration and cell count."""
        self.bar.close()
        ordered = [self.rows[cell_key(c, lane)] for c, lane in self.tasks
                   if cell_key(c, lane) in self.rows]
        df = matrix.frame([r.to_row() for r in ordered])
        matrix.write(df, self.folder.path)
        header = self.folder.header()
        self.folder.update_header(
            duration_s=round((header.duration_s or 0) + time.perf_counter() - self.t0, 1),
            cells=len(ordered))
        return df


# Execution pools alive at once: every worker holds torch, the lowering stack and a plug-in
# (about 1 GB); with a plug-in per fix (--fixes each: nine) a pool each ran out of memory.
EXECUTION_POOLS = 2
# Cells per worker a plug-in's queue holds before its pool takes an idle one's place while
# cases are still being lowered (workers.Pools: fewer pool starts; all go at the end)
EXECUTION_BATCH = 8


def verdict_source(config: RunConfig, lane: Lane, prepared: Prepared,
                   case_prepared: dict) -> Lane | None:
    """The lane of the case whose verdict is this lane's too: the one whose program it reuses
    (``reused_from``), where that lane is prepared in the same batch and executes on the same
    plug-in (or has none for the same reason); else None: the lane executes itself."""
    if not prepared.reused_from:
        return None
    fixes = "" if prepared.reused_from == "stock" else prepared.reused_from.lstrip("+")
    source = Lane.of(lane.backend_column, fixes)
    if source == lane or source not in case_prepared or case_prepared[source].reused_from:
        return None
    return source if library_for(config, source) == library_for(config, lane) else None


def _same_verdict(row: CellResult, lane: Lane, prepared: Prepared, cached: bool) -> CellResult:
    """``row`` (the cell of the lane whose program and plug-in this lane shares) as this lane's."""
    copy = dataclasses.replace(row, backend=lane.backend_column, fixes=lane.fixes_column,
                               reused_from=prepared.reused_from, cached=cached,
                               lower_time_s=prepared.lower_time_s)  # the check's seconds
    copy.cell_time_s = 0.0 if cached else prepared.seconds
    return copy


def _no_patched_runtime(task: CellTask, problem: str, static_result) -> CellResult:
    """A cell of a runtime-fix lane whose patched plug-in is not there: NO_RUNTIME, saying why
    (what its static stages found is kept; a cell that could not even be prepared says so)."""
    if task.prepared is not None:
        row = static_result(task.case, task.prepared)[0]
    else:
        from harness.stages.cell import new_result

        row = new_result(task.case, task.lane)
    row.update(status=Status.NO_RUNTIME.value, phase="execute", message=problem)
    return row


def _crash(task: CellTask, death: str, log_dir: str, crash_result) -> CellResult:
    """A cell whose worker died: what killed it, the runtime's last lines (from the cell's own
    log file, which the dead worker left), and that log as the cell's runtime log."""
    said = workers.crash_output(log_dir, task.tag)
    log = workers.cell_log(log_dir, task.tag)
    return crash_result(task.case, task.lane, death + (f"; it printed: {said}" if said else ""),
                        task.prepared, log=log)


KILLED_FROM_OUTSIDE = "a SIGKILL from outside the cell"


def isolation_note(shared: CellResult, alone: CellResult, previous: str) -> str:
    """How a cell that failed in a reused worker fared alone; 'DIFFERS' marks a finding. A
    cell whose worker was killed from outside (``KILLED_FROM_OUTSIDE``) says only that."""
    if previous == KILLED_FROM_OUTSIDE:
        return f"re-run alone after {previous} ({(shared.message or '')[:100]}): {alone.status}"
    if shared.status == alone.status:
        return f"re-run alone: same {alone.status}"
    return (f"DIFFERS: alone {alone.status}; in a worker right after {previous} it was "
            f"{shared.status} ({(shared.message or '')[:300]})")


def _progress(total: int, initial: int, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, unit="cell", disable=not enabled, file=sys.stderr,
                dynamic_ncols=True)


def start(out_dir: Path, config: RunConfig, cases: list[ConvCase]) -> None:
    prepare_runtimes(config)  # first: the header names the patched plug-ins
    out_dir.mkdir(parents=True, exist_ok=True)
    folder = RunFolder(out_dir)
    folder.write_cases(cases)
    folder.write_header(header(config, len(cases)))
    for stale in ("journal.jsonl", "matrix.csv", "matrix.json"):
        (out_dir / stale).unlink(missing_ok=True)


def load_run(out_dir: Path) -> tuple[RunConfig, list[ConvCase]]:
    folder = RunFolder(out_dir)
    meta = folder.header()
    keys = RunConfig.__dataclass_fields__
    return RunConfig(**{k: v for k, v in meta.to_dict().items() if k in keys}), folder.cases()


def validate_names(backends: list[str], fixes: str | None) -> list[str]:
    """Raise KeyError naming the first unknown backend or fix, or the first runtime patch (of
    the chosen runtime fixes) that does not apply to the installed release's source."""
    for b in backends:
        backend_registry.get(b)
    chosen = fix_registry.parse(fixes)
    check_patches(backends, chosen)
    return chosen


def default_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
