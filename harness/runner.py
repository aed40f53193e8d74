"""``harness run``: cases x backends x fix sets -> worker pool -> journal -> matrix."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import backends as backend_registry, fixes as fix_registry, journal as journal_mod
from . import matrix, versions, workers
from .cache import Cache, key as cache_key
from .record import CellResult
from .spec import ConvCase


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


def lanes(config: RunConfig) -> list[tuple[str, list[str]]]:
    """Every (backend, fix set) of a case: stock always, plus the fix set where it applies."""
    out = []
    for backend in config.backends:
        out.append((backend, []))
        applicable = fix_registry.for_backend(config.fixes, backend)
        if applicable:
            out.append((backend, applicable))
    return out


def cells(cases: list[ConvCase], config: RunConfig) -> list[dict]:
    """Every (case, backend, fix set) cell of the run, or of its shard."""
    from .shard import select

    tasks = []
    mine = select(cases, config.shard, len(lanes(config)))
    for case in cases:
        if case.case_id not in mine:
            continue
        for backend, fx in lanes(config):
            tasks.append({"case": case.to_dict(), "case_id": case.case_id,
                          "backend": backend, "fixes": ",".join(fx)})
    return tasks


def tag(task: dict) -> str:
    return f"{task['case_id']}|{task['backend']}|{task['fixes']}"


def key(task: dict) -> tuple:
    return task["case_id"], task["backend"], task["fixes"]


def fix_list(task: dict) -> list[str]:
    return [f for f in task["fixes"].split(",") if f]


def work(task: dict) -> CellResult:
    """Runs in a worker process."""
    from .pipeline import run_cell

    workers.mark(tag(task))
    cache = Cache(task["cache_dir"]) if task.get("cache_dir") else None
    row = run_cell(ConvCase.from_dict(task["case"]), task["backend"], fix_list(task), cache)
    if "prepared_s" in task:  # its static stages ran in this run's per-case step, not a cache
        row.cached = False
        row.cell_time_s = round((row.cell_time_s or 0) + task["prepared_s"], 3)
    return row


def prepare_work(task: dict) -> dict:
    """Runs in a worker: the static stages of all of one case's lanes, shared work once.
    -> {(backend, fixes): (row, final)} (pipeline.prepare_lanes)."""
    from .pipeline import prepare_lanes

    workers.mark(f"{task['case_id']}|prepare")
    return prepare_lanes(ConvCase.from_dict(task["case"]), task["lanes"], Cache(task["cache_dir"]))


def by_case(tasks: list[dict]) -> dict[str, list[dict]]:
    grouped: dict[str, list[dict]] = {}
    for t in tasks:
        grouped.setdefault(t["case_id"], []).append(t)
    return grouped


def header(config: RunConfig, n_cases: int) -> dict:
    from .backends.base import registered_runtime_backends
    from .runtimes import load as runtime

    with runtime.use(config.vulkan_runtime):
        registered = [n for n in registered_runtime_backends()
                      if n != "VulkanBackend" or runtime.vulkan_enabled()]
    extra = {"vulkan": runtime.describe(config.vulkan_runtime)} if "vulkan" in config.backends else {}
    return {"versions": versions.stack(), "registered_backends": registered, **extra,
            "python": sys.version.split()[0], "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "argv": sys.argv[1:], "cases": n_cases, **config.__dict__}


def execute(out_dir: Path, config: RunConfig, cases: list[ConvCase], *,
            progress: bool = True, done_rows: list[CellResult] | None = None):
    from .runtimes.load import use

    with use(config.vulkan_runtime):  # cached_row asks whether the runtime is there
        return _execute(out_dir, config, cases, progress, done_rows)


def _execute(out_dir: Path, config: RunConfig, cases: list[ConvCase], progress: bool,
             done_rows: list[CellResult] | None):
    tasks = cells(cases, config)
    done_rows = done_rows or []
    done = {r.key for r in done_rows}
    todo = [t for t in tasks if key(t) not in done]
    log_dir = str(out_dir / "logs")
    # Without a cache (--no-cache) the prepared programs still need a home between the
    # per-case preparation and the per-cell execution: a folder of the run, removed at the end.
    scratch = out_dir / "prepared" if not config.cache_dir else None
    cache_dir = config.cache_dir or str(scratch)
    cache = Cache(cache_dir)
    for t in todo:
        t["cache_dir"] = cache_dir
    journal = journal_mod.Journal(out_dir / "journal.jsonl")
    rows = {r.key: r for r in done_rows}
    t0 = time.perf_counter()
    bar = _progress(len(tasks), len(done_rows), progress)
    from .pipeline import cached_row, crash_row
    from .runtimes.load import load as load_runtime
    from .status import Status

    pool = dict(jobs=config.jobs, timeout=config.timeout, on_start=load_runtime,
                on_start_args=(config.vulkan_runtime,))

    from .from_model import case_sources

    sources = case_sources(config.case_files)

    def record(row: CellResult) -> None:
        row.source = sources.get(row.case_id, row.source)  # a note beside the case, not in it
        journal.append(row.to_row())
        rows[row.key] = row
        bar.set_postfix_str(f"{row.status} {row.backend}", refresh=False)
        bar.update(1)

    # 1. Per case, once: eager, quantization, export; then every lane lowered (prepare.py).
    #    Cells whose verdict needs no execution are final here; the others wait for step 2.
    #    A case whose preparation dies is left to step 2, where each cell prepares alone.
    unprepared = by_case([t for t in todo if cache.load_meta(cache_key(
        t["case_id"], t["backend"], fix_list(t))) is None])
    prep_tasks = [{"case": ts[0]["case"], "case_id": cid, "cache_dir": cache_dir,
                   "lanes": [(t["backend"], fix_list(t)) for t in ts]}
                  for cid, ts in unprepared.items()]
    finished = set()
    prep_runs = workers.run(prep_tasks, prepare_work, log_dir=log_dir, lowering=True, **pool)
    for n, (prep, result, _death) in enumerate(prep_runs, 1):
        # cells move only when final here or executed in step 2: say where step 1 is
        bar.set_postfix_str(f"prepared {n}/{len(prep_tasks)} cases")
        for t in unprepared[prep["case_id"]]:
            row, final = (result or {}).get((t["backend"], t["fixes"]), (None, False))
            if final:
                record(row)
                finished.add(key(t))
            elif row is not None:
                t["prepared_s"] = row.cell_time_s
    # 2. Per cell: execution (in a worker, so a native crash costs one cell).
    need_worker = []
    for t in todo:
        if key(t) in finished:
            continue
        row = cached_row(ConvCase.from_dict(t["case"]), t["backend"], fix_list(t), cache)
        if row is None:
            need_worker.append(t)
        else:
            record(row)
    def outcome(task, row, death, logs) -> CellResult:
        if row is not None:
            return row
        said = workers.crash_output(logs, tag(task))
        return crash_row(ConvCase.from_dict(task["case"]), task["backend"], fix_list(task),
                         death + (f"; it printed: {said}" if said else ""), cache)

    # A failure in a worker that served earlier cells may be state those cells left behind:
    # such a cell is re-run alone in a fresh process, and the alone outcome is what is recorded.
    failed = {Status.CRASH.value, Status.RUNTIME_ERROR.value}
    shared: dict = {}
    for task, row, death in workers.run(need_worker, work, log_dir=log_dir, **pool):
        row = outcome(task, row, death, log_dir)
        before = workers.history(log_dir, tag(task))
        if row.status in failed and before:
            shared[key(task)] = (task, row, before[-1])
            continue
        record(row)
    alone_logs = str(out_dir / "logs" / "alone")
    for task, row, death in workers.run([t for t, _, _ in shared.values()], work,
                                        log_dir=alone_logs, max_tasks=1, **pool):
        row = outcome(task, row, death, alone_logs)
        _, first, previous = shared[key(task)]
        row.isolation = isolation_note(first, row, previous)
        record(row)
    bar.close()
    if scratch is not None:
        shutil.rmtree(scratch, ignore_errors=True)
    ordered = [rows[key(t)] for t in tasks if key(t) in rows]
    df = matrix.frame([r.to_row() for r in ordered])
    matrix.write(df, out_dir)
    meta = json.loads((out_dir / "run.json").read_text())
    meta["duration_s"] = round(meta.get("duration_s", 0) + time.perf_counter() - t0, 1)
    meta["cells"] = len(ordered)
    (out_dir / "run.json").write_text(json.dumps(meta, indent=1))
    return df


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
    (out_dir / "cases.json").write_text(json.dumps([c.to_dict() for c in cases], indent=1))
    (out_dir / "run.json").write_text(json.dumps(header(config, len(cases)), indent=1))
    for stale in ("journal.jsonl", "matrix.csv", "matrix.json"):
        (out_dir / stale).unlink(missing_ok=True)


def load_run(out_dir: Path) -> tuple[RunConfig, list[ConvCase]]:
    meta = json.loads((out_dir / "run.json").read_text())
    keys = RunConfig.__dataclass_fields__
    config = RunConfig(**{k: v for k, v in meta.items() if k in keys})
    cases = [ConvCase.from_dict(c) for c in json.loads((out_dir / "cases.json").read_text())]
    return config, cases


def validate_names(backends: list[str], fixes: str | None) -> list[str]:
    """Raise KeyError naming the first unknown backend or fix."""
    for b in backends:
        backend_registry.get(b)
    return fix_registry.parse(fixes)


def default_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
