"""Crash isolation: a real os.abort()/segfault/hang in a worker becomes that cell's death, the
pool replaces the worker and the other cells still finish."""

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
