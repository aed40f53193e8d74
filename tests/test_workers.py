"""Crash isolation: a real os.abort()/segfault/hang in a worker becomes that cell's death, the
pool replaces the worker and the other cells still finish."""

import concurrent.futures
import ctypes
import os
import time

from harness.run import workers


def _cell(task):
    kind = task["kind"]
    workers.mark(task["name"])
    if kind == "abort":
        print("about to abort: make_ivec2 (ints.size() == 2) is false", flush=True)
        os.write(2, b"native says goodbye\n")
        os.abort()
    if kind == "segv":
        ctypes.string_at(0)
    if kind == "hang":
        time.sleep(60)
    return {"name": task["name"], "pid": os.getpid()}


def test_abort_segfault_and_hang_do_not_take_the_run_down(tmp_path):
    tasks = [{"name": "ok1", "kind": "ok"}, {"name": "boom", "kind": "abort"},
             {"name": "segv", "kind": "segv"}, {"name": "hang", "kind": "hang"},
             {"name": "ok2", "kind": "ok"}, {"name": "ok3", "kind": "ok"}]
    log_dir = str(tmp_path / "logs")
    results = {t["name"]: (r, death) for t, r, death in
               workers.run(tasks, _cell, jobs=2, timeout=8, log_dir=log_dir)}
    assert set(results) == {t["name"] for t in tasks}
    for ok in ("ok1", "ok2", "ok3"):
        assert results[ok][1] is None and results[ok][0]["name"] == ok
    assert results["boom"][0] is None and "SIGABRT" in results["boom"][1]
    assert results["segv"][0] is None and "SIGSEGV" in results["segv"][1]
    assert results["hang"][0] is None and "timeout" in results["hang"][1]
    said = workers.crash_output(log_dir, "boom")
    assert "native says goodbye" in said and "make_ivec2" in said


class _DiesWhenRead:
    """A task whose unpickling ends the worker: it dies after taking the task from pebble's
    channel, inside the channel's lock, before acknowledging it (what a worker killed for memory
    while reading a large program does). pebble alone leaves the task pending for ever and the
    pool's other workers stalled."""

    def __reduce__(self):
        return (os._exit, (3,))


def _until_done(pool, futures, seconds=240):
    """Wait as the runner does: rescue after each wait; fail (not hang) past ``seconds``."""
    deadline = time.monotonic() + seconds
    said = []
    while not all(f.done() for f in futures):
        assert time.monotonic() < deadline, f"still pending after {seconds} s; said {said}"
        concurrent.futures.wait(futures, timeout=1, return_when="FIRST_COMPLETED")
        said += pool.rescue() if isinstance(pool, workers.Pool) else pool.poll()
    return said


def test_a_worker_dying_inside_the_channel_does_not_stall_the_run(tmp_path):
    with workers.Pool(jobs=2, timeout=60, log_dir=str(tmp_path), grace=5) as pool:
        names = ["ok1", "lost", "ok2", "ok3"]
        futures = {pool.submit(_cell, _DiesWhenRead() if n == "lost" else {"name": n, "kind": "ok"}): n
                   for n in names}
        said = _until_done(pool, list(futures))
    got = {n: pool.outcome(f) for f, n in futures.items()}
    for n in ("ok1", "ok2", "ok3"):
        assert got[n][1] is None and got[n][0]["name"] == n
    assert got["lost"][0] is None and "LostTask" in got["lost"][1] and "3 times" in got["lost"][1]
    assert any("given up" in line for line in said), said


def test_pools_keep_at_most_limit_alive_and_finish_every_task(tmp_path):
    made = []

    def make(key):
        assert pools.live == []  # the idle pool was closed before this one starts
        made.append(key)
        return workers.Pool(jobs=1, timeout=60, log_dir=str(tmp_path / key))

    with workers.Pools(make, limit=1) as pools:
        futures = {pools.submit(key, _cell, {"name": f"{key}{i}", "kind": "ok"}): f"{key}{i}"
                   for i in range(2) for key in ("a", "b", "c")}
        _until_done(pools, list(futures))
        assert len(pools.live) == 1
    assert sorted(set(made)) == ["a", "b", "c"]
    for f, name in futures.items():
        assert pools.outcome(f)[0]["name"] == name
    pids = {pools.outcome(f)[0]["pid"] for f in futures}
    assert len(pids) >= 3  # each key's tasks ran in its own pool's worker


def test_a_waiting_key_takes_an_idle_pools_place_only_with_a_batch_or_at_the_end(tmp_path):
    """Pools(batch=3): a key with fewer than 3 tasks queued waits beside an idle pool while more
    may come (no pool started and closed for one cell); with 3 it takes the idle pool's place,
    and after ``finish`` (no more tasks) any waiting key does."""
    made = []

    def make(key):
        made.append(key)
        return workers.Pool(jobs=1, timeout=60, log_dir=str(tmp_path / key))

    def task(name):
        return {"name": name, "kind": "ok"}

    with workers.Pools(make, limit=1, batch=3) as pools:
        _until_done(pools, [pools.submit("a", _cell, task("a0"))])  # a's pool is idle now
        b = [pools.submit("b", _cell, task(f"b{i}")) for i in range(2)]
        _until_done(pools, [pools.submit("a", _cell, task("a1"))])  # a runs where it lives
        assert pools.live == ["a"] and not any(f.done() for f in b)
        b.append(pools.submit("b", _cell, task("b2")))
        _until_done(pools, b)
        assert made == ["a", "b"] and pools.live == ["b"]
        c = pools.submit("c", _cell, task("c0"))
        assert pools.live == ["b"] and not c.done()
        pools.finish()
        _until_done(pools, [c])
    assert made == ["a", "b", "c"]
    assert [pools.outcome(f)[0]["name"] for f in b] == ["b0", "b1", "b2"]


def _alive(pid: int) -> bool:
    """A process that still runs (a zombie, ended and not yet reaped, does not)."""
    try:
        return "\nState:\tZ" not in open(f"/proc/{pid}/status").read()
    except OSError:
        return False


def test_a_pool_left_at_the_end_of_its_with_leaves_no_worker_behind(tmp_path):
    """A run's execution pools close when the run ends: their workers exit then, not when the
    process that ran the run (an xdist worker running many runs) exits (issue #36: each run left
    its execution workers alive)."""
    with workers.Pool(jobs=2, timeout=60, log_dir=str(tmp_path)) as pool:
        futures = [pool.submit(_cell, {"name": f"ok{i}", "kind": "ok"}) for i in range(4)]
        concurrent.futures.wait(futures, timeout=60)
    pids = {pool.outcome(f)[0]["pid"] for f in futures}
    assert pids and not [pid for pid in pids if _alive(pid)]
