"""Faults on purpose (issue 49): real ``harness run`` processes disturbed while they work, each
run's matrix compared with an undisturbed run's. Seeded, bounded in time, no sleeps (a fault
waits for the event it is aimed at: a worker's cell marker, a journal row).

  concurrent   two runs on one cache at once: the same cases, and overlapping cases
  kill         kill -9 of a lowering worker, an execution worker or the parent, at the k-th
               task of its kind (k drawn from the seed); a killed parent is resumed (--resume)
  disk         the journal on a full disk (RLIMIT_FSIZE in the run's preexec_fn: the run stops
               with one line, then --resume without the limit), and the cache on a full disk
               (a small tmpfs when this user may mount one)
  corrupt      a warm cache with one entry's program.pte bit-flipped or truncated

Per fault: cells lost (rows missing against the undisturbed matrix), verdicts that differ
(status or max_abs_error), the line where the run had to stop, and wall time against the
undisturbed run's. Usage:

  python benchmarks/bench_faults.py [--faults concurrent kill disk corrupt] [--kills 3]
                                    [--seed 0] [--jobs 1] [--work DIR]

``tests/test_faults.py`` runs the same faults (its fast ones in the fast tier).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
COLUMNS = ["case_id", "backend", "fixes", "status", "max_abs_error"]
MARK = "@@convconf cell "
DEADLINE_S = 600.0


def small_cases(n: int = 6) -> list[dict]:
    """Small XNNPACK-friendly conv cases (fp32 conv1d, kernels 1-3, padding 0 and 'valid')."""
    from harness.spec import ConvCase

    cases = [ConvCase(dim=1, in_channels=2, out_channels=2, kernel_size=k, padding=p,
                      input_shape=(1, 2, 10)) for k in (1, 2, 3, 4) for p in (0, "valid")]
    return [c.to_dict() for c in cases[:n]]


def write_cases(path: Path, cases: list[dict]) -> Path:
    path.write_text(json.dumps(cases))
    return path


@dataclass
class Outcome:
    """One fault run: what it injected, what it cost and what it changed."""
    fault: str
    injected: int = 0           # faults that landed (a process killed, a limit hit, ...)
    cells: int = 0
    lost: int = 0               # cells of the undisturbed matrix missing from this one
    differ: list = field(default_factory=list)  # (case_id, lane, undisturbed, this) that differ
    stop_lines: list = field(default_factory=list)  # what the run said where it had to stop
    wall_s: float = 0.0
    note: str = ""

    @property
    def equal(self) -> bool:
        return self.lost == 0 and not self.differ

    def line(self, base_s: float) -> str:
        over = f"{100 * (self.wall_s - base_s) / base_s:+.0f}%" if base_s else "-"
        return (f"{self.fault:<34} injected {self.injected:>2}  cells {self.cells:>3}  lost "
                f"{self.lost}  differ {len(self.differ)}  matrices equal: "
                f"{'yes' if self.equal else 'no'}  wall {self.wall_s:6.1f} s ({over})"
                + (f"  [{self.note}]" if self.note else ""))


def harness_cmd(*args) -> list[str]:
    return [sys.executable, "-m", "harness", *map(str, args)]


def run_args(out: Path, cases: Path, cache: Path | None, jobs: int) -> list:
    args = ["run", "--out", out, "--cases", cases, "--max-examples", 0, "--backends", "xnnpack",
            "--no-progress", "--no-report", "-j", jobs]
    return args + (["--cache", cache] if cache else ["--no-cache"])


def start(args: list, fsize: int | None = None, env: dict | None = None) -> subprocess.Popen:
    """A harness command in a session of its own (its workers with it); ``fsize``: the
    largest file it may write (RLIMIT_FSIZE, inherited by its workers): a full disk."""
    def limit():
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    return subprocess.Popen(harness_cmd(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, preexec_fn=limit, cwd=ROOT,
                            env={**os.environ, **(env or {})})


def finish(proc: subprocess.Popen, timeout: float = DEADLINE_S) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise RuntimeError(f"{proc.args[3:5]} did not finish in {timeout:g} s") from None
    return proc.returncode, out, err


def session_alive(sid: int) -> list[int]:
    """Processes still in session ``sid`` (a killed parent's workers, if any outlived it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getsid(int(entry.name)) == sid:
                    stat = (entry / "stat").read_text()
                    if stat.rsplit(")", 1)[1].split()[0] != "Z":
                        found.append(int(entry.name))
            except (OSError, IndexError):
                continue
    return found


def wait_gone(pids: list[int], timeout: float) -> list[int]:
    """Wait (on each process's pidfd, no polling) until ``pids`` have exited or ``timeout``
    passed. -> those still alive."""
    deadline = time.monotonic() + timeout
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        finally:
            os.close(fd)
    return [p for p in pids if alive(p)]


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def matrix(folder: Path) -> pd.DataFrame:
    df = pd.read_csv(folder / "matrix.csv")
    return df[COLUMNS].sort_values(["case_id", "backend", "fixes"]).reset_index(drop=True)


def compare(fault: str, base: pd.DataFrame, folder: Path) -> Outcome:
    got = matrix(folder) if (folder / "matrix.csv").exists() else base.iloc[0:0]
    o = Outcome(fault, cells=len(got))
    keys = ["case_id", "backend", "fixes"]
    merged = base.merge(got, on=keys, how="left", suffixes=("", "_got"), indicator=True)
    o.lost = int((merged["_merge"] == "left_only").sum())
    for _, r in merged[merged["_merge"] == "both"].iterrows():
        same_err = (pd.isna(r["max_abs_error"]) and pd.isna(r["max_abs_error_got"])) or \
            r["max_abs_error"] == r["max_abs_error_got"]
        if r["status"] != r["status_got"] or not same_err:
            o.differ.append((r["case_id"], r["backend"], r["status"], r["status_got"]))
    return o


def markers(logs: Path) -> list[tuple[int, str]]:
    """(worker pid, tag) of every cell a worker started, in the order the workers wrote them
    (per worker; workers interleave by file order)."""
    found = []
    for log in sorted(logs.glob("worker-*.log")):
        pid = int(log.stem.split("-")[1])
        try:
            text = log.read_text(errors="replace")
        except OSError:
            continue
        found += [(pid, ln[len(MARK):]) for ln in text.splitlines() if ln.startswith(MARK)]
    return found


def wait_for(proc: subprocess.Popen, ready, what: str, timeout: float = DEADLINE_S):
    """Poll ``ready()`` until it returns something, waiting on the process between looks (no
    sleep: a run that ends first is reported at once). -> ready()'s value, or None: ended."""
    deadline = time.monotonic() + timeout
    while True:
        got = ready()
        if got:
            return got
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not seen within {timeout:g} s")
        try:
            proc.wait(timeout=0.01)
            return ready() or None
        except subprocess.TimeoutExpired:
            continue


def journal_rows(folder: Path) -> int:
    try:
        return (folder / "journal.jsonl").read_bytes().count(b"\n")
    except OSError:
        return 0


class Bench:
    def __init__(self, work: Path, jobs: int, seed: int, n_cases: int = 6):
        self.work, self.jobs, self.rng = work, jobs, random.Random(seed)
        work.mkdir(parents=True, exist_ok=True)
        self.cases = small_cases(n_cases)
        self.case_file = write_cases(work / "cases.json", self.cases)
        base_dir = work / "undisturbed"
        t = time.perf_counter()
        code, _, err = finish(start(run_args(base_dir, self.case_file, None, jobs)))
        self.base_s = time.perf_counter() - t
        if code:
            raise RuntimeError(f"the undisturbed run failed (exit {code}): {err[-500:]}")
        self.base = matrix(base_dir)

    def fresh(self, name: str) -> Path:
        path = self.work / name
        shutil.rmtree(path, ignore_errors=True)
        return path

    # -- two runs, one cache ------------------------------------------------------------------
    def concurrent(self, overlap: bool) -> Outcome:
        name = "two runs, one cache" + (", overlapping cases" if overlap else ", same cases")
        cache = self.fresh(f"cache-concurrent-{int(overlap)}")
        half = len(self.cases) // 2
        files = [self.case_file, self.case_file]
        if overlap:  # the first two thirds and the last two thirds
            files = [write_cases(self.work / f"overlap-{i}.json", part) for i, part in
                     enumerate((self.cases[:half + 1], self.cases[half - 1:]))]
        t = time.perf_counter()
        procs = [start(run_args(self.fresh(f"concurrent-{int(overlap)}-{i}"), f, cache,
                                self.jobs)) for i, f in enumerate(files)]
        codes = [finish(p)[0] for p in procs]
        wall = time.perf_counter() - t
        from harness.spec import load_cases

        outs = [compare(name, self.base[self.base["case_id"].isin(
            [c.case_id for c in load_cases(f)])], self.work / f"concurrent-{int(overlap)}-{i}")
            for i, f in enumerate(files)]
        o = Outcome(name, injected=1, cells=sum(x.cells for x in outs),
                    lost=sum(x.lost for x in outs), differ=[d for x in outs for d in x.differ],
                    wall_s=wall, note=f"exit codes {codes}")
        # the cache afterwards serves a third run every cell, each the undisturbed verdict
        third = self.fresh(f"concurrent-{int(overlap)}-after")
        finish(start(run_args(third, self.case_file, cache, self.jobs)))
        after = compare(name, self.base, third)
        hits = pd.read_csv(third / "matrix.csv")["cached"].astype(bool).sum()
        o.lost += after.lost
        o.differ += after.differ
        o.note += f"; a third run on the cache: {hits}/{after.cells} cells from it"
        return o

    # -- kill -9 ------------------------------------------------------------------------------
    def kill_worker(self, kind: str, k: int) -> Outcome:
        """Kill the worker that starts the k-th task of ``kind`` (lowering: a case's prepare;
        execution: a cell) as soon as its marker is written."""
        name = f"kill -9 {kind} worker (task {k})"
        out = self.fresh(f"kill-{kind}-{k}")
        t = time.perf_counter()
        proc = start(run_args(out, self.case_file, None, self.jobs))
        want = (lambda tag: tag.endswith("|prepare")) if kind == "lowering" else \
            (lambda tag: not tag.endswith("|prepare"))

        def kth():
            seen = [m for m in markers(out / "logs") if want(m[1])]
            return seen[k - 1] if len(seen) >= k else None

        hit = wait_for(proc, kth, name)
        injected = 0
        if hit:
            try:
                os.kill(hit[0], signal.SIGKILL)
                injected = 1
            except ProcessLookupError:
                pass
        code, _, err = finish(proc)
        o = compare(name, self.base, out)
        o.injected, o.wall_s = injected, time.perf_counter() - t
        if (out / "matrix.csv").exists():  # what the matrix says of cells that died
            df = pd.read_csv(out / "matrix.csv")
            o.stop_lines = [str(m) for m in df.loc[df["status"] == "CRASH", "message"]]
        o.note = f"exit {code}; {hit[1] if hit else 'the run ended first'}"
        return o

    def kill_parent(self, k: int) -> Outcome:
        """Kill the parent (only it) once k cells are in the journal, then --resume."""
        name = f"kill -9 parent (after {k} cells), --resume"
        out = self.fresh(f"kill-parent-{k}")
        t = time.perf_counter()
        proc = start(run_args(out, self.case_file, None, self.jobs))
        hit = wait_for(proc, lambda: journal_rows(out) >= k, name)
        injected = 0
        if hit:
            os.kill(proc.pid, signal.SIGKILL)
            injected = 1
        proc.communicate()
        # its workers must not outlive it for long: wait on each (pidfd, bounded), then make sure
        lingering = len(wait_gone(session_alive(proc.pid), 60))
        if lingering:
            os.killpg(proc.pid, signal.SIGKILL)
        code, _, err = finish(start(["run", "--resume", out, "--no-progress", "--no-report"]))
        o = compare(name, self.base, out)
        o.injected, o.wall_s = injected, time.perf_counter() - t
        o.stop_lines = [ln for ln in err.splitlines() if "resuming" in ln][:1]
        o.note = f"resume exit {code}; workers alive 60 s after the parent: {lingering}"
        return o

    # -- a full disk --------------------------------------------------------------------------
    def full_journal(self, k: int) -> Outcome:
        """The parent's disk fills once k cells are journalled: RLIMIT_FSIZE set on the running
        parent alone (prlimit; the workers, forked from a server started before, keep
        theirs), just above the journal's size. The run stops with one line; --resume without
        the limit finishes it."""
        name = f"full disk: journal (after {k} cells)"
        out = self.fresh(f"full-journal-{k}")
        t = time.perf_counter()
        proc = start(run_args(out, self.case_file, None, self.jobs))
        injected = 0
        if wait_for(proc, lambda: journal_rows(out) >= k, name):
            size = (out / "journal.jsonl").stat().st_size + 100
            try:
                resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (size, size))
                injected = 1
            except ProcessLookupError:
                pass
        code, _, err = finish(proc)
        stop = [ln for ln in err.splitlines() if ln.startswith("convconf: error")]
        partial = journal_rows(out)
        rcode, _, rerr = finish(start(["run", "--resume", out, "--no-progress", "--no-report"]))
        o = compare(name, self.base, out)
        o.injected, o.wall_s, o.stop_lines = injected, time.perf_counter() - t, stop
        o.note = f"exit {code} after {partial} cells; resume exit {rcode}"
        return o

    def full_everywhere(self, limit: int = 6000) -> Outcome:
        """Every process of the run under one small file limit (RLIMIT_FSIZE from its start):
        ExecuTorch's serialization writes temporary files too, so lowering meets it first."""
        name = f"full disk: whole run ({limit // 1000} KB file limit)"
        out = self.fresh("full-everywhere")
        t = time.perf_counter()
        code, _, err = finish(start(run_args(out, self.case_file, None, self.jobs), fsize=limit))
        stop = [ln for ln in err.splitlines() if ln.startswith("convconf: error")]
        partial = journal_rows(out)
        rcode, _, rerr = finish(start(["run", "--resume", out, "--no-progress", "--no-report"]))
        o = compare(name, self.base, out)
        o.injected, o.wall_s, o.stop_lines = int(code != 0), time.perf_counter() - t, stop
        o.note = f"exit {code} after {partial} cells; resume exit {rcode}"
        return o

    def full_cache(self, size_kb: int = 24) -> Outcome:
        """The cache on a ``size_kb`` tmpfs: stores fail part way; the run goes on, one line."""
        name = f"full disk: cache ({size_kb} KB tmpfs)"
        mnt = self.fresh("tmpfs-cache")
        mnt.mkdir()
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs",
                                  str(mnt)], capture_output=True, text=True)
        if mounted.returncode:
            return Outcome(name, note=f"skipped: cannot mount a tmpfs here "
                                      f"({mounted.stderr.strip()[:60]})")
        try:
            out = self.fresh("full-cache")
            t = time.perf_counter()
            code, said, _ = finish(start(run_args(out, self.case_file, mnt, self.jobs)))
            o = compare(name, self.base, out)
            o.wall_s = time.perf_counter() - t
            o.stop_lines = [ln for ln in said.splitlines() if "could not be stored" in ln][:1]
            o.injected = int(bool(o.stop_lines))
            o.note = f"exit {code}; cache entries stored: {len(list(mnt.glob('*/*/meta.json')))}"
        finally:
            subprocess.run(["umount", str(mnt)], capture_output=True)
        return o

    # -- a corrupt entry ----------------------------------------------------------------------
    def corrupt(self, how: str) -> Outcome:
        name = f"corrupt cache entry ({how} program.pte)"
        cache = self.fresh(f"cache-corrupt-{how}")
        finish(start(run_args(self.fresh(f"corrupt-{how}-warm"), self.case_file, cache,
                              self.jobs)))
        ptes = sorted(cache.glob("*/*/program.pte"))
        victim = self.rng.choice(ptes)
        data = bytearray(victim.read_bytes())
        if how == "truncated":
            data = data[:self.rng.randrange(1, len(data))]
        else:
            data[self.rng.randrange(len(data))] ^= 1 << self.rng.randrange(8)
        victim.write_bytes(bytes(data))
        out = self.fresh(f"corrupt-{how}")
        t = time.perf_counter()
        code, _, err = finish(start(run_args(out, self.case_file, cache, self.jobs)))
        o = compare(name, self.base, out)
        o.wall_s, o.injected = time.perf_counter() - t, 1
        o.stop_lines = [ln for ln in err.splitlines() if "corrupt" in ln]
        fixed = (victim.parent / "program.pte").exists() and \
            json.loads((victim.parent / "meta.json").read_text())
        o.note = (f"exit {code}; {len(o.stop_lines)} warning line(s); entry replaced: "
                  f"{'yes' if fixed else 'no'}")
        return o


def nights(work: Path, jobs: int, bound: str = "", n: int = 5, examples: int = 3) -> None:
    """The nightly's cache after ``n`` simulated nights (each a run of ``examples`` generated
    cases with its own seed, XNNPACK), without a bound (cache A, as it grows) and with one
    (cache B: after each night, what the night stored or served, as it is in A, then pruned
    to the bound by `harness cache prune`'s own code): the sizes after every night."""
    from harness.cli import cache as cache_cli
    from harness.stages import cache as programs

    a, b = work / "nights-unbounded", work / "nights-bounded"
    for p in (a, b):
        shutil.rmtree(p, ignore_errors=True)
        p.mkdir(parents=True)
    limit = cache_cli.parse_size(bound) if bound else None
    print(f"{n} simulated nights: {examples} generated cases each (seed = night), xnnpack, "
          f"-j {jobs}")
    for night in range(1, n + 1):
        t0 = time.time()
        out = work / f"night-{night}"
        shutil.rmtree(out, ignore_errors=True)
        code, _, err = finish(start(
            ["run", "--out", out, "--max-examples", examples, "--seed", night, "--backends",
             "xnnpack", "--no-progress", "--no-report", "-j", jobs, "--cache", a],
            env={cache_cli.MAX_ENV: "0"}))
        used = [e for e in programs.entries(a) if e.last_used >= t0 - 1]
        for e in used:
            dest = b / e.path.relative_to(a)
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(e.path, dest)
        if limit is None and night == 1:  # 1.5 nights' growth: the bound bites from night 2
            limit = int(1.5 * sum(e.bytes for e in used))
        pruned = cache_cli.prune(b, limit)
        size_a = sum(i.bytes for i in cache_cli.inventory(a))
        print(f"  night {night}: exit {code}, {len(used)} entries used; unbounded "
              f"{cache_cli.human(size_a)} ({len(programs.entries(a))} entries), bounded to "
              f"{cache_cli.human(limit)}: {cache_cli.human(pruned.after)} "
              f"({len(programs.entries(b))} entries, {len(pruned.removed)} pruned)", flush=True)


def plugin_build_killed(work: Path, patch: str = "vk-io-dim-order", after_lines: int = 3,
                        timeout: float = 1800) -> Outcome:
    """A real patched plug-in build (``harness runtime build vulkan --patch``, incremental from a
    copy of this machine's stock entry, build trees and toolchain) killed -9 with its whole
    process group once ninja has compiled ``after_lines`` steps; then: no entry, no staging
    folder, nothing served for the patch set; the next build finishes, its library intact and
    registering VulkanBackend. The copied tree sits at another path, so CMake recompiles all 135
    objects: 201.7 s for both builds on a quiet 2-core machine (2026-12-07, `--faults plugin
    --seed 3`: 0 entry or staging folders after the kill, nothing served, next build exit 0,
    intact and registering)."""
    import fcntl

    from harness.runtimes import patching, source as source_mod, vulkan, wheel as wheel_mod

    name = f"plug-in build killed ({patch})"
    home = vulkan.runtimes_dir()
    stock = vulkan.installed()
    if stock is None:
        return Outcome(name, note="skipped: no stock plug-in on this machine to start from")
    cache = work / "plugin-cache"
    shutil.rmtree(cache, ignore_errors=True)
    (cache / "runtimes" / "build").mkdir(parents=True)
    with open(home / ".build.lock", "a") as lock:  # no build moves the trees while we copy
        fcntl.flock(lock, fcntl.LOCK_EX)
        shutil.copytree(stock.folder, cache / "runtimes" / stock.folder.name)
        for tree in (home / "build").glob(f"{stock.folder.name}*"):
            if tree.name in (stock.folder.name, f"{stock.folder.name}-stock"):
                shutil.copytree(tree, cache / "runtimes" / "build" / tree.name, symlinks=True)
    shutil.copytree(home.parent / "toolchains", cache / "toolchains", symlinks=True)
    wheel = wheel_mod.installed()
    src = source_mod.resolve(None, wheel, cache / "runtimes" / "sources")
    applied = [p.applied(src.commit) for p in patching.resolve((patch,))]
    dest = cache / "runtimes" / vulkan.dest_name(wheel, src, applied)
    slot = cache / "runtimes" / "build" / stock.folder.name / "cmake" / "compile.log"
    slot.unlink(missing_ok=True)  # the copied tree's last build said its own
    t = time.perf_counter()
    proc = start(["runtime", "build", "vulkan", "--cache", cache, "--patch", patch])

    def compiling():
        try:
            return slot.read_text(errors="replace").count("\n[") >= after_lines
        except OSError:
            return False

    hit = wait_for(proc, compiling, name, timeout)
    o = Outcome(name, injected=int(bool(hit)))
    if hit:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    half = [p.name for p in (cache / "runtimes").glob(f"*{dest.name}*")]
    served = vulkan.installed(str(cache), (patch,))
    code, out, err = finish(start(["runtime", "build", "vulkan", "--cache", cache, "--patch",
                                   patch]), timeout)
    m = vulkan.Manifest.read(dest / "manifest.json")
    ok = code == 0 and m is not None and vulkan.intact(m) and not vulkan.registers(
        Path(m.library))
    o.wall_s = time.perf_counter() - t
    o.cells, o.lost = 1, int(not ok)
    o.differ = [("plug-in", patch, "half entry", h) for h in half] + (
        [("plug-in", patch, "not served", served.folder.name)] if served else [])
    o.stop_lines = (out + err).strip().splitlines()[-1:]
    o.note = (f"after the kill: {len(half)} entry or staging folder(s), served: "
              f"{'yes' if served else 'no'}; next build exit {code}, intact and registering: "
              f"{'yes' if ok else 'no'}")
    return o


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--faults", nargs="+", default=["concurrent", "kill", "disk", "corrupt"],
                    choices=["concurrent", "kill", "disk", "disk-everywhere", "corrupt",
                             "nights", "plugin"])
    ap.add_argument("--bound", default="", help="nights: the bound the bounded cache keeps "
                    "(default: 1.5 nights' growth, so that five small nights show it)")
    ap.add_argument("--kills", type=int, default=3, help="kills of each kind (seeded points)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--cases", type=int, default=6)
    ap.add_argument("--work", type=Path, help="scratch folder (default: a temporary one)")
    args = ap.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="convconf-faults-"))
    t0 = time.perf_counter()
    if args.faults == ["nights"]:
        nights(work, args.jobs, args.bound)
        return 0
    if args.faults == ["plugin"]:
        o = plugin_build_killed(work)
        print(o.line(0.0))
        return 0 if o.equal else 1
    bench = Bench(work, args.jobs, args.seed, args.cases)
    cells = len(bench.base)
    print(f"undisturbed: {cells} cells ({args.cases} cases, xnnpack, -j {args.jobs}) in "
          f"{bench.base_s:.1f} s; seed {args.seed}; work {work}")
    outcomes = []
    for fault in args.faults:
        if fault == "concurrent":
            outcomes += [bench.concurrent(False), bench.concurrent(True)]
        elif fault == "kill":
            n_tasks = {"lowering": args.cases, "execution": cells}
            for kind in ("lowering", "execution"):
                for _ in range(args.kills):
                    outcomes.append(bench.kill_worker(kind, bench.rng.randint(1, n_tasks[kind])))
            for _ in range(args.kills):
                outcomes.append(bench.kill_parent(bench.rng.randint(1, cells - 1)))
        elif fault == "disk":
            outcomes += [bench.full_journal(bench.rng.randint(1, cells - 1)),
                         bench.full_cache()]
        elif fault == "disk-everywhere":
            outcomes.append(bench.full_everywhere())
        elif fault == "plugin":
            outcomes.append(plugin_build_killed(work))
        elif fault == "nights":
            nights(work, args.jobs, args.bound)
            continue
        elif fault == "corrupt":
            outcomes += [bench.corrupt("bit-flipped"), bench.corrupt("truncated")]
        for o in outcomes[-{"kill": 3 * args.kills, "disk-everywhere": 1, "plugin": 1}.get(
                fault, 2):]:
            print(o.line(bench.base_s), flush=True)
            for d in o.differ:
                print(f"    differs: {d}")
            for s in o.stop_lines[:2]:
                print(f"    said: {s[:150]}")
    injected = sum(o.injected for o in outcomes)
    lost = sum(o.lost for o in outcomes)
    differ = sum(len(o.differ) for o in outcomes)
    print(f"total: {len(outcomes)} fault runs, {injected} faults injected, {lost} cells lost, "
          f"{differ} verdicts differ, matrices equal: "
          f"{sum(o.equal for o in outcomes)}/{len(outcomes)}; {time.perf_counter() - t0:.0f} s")
    return 0 if lost == 0 and differ == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
