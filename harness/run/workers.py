"""Isolated worker processes: a native abort, segfault or hang in one cell is that cell's CRASH.

A pebble ProcessPool replaces a worker that died and keeps the others; each worker pays the
torch/executorch import once and then serves many cells. Worker stdout/stderr go to one log file
per worker, with a marker line before each cell, so a crash row can quote what the runtime
printed as it died (e.g. the Vulkan ``make_ivec2`` assert).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import multiprocessing
import os
import signal
import sys
from pathlib import Path
from typing import Callable, Iterable, Iterator

from pebble import ProcessExpired, ProcessPool

MARK = "@@convconf cell "
# Workers fork from a server process that imported torch once ("forkserver" with preload): a new
# worker (the first ones, a replacement after a crash, after max_tasks) starts in milliseconds
# instead of importing torch again (~2.5 s each). The server only imports: no torch op has run
# and no runtime is loaded there, so nothing that dislikes fork (OpenMP pools, a Vulkan
# instance) exists before a fork; each worker loads the runtime itself (on_start).
# The server starts with a process's first pool and serves it for its lifetime: when that pool
# lowers (a cold run), the server also imports the lowering stack (~6 s that every lowering
# worker would otherwise pay itself); an execution-only run (warm) keeps it light.
PRELOAD = ["harness.run.preload"]
LOWERING = ["harness.run.preload_lowering"]


def _context(lowering: bool = False):
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD + (LOWERING if lowering else []))
    return ctx
_LOG_DIR: Path | None = None


def _init(log_dir: str | None, threads: int, on_start: Callable | None = None,
          on_start_args: tuple = ()) -> None:
    global _LOG_DIR
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    if log_dir:
        _LOG_DIR = Path(log_dir)
        _LOG_DIR.mkdir(parents=True, exist_ok=True)
        fd = os.open(_LOG_DIR / f"worker-{os.getpid()}.log",
                     os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(fd, 1)
        os.dup2(fd, 2)
    import threading

    import torch
    from tqdm import tqdm

    # torch.fx's interpreter opens a tqdm bar, whose default lock is a multiprocessing
    # semaphore; a worker stopped at the pool's end then "leaks" it (resource_tracker warns at
    # exit). A worker's bars never need a cross-process lock.
    tqdm.set_lock(threading.RLock())
    torch.set_num_threads(threads)
    from harness.stages import cell  # noqa: F401  (pay the heavy imports once per worker)

    if on_start:  # e.g. load the Vulkan runtime plug-in before the first cell
        on_start(*on_start_args)


def mark(tag: str) -> None:
    """Write the cell marker to this worker's log (fd 2 is the log after _init)."""
    os.write(2, f"\n{MARK}{tag}\n".encode())


def crash_output(log_dir: str | None, tag: str, lines: int = 6) -> str:
    """The last lines a worker printed after starting cell ``tag``."""
    if not log_dir:
        return ""
    for path in Path(log_dir).glob("worker-*.log"):
        text = path.read_text(errors="replace")
        at = text.rfind(f"{MARK}{tag}\n")
        if at >= 0:
            tail = [ln for ln in text[at:].splitlines()[1:] if ln.strip()
                    and "cpuinfo_utils" not in ln]
            return " | ".join(tail[-lines:])
    return ""


def history(log_dir: str | None, tag: str) -> list[str]:
    """The cells a worker had served before it started cell ``tag`` (oldest first); empty when
    ``tag`` ran in a fresh worker. Read from the per-worker logs' markers."""
    if not log_dir:
        return []
    for path in Path(log_dir).glob("worker-*.log"):
        text = path.read_text(errors="replace")
        at = text.rfind(f"{MARK}{tag}\n")
        if at >= 0:
            return [ln[len(MARK):] for ln in text[:at].splitlines() if ln.startswith(MARK)]
    return []


def describe_death(error: BaseException, timeout: float | None) -> str:
    if isinstance(error, ProcessExpired):
        code = error.exitcode
        if code is not None and code < 0:
            try:
                return f"worker killed by {signal.Signals(-code).name} (signal {-code})"
            except ValueError:
                return f"worker killed by signal {-code}"
        return f"worker exited with code {code}"
    if isinstance(error, concurrent.futures.TimeoutError):
        return f"timeout: cell did not finish within {timeout:g} s"
    return f"harness error in worker: {type(error).__name__}: {error}"


@contextlib.contextmanager
def one_worker(*, timeout: float | None, log_dir: str | None = None, lowering: bool = True,
               on_start: Callable | None = None, on_start_args: tuple = ()):
    """A worker kept for many calls (e.g. a shrinker's tries): yields ``call(fn, task) ->
    (result, None) | (None, death)``. A death costs only that call; pebble starts a new worker."""
    ctx = _context(lowering)
    threads = max(1, os.cpu_count() or 1)
    with ProcessPool(max_workers=1, initializer=_init, context=ctx,
                     initargs=(log_dir, threads, on_start, on_start_args)) as pool:
        def call(fn: Callable, task):
            try:
                return pool.schedule(fn, args=(task,), timeout=timeout).result(), None
            except Exception as e:  # the worker died or hung
                return None, describe_death(e, timeout)

        yield call


def run(tasks: Iterable, fn: Callable, *, jobs: int, timeout: float | None,
        log_dir: str | None = None, max_tasks: int = 50, on_start: Callable | None = None,
        on_start_args: tuple = (), lowering: bool = False
        ) -> Iterator[tuple[object, object, str | None]]:
    """Yield (task, result, None) or (task, None, death description) as cells finish.

    ``fn(task)`` runs in a worker; ``task`` must be picklable. Order is completion order.
    ``max_tasks=1`` gives every task a fresh process of its own. ``on_start(*on_start_args)``
    runs once in each worker before its first task. ``lowering``: the tasks lower programs
    (see LOWERING)."""
    tasks = list(tasks)
    if not tasks:  # nothing to execute: do not pay for starting workers
        return
    jobs = min(jobs, len(tasks))  # pebble starts every worker up front: no idle ones
    threads = max(1, (os.cpu_count() or 1) // max(1, jobs))
    ctx = _context(lowering)
    with ProcessPool(max_workers=jobs, max_tasks=max_tasks, initializer=_init,
                     initargs=(log_dir, threads, on_start, on_start_args), context=ctx) as pool:
        futures = {pool.schedule(fn, args=(t,), timeout=timeout): t for t in tasks}
        try:
            for fut in concurrent.futures.as_completed(futures):
                task = futures[fut]
                try:
                    yield task, fut.result(), None
                except Exception as e:  # the worker died or hung: that cell only
                    yield task, None, describe_death(e, timeout)
        finally:
            for fut in futures:
                fut.cancel()


class Pool:
    """A pool whose tasks are submitted as they become known (``submit``), e.g. a case's cells as
    soon as its preparation is done; ``outcome`` of a finished future is (result, None) or
    (None, death description)."""

    def __init__(self, *, jobs: int, timeout: float | None, log_dir: str | None = None,
                 max_tasks: int = 50, on_start: Callable | None = None, on_start_args: tuple = (),
                 lowering: bool = False):
        threads = max(1, (os.cpu_count() or 1) // max(1, jobs))
        self.timeout = timeout
        self._pool = ProcessPool(max_workers=jobs, max_tasks=max_tasks, initializer=_init,
                                 initargs=(log_dir, threads, on_start, on_start_args),
                                 context=_context(lowering))

    def submit(self, fn: Callable, task) -> concurrent.futures.Future:
        return self._pool.schedule(fn, args=(task,), timeout=self.timeout)

    def outcome(self, future) -> tuple[object, str | None]:
        try:
            return future.result(), None
        except Exception as e:  # the worker died or hung: that task only
            return None, describe_death(e, self.timeout)

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, kind, *exc) -> None:
        if kind is None:
            self._pool.close()
        else:  # interrupted: stop the workers now, what was recorded stays recorded
            self._pool.stop()
        self._pool.join()
