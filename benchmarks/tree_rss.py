"""Peak resident memory of this process and everything below it, sampled from /proc (Linux).

``resource.getrusage(RUSAGE_CHILDREN)`` cannot see the workers: they are children of the
forkserver (harness/workers.py), which outlives the measurement. So a thread samples the tree.
Two sums: RSS counts a page shared by several processes (the forkserver's torch, copy-on-write
in every worker) once per process, so it overstates what the tree takes; PSS (proportional set
size, /proc/PID/smaps_rollup) divides each shared page among its sharers, so it sums to the
memory the tree really holds. The largest single process is by RSS.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path


def _kib(text: str, key: str) -> int:
    """The KiB of a ``key: N kB`` line of a /proc file (0 if absent)."""
    return next((int(ln.split()[1]) for ln in text.splitlines() if ln.startswith(key)), 0)


def _pss_kib(pid: int) -> int:
    try:
        return _kib(Path(f"/proc/{pid}/smaps_rollup").read_text(), "Pss:")
    except OSError:  # it ended, or a kernel without smaps_rollup
        return 0


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return "?"


def role(cmdline: str) -> str:
    """What a process of a run's tree is, from its command line: the run itself, a pool's
    forkserver (the workers' parent), a worker (forked from one), or another child."""
    if "forkserver import main" in cmdline:
        return "forkserver or its worker"
    if "resource_tracker" in cmdline:
        return "resource tracker"
    return cmdline[:60]


def _tree_rss_kib(root: int, parts: list | None = None) -> tuple[int, int, int]:
    """(RSS sum, largest RSS, PSS sum) in KiB over ``root`` and its descendants; ``parts``
    (when given) gets (PSS KiB, pid, role) per process."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            status = (proc / "status").read_text()
        except (OSError, IndexError, ValueError):
            continue  # it ended while we looked
        pid = int(proc.name)
        children.setdefault(ppid, []).append(pid)
        rss[pid] = _kib(status, "VmRSS:")
    total, largest, pss, todo = 0, 0, 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        largest = max(largest, rss.get(pid, 0))
        own = _pss_kib(pid)
        pss += own
        if parts is not None:
            parts.append((own, pid, role(_cmdline(pid))))
        todo.extend(children.get(pid, []))
    return total, largest, pss


class PeakRSS:
    """``with PeakRSS() as peak: ...`` then ``peak.pss_mib``, ``peak.total_mib`` (RSS summed),
    ``peak.largest_mib``; ``peak.at_peak``: (PSS KiB, pid, role) of each process when the
    tree's PSS was highest (what holds the memory)."""

    def __init__(self, every_s: float = 0.25):
        self.every_s, self.total_kib, self.largest_kib, self.pss_kib = every_s, 0, 0, 0
        self.at_peak: list = []
        self._stop = threading.Event()

    def _sample(self) -> None:
        while not self._stop.wait(self.every_s):
            parts: list = []
            total, largest, pss = _tree_rss_kib(os.getpid(), parts)
            self.total_kib = max(self.total_kib, total)
            self.largest_kib = max(self.largest_kib, largest)
            if pss > self.pss_kib:
                self.pss_kib, self.at_peak = pss, sorted(parts, reverse=True)

    def __enter__(self) -> PeakRSS:
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def total_mib(self) -> float:
        return self.total_kib / 1024

    @property
    def largest_mib(self) -> float:
        return self.largest_kib / 1024

    @property
    def pss_mib(self) -> float:
        return self.pss_kib / 1024


def main(argv: list[str]) -> int:
    """``python benchmarks/tree_rss.py CMD ...``: run CMD, then print its wall time and the peak
    RSS of its whole process tree (e.g. a 200-case `harness run`, workers included)."""
    import subprocess
    import time

    t0 = time.perf_counter()
    with PeakRSS() as peak:
        rc = subprocess.call(argv)
    print("at the peak, by process (PSS MiB, pid, role):")
    for kib, pid, what in peak.at_peak:
        if kib >= 1024:
            print(f"  {kib / 1024:7.0f}  {pid:>7}  {what}")
    print(f"wall {time.perf_counter() - t0:.1f} s; peak PSS {peak.pss_mib:.0f} MiB for the process "
          f"tree (RSS summed {peak.total_mib:.0f} MiB, shared pages counted per process), largest "
          f"process {peak.largest_mib:.0f} MiB; exit {rc}")
    return rc


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
