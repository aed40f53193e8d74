"""``harness run``: cases x backends x fix sets -> worker pool -> journal -> matrix."""

from __future__ import annotations

import concurrent.futures
import os
import sys
import time
from concurrent.futures import FIRST_COMPLETED
from dataclasses import dataclass, field
from pathlib import Path

from harness import versions
from harness.lane import Lane
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


def lanes(config: RunConfig) -> list[Lane]:
    """Every lane of a case: stock always, plus the fix set where it applies (and, with
    ``fixes_each``, each of its fixes alone); or exactly ``lane_names``."""
    if config.lane_names:
        return sorted({Lane.parse(name) for name in config.lane_names})
    out = []
    for backend in config.backends:
        out.append(Lane(backend))
        applicable = fix_registry.for_backend(config.fixes, backend)
        if config.fixes_each and len(applicable) > 1:
            out += [Lane(backend, (fix,)) for fix in applicable]
        if applicable:
            out.append(Lane(backend, tuple(applicable)))
    return out


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
        return self.case.case_id, self.lane.backend_column, self.lane.fixes_column

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
    return case.case_id, lane.backend_column, lane.fixes_column


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
    row = execute(task.case, prepared)
    row.cached = static_s == 0.0 and task.prepared is not None
    row.cell_time_s = round(static_s + time.perf_counter() - t0, 3)
    return row


def header(config: RunConfig, n_cases: int) -> dict:
    from harness.runtimes import load as runtime

    with runtime.use(config.vulkan_runtime):
        registered = [n for n in runtime.registered_backends()
                      if n != "VulkanBackend" or runtime.vulkan_enabled()]
    extra = {"vulkan": runtime.describe(config.vulkan_runtime)} if "vulkan" in config.backends else {}
    return {"run_id": new_run_id(), "versions": versions.stack(), "registered_backends": registered,
            **extra, "python": sys.version.split()[0],
            "started": time.strftime("%Y-%m-%d %H:%M:%S"), "argv": sys.argv[1:], "cases": n_cases,
            **config.__dict__}


def execute(out_dir: Path, config: RunConfig, cases: list[ConvCase], *,
            progress: bool = True, done_rows: list[CellResult] | None = None):
    from harness.runtimes.load import use

    with use(config.vulkan_runtime):  # static_result asks whether the runtime is there
        return _execute(RunFolder(out_dir), config, cases, progress, done_rows or [])


def _execute(folder: RunFolder, config: RunConfig, cases: list[ConvCase], progress: bool,
             done_rows: list[CellResult]):
    from harness.generation.from_model import case_sources
    from harness.runtimes.load import load as load_runtime
    from harness.stages.cell import crash_result, static_result

    tasks = cells(cases, config)
    rows = {r.key: r for r in done_rows}
    todo: dict[str, tuple[ConvCase, list[Lane]]] = {}
    for case, lane in tasks:
        if cell_key(case, lane) not in rows:
            todo.setdefault(case.case_id, (case, []))[1].append(lane)
    log_dir = str(folder / "logs")
    cache = Cache(config.cache_dir) if config.cache_dir else None
    journal = journal_mod.Journal(folder.journal_path)
    t0 = time.perf_counter()
    bar = _progress(len(tasks), len(done_rows), progress)
    sources = case_sources(config.case_files)
    pool_args = dict(jobs=config.jobs, timeout=config.timeout, on_start=load_runtime,
                     on_start_args=(config.vulkan_runtime,))

    def record(row: CellResult) -> None:
        row.source = sources.get(row.case_id, row.source)  # a note beside the case, not in it
        journal.append(row.to_row())
        rows[row.key] = row
        bar.set_postfix_str(f"{row.status} {row.backend}", refresh=False)
        bar.update(1)

    # A failure in a worker that served earlier cells may be state those cells left behind:
    # such a cell is re-run alone in a fresh process, and the alone outcome is what is recorded.
    shared: dict[tuple, tuple[CellTask, CellResult, str]] = {}
    pending: dict = {}
    prepared_cases = 0
    with workers.Pool(log_dir=log_dir, lowering=True, **pool_args) as lowering, \
            workers.Pool(log_dir=log_dir, **pool_args) as executing:

        def hand_over(case: ConvCase, prepared: dict, cached: bool) -> None:
            """Step 1's result, as it is, to step 2: final cells recorded, the others executed."""
            for lane, p in prepared.items():
                row, final = static_result(case, p)
                if final:
                    row.cached = cached
                    row.cell_time_s = 0.0 if cached else row.cell_time_s
                    record(row)
                else:
                    task = CellTask(case, lane, p, 0.0 if cached else p.seconds)
                    pending[executing.submit(execute_work, task)] = task

        # 1. Per case, once: eager, quantization, export, every lane lowered (prepare.py) -
        #    or all of it from the cache. 2. Per cell, as soon as its case is prepared:
        #    execution in a worker, so a native crash costs one cell.
        for case, case_lanes in todo.values():
            found = {lane: cache.load(case.case_id, lane) for lane in case_lanes} if cache else {}
            if found and all(found.values()):
                hand_over(case, found, cached=True)
            else:
                task = CaseTask(case, tuple(case_lanes), config.cache_dir)
                pending[lowering.submit(prepare_work, task)] = task
        while pending:
            done, _ = concurrent.futures.wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                task = pending.pop(future)
                if isinstance(task, CaseTask):
                    prepared, death = lowering.outcome(future)
                    prepared_cases += 1
                    bar.set_postfix_str(f"prepared {prepared_cases} cases")
                    if prepared is not None:
                        hand_over(task.case, prepared, cached=False)
                    else:  # its preparation died: each cell prepares alone, in step 2
                        for lane in task.lanes:
                            cell = CellTask(task.case, lane, None, cache_dir=config.cache_dir)
                            pending[executing.submit(execute_work, cell)] = cell
                    continue
                row, death = executing.outcome(future)
                row = row or _crash(task, death, log_dir, crash_result)
                before = workers.history(log_dir, task.tag)
                if Status(row.status).failed_at_runtime and before:
                    shared[task.key] = (task, row, before[-1])
                else:
                    record(row)
    alone_logs = str(folder / "logs" / "alone")
    for task, row, death in workers.run([t for t, _, _ in shared.values()], execute_work,
                                        log_dir=alone_logs, max_tasks=1, **pool_args):
        row = row or _crash(task, death, alone_logs, crash_result)
        _, first, previous = shared[task.key]
        row.isolation = isolation_note(first, row, previous)
        record(row)
    bar.close()
    ordered = [rows[cell_key(c, lane)] for c, lane in tasks if cell_key(c, lane) in rows]
    df = matrix.frame([r.to_row() for r in ordered])
    matrix.write(df, folder.path)
    header = folder.header()
    folder.update_header(duration_s=round(header.get("duration_s", 0) + time.perf_counter() - t0, 1),
                         cells=len(ordered))
    return df


def _crash(task: CellTask, death: str, log_dir: str, crash_result) -> CellResult:
    said = workers.crash_output(log_dir, task.tag)
    return crash_result(task.case, task.lane, death + (f"; it printed: {said}" if said else ""),
                        task.prepared)


def isolation_note(shared: CellResult, alone: CellResult, previous: str) -> str:
    """How a cell that failed in a reused worker fared alone; 'DIFFERS' marks a finding."""
    if shared.status == alone.status:
        return f"re-run alone: same {alone.status}"
    return (f"DIFFERS: alone {alone.status}; in a worker right after {previous} it was "
            f"{shared.status} ({(shared.message or '')[:300]})")


def _progress(total: int, initial: int, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, unit="cell", disable=not enabled, file=sys.stderr,
                dynamic_ncols=True)


def start(out_dir: Path, config: RunConfig, cases: list[ConvCase]) -> None:
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
    return RunConfig(**{k: v for k, v in meta.items() if k in keys}), folder.cases()


def validate_names(backends: list[str], fixes: str | None) -> list[str]:
    """Raise KeyError naming the first unknown backend or fix."""
    for b in backends:
        backend_registry.get(b)
    return fix_registry.parse(fixes)


def default_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
