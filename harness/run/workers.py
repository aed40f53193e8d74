"""Isolated worker processes: a native abort, segfault or hang in one cell is that cell's CRASH.

A pebble ProcessPool replaces a worker that died and keeps the others; each worker pays the
torch/executorch import once and then serves many cells. Worker stdout/stderr go to one log file
per worker, with a marker line before each cell. While a cell's program loads and executes, the
worker points fds 1/2 at a file of that cell's own (``cell_log_path``: logs/cells/<hash>.log;
stages/execute.py ``captured``), echoed into the worker log afterwards and removed; a worker that
dies in the cell leaves it, and the crash row quotes its last lines (``crash_output``), e.g. the
Vulkan ``make_ivec2`` assert or a portable kernel's ``assert failed``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import multiprocessing
import os
import signal
import sys
import threading
import time
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Callable, Iterable, Iterator

from pebble import ProcessExpired, ProcessPool

from harness.status import machine_full

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

    from harness.chatter import hide_lowering_chatter

    hide_lowering_chatter()
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


def cell_log_path(log_dir: str | os.PathLike | None, tag: str) -> str | None:
    """Where a worker keeps what the runtime prints while cell ``tag`` executes (None: no log
    folder, a temporary file is used)."""
    if not log_dir:
        return None
    return str(Path(log_dir) / "cells" / (hashlib.sha1(tag.encode()).hexdigest()[:16] + ".log"))


def current_cell_log(tag: str) -> str | None:
    """``cell_log_path`` in this worker (its log folder, set by _init)."""
    return cell_log_path(_LOG_DIR, tag)


def cell_log(log_dir: str | None, tag: str, remove: bool = True) -> str:
    """What the runtime printed for cell ``tag`` in a worker that died inside it (the per-cell
    file it left, noise dropped); "" when there is none."""
    path = cell_log_path(log_dir, tag)
    if path is None or not os.path.exists(path):
        return ""
    from harness.stages.execute import clean_log

    try:
        with open(path, errors="replace") as fh:
            text = clean_log(fh.read())
        if remove:
            os.unlink(path)
    except OSError:
        return ""
    return text


def crash_output(log_dir: str | None, tag: str, lines: int = 6) -> str:
    """The last lines a worker printed after starting cell ``tag``: its per-cell runtime log
    when it died while the program ran, else the worker log after the cell's marker."""
    said = cell_log(log_dir, tag, remove=False)
    if said:
        return " | ".join(said.splitlines()[-lines:])
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


def outcome(future, timeout: float | None) -> tuple[object, str | None]:
    """A finished future -> (result, None) or (None, how its worker died)."""
    try:
        return future.result(), None
    except Exception as e:  # the worker died or hung: that task only
        if full := machine_full(e):  # a full disk is the machine's: the run stops (cli/run.py)
            raise full from None
        return None, describe_death(e, timeout)


class LostTask(RuntimeError):
    """A task its pool never started: the worker that took it died first, three times."""


class Pool:
    """A pool whose tasks are submitted as they become known (``submit``), e.g. a case's cells as
    soon as its preparation is done; ``outcome`` of a finished future is (result, None) or
    (None, death description).

    A worker that dies after taking a task from pebble's channel and before acknowledging it
    (e.g. killed for memory while it read a large program) leaves that task pending for ever
    (pebble only fails the tasks a dead worker had started) and, dying inside the channel's
    lock, stalls every other worker of the pool: none can take a task or send a result.
    ``rescue``, called now and then, sees a task not started although a worker was free for
    ``grace`` seconds with nothing moving, and moves every unfinished task to a new pool (new
    channel); a task lost three times fails with ``LostTask``. A pool pebble gave up on
    (broken) is replaced the same way at the next submit."""

    def __init__(self, *, jobs: int, timeout: float | None, log_dir: str | None = None,
                 max_tasks: int = 50, on_start: Callable | None = None, on_start_args: tuple = (),
                 lowering: bool = False, grace: float = 300.0):
        threads = max(1, (os.cpu_count() or 1) // max(1, jobs))
        self.jobs, self.timeout, self.grace = jobs, timeout, grace
        self._new = lambda: ProcessPool(max_workers=jobs, max_tasks=max_tasks, initializer=_init,
                                        initargs=(log_dir, threads, on_start, on_start_args),
                                        context=_context(lowering))
        self._pool = self._new()
        # outer future (what the caller waits on) -> (pebble's future, fn, task, times lost)
        self._open: dict = {}
        self._state, self._since = (0, 0), time.monotonic()

    def submit(self, fn: Callable, task, future: concurrent.futures.Future | None = None
               ) -> concurrent.futures.Future:
        outer = future or concurrent.futures.Future()
        self._schedule(outer, fn, task, 0)
        return outer

    def _schedule(self, outer, fn: Callable, task, lost: int) -> None:
        try:
            inner = self._pool.schedule(fn, args=(task,), timeout=self.timeout)
        except RuntimeError:  # pebble gave this pool up (broken): a new one takes the task
            self._replace()
            inner = self._pool.schedule(fn, args=(task,), timeout=self.timeout)
        self._open[outer] = (inner, fn, task, lost)
        inner.add_done_callback(lambda f: self._relay(f, outer))

    def _relay(self, inner, outer) -> None:
        """pebble's future, finished, to the caller's: only the task's current one (a task moved
        to a new pool is answered by its new future, not by the old pool's abort)."""
        if self._open.get(outer, (None,))[0] is not inner or inner.cancelled():
            return
        error = inner.exception()
        if isinstance(error, BrokenProcessPool):  # not the task's doing: rescue moves it
            return
        try:
            outer.set_exception(error) if error is not None else outer.set_result(inner.result())
        except concurrent.futures.InvalidStateError:  # decided meanwhile (given up)
            pass

    def _replace(self) -> None:
        old, self._pool = self._pool, self._new()
        old.stop()  # its workers are killed in the background: joining may wait on the lock
        threading.Thread(target=old.join, daemon=True).start()

    def busy(self) -> bool:
        return any(not outer.done() for outer in self._open)

    def rescue(self) -> list[str]:
        """Move the unfinished tasks to a new pool when one was lost (see the class); -> one
        line per task lost, for the run's log."""
        self._open = {o: e for o, e in self._open.items() if not o.done()}
        waiting = {o for o, (inner, *_) in self._open.items() if not inner.running()}
        broken = any(inner.done() for inner, *_ in self._open.values())  # BrokenProcessPool
        state, now = (len(self._open) - len(waiting), len(self._open)), time.monotonic()
        if state != self._state and not broken:  # something started or finished: all well
            self._state, self._since = state, now
            return []
        stalled = waiting and state[0] < self.jobs and now - self._since >= self.grace
        if not (broken or stalled):
            return []
        said, moved = [], list(self._open.items())  # in submission order
        # Workers take tasks in submission order: the one a dead worker took is the oldest
        # not started; the others only wait behind it (they move without blame).
        blamed = next((o for o, _ in moved if o in waiting), None)
        self._open = {}
        self._replace()
        for outer, (inner, fn, task, lost) in moved:
            inner.cancel()
            if outer is not blamed:
                self._schedule(outer, fn, task, lost)
                continue
            name = getattr(task, "tag", type(task).__name__)
            if lost >= 2:
                outer.set_exception(LostTask(f"never started: the workers that took it died "
                                             f"{lost + 1} times"))
                said.append(f"{name}: never started ({lost + 1} times), given up")
            else:
                said.append(f"{name}: its worker died before starting it (pool "
                            f"{'broken' if broken else 'stalled'}); the pool's tasks move to a "
                            f"new pool")
                self._schedule(outer, fn, task, lost + 1)
        self._state, self._since = (0, 0), now
        return said

    def outcome(self, future) -> tuple[object, str | None]:
        return outcome(future, self.timeout)

    def close(self) -> None:
        """Let the workers finish and wait for them to exit (a minute at most, then stop them):
        pebble's ``close`` alone leaves them alive while its manager thread idles, and a process
        that runs many runs (a test session's xdist worker) kept every run's execution workers,
        about 200 MiB each (issue #36's footprint)."""
        self._pool.close()
        try:
            self._pool.join(timeout=60)
        except TimeoutError:
            self._pool.stop()
            self._pool.join()

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, kind, *exc) -> None:
        if kind is None:
            self.close()
        else:  # interrupted: stop the workers now, what was recorded stays recorded
            self._pool.stop()


class Pools:
    """Pools keyed by what their workers load (one Vulkan plug-in each), at most ``limit`` alive.

    Every worker holds torch, the lowering stack and a runtime (about 1 GB): a run with a plug-in
    per fix (``--fixes each``: nine) that kept ``jobs`` workers per plug-in ran out of memory and
    lost tasks. A key's tasks wait (their futures pending) until its pool is alive; a pool with
    nothing left to do is closed to make room. ``poll`` (after each wait) does that and rescues
    lost tasks.

    A waiting key takes an idle pool's place only with ``batch`` tasks queued, or once
    ``finish`` says no more are coming: a run's cases come one by one as they are lowered, each
    with a cell or two per plug-in, and a pool started for one cell and closed for the next
    key's (two worker starts each, every worker loading torch and a plug-in) made a cold
    ``--fixes each`` leg start ~30 pools for 12 cases, and a worker still starting when its pool
    closed printed a traceback (its pool's semaphores gone)."""

    def __init__(self, make: Callable[[object], Pool], limit: int, batch: int = 1):
        self._make, self._limit, self._batch = make, max(1, limit), max(1, batch)
        self._alive: dict = {}
        self._queued: dict = {}
        self._used: dict = {}
        self._final = False
        self.timeout: float | None = None

    def finish(self) -> None:
        """No more tasks will be submitted: every waiting key may take an idle pool's place."""
        self._final = True
        self.poll()

    def submit(self, key, fn: Callable, task) -> concurrent.futures.Future:
        outer = concurrent.futures.Future()
        self._queued.setdefault(key, []).append((outer, fn, task))
        self._used[key] = time.monotonic()  # the least recently used idle pool makes room
        self.poll()
        return outer

    def poll(self) -> list[str]:
        said = [line for pool in self._alive.values() for line in pool.rescue()]
        for key in list(self._queued):
            if key not in self._alive:
                if len(self._alive) >= self._limit:
                    if len(self._queued[key]) < self._batch and not self._final:
                        continue  # too few to start a pool for yet: more will come
                    idle = [k for k, p in self._alive.items()
                            if not p.busy() and not self._queued.get(k)]
                    if not idle:
                        continue  # every live pool still has work: this key waits
                    self._alive.pop(min(idle, key=self._used.__getitem__)).close()
                self._alive[key] = self._make(key)
                self.timeout = self._alive[key].timeout
            for outer, fn, task in self._queued.pop(key):
                self._alive[key].submit(fn, task, outer)
        return said

    @property
    def live(self) -> list:
        """The keys whose pools are alive now."""
        return list(self._alive)

    def outcome(self, future) -> tuple[object, str | None]:
        return outcome(future, self.timeout)

    def __enter__(self) -> Pools:
        return self

    def __exit__(self, kind, *exc) -> None:
        for pool in self._alive.values():
            pool.__exit__(kind, *exc)
