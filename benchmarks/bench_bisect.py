"""``harness bisect`` against its speed targets (issue 38):

  steps    evaluated steps <= ceil(log2 N) + 2 for N commits: bisects of synthetic repositories
           (N commits, the flip at a random commit, a few commits that do not import), git's
           own bisection through the real step command (--probe)
  python   a Python-only step (the commit's exir/ + backends/ overlaid on the wheel, the cell
           lowered) <= 60 s warm: the same bisect-step run twice at one commit (needs --source)
  plugin   an incremental Vulkan plug-in rebuild <= 5 min on 2 cores: build_vulkan at --from,
           then at --to (the one bisect build tree, seeded from the stock plug-in's build tree
           and built at its path; needs --source). Each row: seconds, phases, files changed and
           how the tree was obtained (seeded / in place / cold); the last row is the rebuild
           the target is about. --fresh: drop the bisect tree and its plug-ins first (so the
           --from build shows the seeding)
  folder   read a finished bisect folder (--folder DIR): steps vs budget, seconds per step
  tree     a run at a commit (harness run --executorch --commit --source) vs the same run on the
           wheel, each cold (a fresh lowering cache) and warm (again, same cache), in one
           process tree so the ratios share the machine's load (--cases FILE, --backends)
  multi    one multi-cell bisect (bisect --run-diff: the cells that flip together are one
           git bisect run) vs one bisect per flipped cell (bisect --run NEW --case ID), on runs
           at --from and --to (made here, or --runs OLD NEW); each side gets its own copy of
           the runs' cache (lowerings of the ends, overlays): evaluated commits (steps + ends +
           parents checked) and wall seconds, and their ratios, in one run. Default range: the
           XNNPACK even-kernel fix #20734 (10d3009521) with 8 first-parent commits each side

Measured 2026-12-06 (2 cores shared, load 2-8; executorch 1.5.1 wheel, stock plug-in from main
cff6f4dd32; `plugin --from cff6f4dd32 --to 02b38d68f0 --fresh`): seeding the bisect tree from
the stock build tree and building cff6f4dd32 28.6 s (tree copy 9.5 s, nothing recompiled); then
02b38d68f0 (8 native files moved, headers among them) 129.9 s (shaders 4.9 s, C++ 118.5 s): within
the 5 min target. In the Vulkan bisect of #20190 (32 commits, 5 steps + 2 ends) the per-step
rebuilds were 5.8-50.2 s; the first end, two months away from the tree's last commit, 231.8 s;
jumps of months (cff6f4dd32 <-> 2026-05/06, ~110-130 of the ~150 objects) 180-237 s; a cold build
here is ~11 min.
multi, measured 2026-12-07 (quiet, load 1.0; --runs at 8faf57dba273 and 5c9cd9161d74, 16
commits, 3 cells that flip together): --run-diff 6 evaluated commits in 85.5 s, one bisect per
cell 18 in 270.2 s: 3.0x the commits, 3.16x the wall time, same first commit 3/3.

Usage:
  python benchmarks/bench_bisect.py steps [--sizes 16 100 758]
  python benchmarks/bench_bisect.py python --source ET_GIT [--commit SHA]
  python benchmarks/bench_bisect.py plugin --source ET_GIT --from A --to B [--fresh]
  python benchmarks/bench_bisect.py folder --folder runs/bisect-seed
  python benchmarks/bench_bisect.py tree --source ET_GIT --commit v1.4.1 [--cases F --backends B]
  python benchmarks/bench_bisect.py multi --source ET_GIT [--from A --to B] [--runs OLD NEW]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = 'python -c "import pkg.calc as c; print(c.conv())"'
SEED = ["--cases", str(ROOT / "cases" / "xnnpack_conv1d_same_even.json"), "--case",
        "conv1d_i4o4_k4_s1_psame_d1_g1_b1_x1x4x16_q8t-aa19df26", "--backend", "xnnpack"]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def synthetic(where: Path, n: int, flip: int, broken: set[int]) -> Path:
    repo = where / f"repo{n}"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "b@example.com")
    _git(repo, "config", "user.name", "b")
    (repo / "pkg").mkdir()
    (repo / "pkg" / "__init__.py").write_text("")
    for i in range(n + 1):
        (repo / "pkg" / "calc.py").write_text(
            "def conv(:\n" if i in broken else f"def conv():\n    return {'PASS' if i < flip else 'MISMATCH'!r}\n")
        (repo / "n.txt").write_text(f"{i}\n")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", f"commit {i} (#{i})")
        if i == 0:
            _git(repo, "tag", "good")
    _git(repo, "tag", "bad")
    return repo


def bench_steps(sizes: list[int], seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            flip = rng.randrange(1, n + 1)
            broken = {rng.randrange(1, n) for _ in range(max(1, n // 50))} - {flip}
            repo = synthetic(Path(tmp), n, flip, broken)
            out = Path(tmp) / f"out{n}"
            t = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "harness", "bisect", "--probe", PROBE,
                                   "--source", str(repo), "--good", "good", "--bad", "bad",
                                   "--out", str(out)], capture_output=True, text=True)
            r = json.loads((out / "bisect.json").read_text()) if done.returncode == 0 else {}
            want = _git(repo, "rev-parse", f"HEAD~{n - flip}")
            found = (r.get("first_commit") or {}).get("commit")
            rows.append({"commits": n, "flip": flip, "broken": len(broken),
                         "evaluated": r.get("evaluated_steps"), "skipped": r.get("skipped_steps"),
                         "budget": math.ceil(math.log2(n)) + 2,
                         "right": found == want or want in {c["commit"] for c in r.get("range", [])},
                         "seconds": round(time.perf_counter() - t, 1)})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def bench_python(source: str, commit: str) -> list[float]:
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(2):  # the first is cold (page cache, pyc), the second warm
            t = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "harness", "bisect-step", *SEED,
                                   "--source", source, "--commit", commit, "--stage", "lowering",
                                   "--work", tmp], capture_output=True, text=True)
            times.append(round(time.perf_counter() - t, 1))
            print(f"bisect-step {commit[:12]}: exit {done.returncode}, {times[-1]} s: "
                  f"{done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ''}",
                  flush=True)
    return times


def bench_plugin(source: str, a: str, b: str, fresh: bool = False) -> list[dict]:
    import shutil

    from harness.runtimes import git_source, wheel

    repo = git_source.Repo(source)
    root = git_source.bisect_root() / "vulkan" / wheel.installed().version
    stock = git_source.stock_tree()
    rows = []
    for commit in (repo.rev(a), repo.rev(b)):
        # what the build starts from: the previous row's commit, else the stock tree's source
        prev = rows[-1]["full"] if rows else (stock.commit if stock else commit)
        if fresh:  # this commit's plug-in built again (and, the first time, the tree seeded)
            (root / "plugins" / f"{commit[:12]}.so").unlink(missing_ok=True)
            if not rows:
                shutil.rmtree(root / "tree", ignore_errors=True)
        built = git_source.build_vulkan(repo, commit, log=lambda s: print(s, flush=True))
        rows.append({"commit": commit[:12], "seconds": built.seconds, "tree": built.tree,
                     "files_changed": built.files_changed, "phases": built.phases,
                     "native_files_moved": len(repo.native_moved(commit, prev,
                                                                 git_source.VULKAN_PATHS)),
                     "full": commit})
        print(json.dumps({k: v for k, v in rows[-1].items() if k != "full"}), flush=True)
    print(json.dumps({"incremental_rebuild_s": rows[-1]["seconds"], "target_s": 300,
                      "within": rows[-1]["seconds"] <= 300, "load": round(os.getloadavg()[0], 1)}))
    return rows


def bench_tree(source: str, commit: str, cases: str, backends: str) -> list[dict]:
    """Wall seconds of `harness run` on the wheel and at ``commit``, cold then warm."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, extra in (("wheel", []), ("at " + commit[:12], ["--executorch", commit,
                                                                   "--source", source])):
            cache = Path(tmp) / f"cache-{len(rows)}"
            for temp in ("cold", "warm"):
                t = time.perf_counter()
                done = subprocess.run(
                    [sys.executable, "-m", "harness", "run", "--backends", backends, "--cases",
                     cases, "--max-examples", "0", "-j", "1", "--no-progress", "--no-report",
                     "--overwrite", "--out", str(Path(tmp) / f"run-{len(rows)}"), "--cache",
                     str(cache), *extra], capture_output=True, text=True)
                rows.append({"run": label, "cache": temp, "exit": done.returncode,
                             "seconds": round(time.perf_counter() - t, 1)})
                print(json.dumps(rows[-1]), flush=True)
    base = {r["cache"]: r["seconds"] for r in rows[:2]}
    for r in rows[2:]:
        print(f"{r['run']} {r['cache']}: {r['seconds']} s = {r['seconds'] / base[r['cache']]:.2f}x "
              f"the wheel's {base[r['cache']]} s", flush=True)
    return rows


FIX = "10d3009521b0610ba9ce1bdb55ea662146129a97"  # #20734, the even-kernel Conv1d "same" fix


def _timed(cmd: list[str], log: Path) -> tuple[int, float]:
    t = time.perf_counter()
    with open(log, "w") as f:
        done = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT)
    return done.returncode, round(time.perf_counter() - t, 1)


def _evaluated(bisect_json: dict) -> int:
    """Commits one bisect evaluated: its steps and its two ends (--run-diff's check of a first
    commit's parent, where it was not a step, is left out: the per-cell bisect has none)."""
    return bisect_json.get("evaluated_steps", 0) + 2


def bench_multi(source: str, a: str | None, b: str | None, cases: str, backends: str,
                runs: list[Path] | None, work: Path) -> dict:
    """One --run-diff bisect vs one bisect per flipped cell (see the module doc)."""
    import shutil

    from harness.runtimes.git_source import Repo

    repo = Repo(source)
    a = repo.rev(a or f"{FIX}~8")  # 8 first-parent commits before the fix, 8 after it
    b = repo.rev(b or repo.git("rev-list", "--reverse", "--first-parent", "--ancestry-path",
                               f"{FIX}..v1.4.1").stdout.split()[7])
    work.mkdir(parents=True, exist_ok=True)
    cache = work / "cache-runs"
    if runs:
        old, new = runs
    else:
        old, new = work / "run-old", work / "run-new"
        for commit, out in ((a, old), (b, new)):
            rc, secs = _timed([sys.executable, "-m", "harness", "run", "--executorch", commit,
                               "--source", source, "--cases", cases, "--backends", backends,
                               "--max-examples", "0", "-j", "1", "--no-progress", "--no-report",
                               "--overwrite", "--out", str(out), "--cache", str(cache)],
                              work / f"{out.name}.log")
            print(json.dumps({"run": commit[:12], "exit": rc, "seconds": secs}), flush=True)
            if rc:
                raise SystemExit(f"the run at {commit[:12]} failed: {work / (out.name + '.log')}")
    for side in ("multi", "per-cell"):  # each starts from the runs' cache, not from the other's
        shutil.rmtree(work / f"cache-{side}", ignore_errors=True)
        if cache.is_dir():
            shutil.copytree(cache, work / f"cache-{side}", symlinks=True)
    rc, multi_s = _timed([sys.executable, "-m", "harness", "bisect", "--run-diff", str(old),
                          str(new), "--source", source, "--out", str(work / "multi"), "--cache",
                          str(work / "cache-multi")], work / "multi.log")
    if rc:
        raise SystemExit(f"bisect --run-diff failed: {work / 'multi.log'}")
    summary = json.loads((work / "multi" / "bisect.json").read_text())
    multi_evals = sum(_evaluated(json.loads((work / "multi" / f["folder"] / "bisect.json")
                                            .read_text())) for f in summary["flips"]
                      if f.get("folder") and (work / "multi" / f["folder"] / "bisect.json")
                      .is_file())
    cells = [(c, f["backend"]) for f in summary["flips"] for c in f["cells"]]
    print(json.dumps({"multi": {"flips": len(summary["flips"]), "cells": len(cells),
                                "evaluated": multi_evals, "seconds": multi_s,
                                "lowerings": summary.get("lowerings")}}), flush=True)
    per_evals, per_s, right = 0, 0.0, 0
    firsts = {c: (f.get("first_commit") or {}).get("commit") for f in summary["flips"]
              for c in f["cells"]}
    for k, (case, backend) in enumerate(cells):
        out = work / f"cell-{k}"
        rc, secs = _timed([sys.executable, "-m", "harness", "bisect", "--run", str(new), "--case",
                           case, "--backend", backend.split("@")[0], "--good", a, "--bad", b,
                           "--source", source, "--out", str(out), "--cache",
                           str(work / "cache-per-cell")], work / f"cell-{k}.log")
        r = json.loads((out / "bisect.json").read_text()) if rc == 0 else {}
        per_evals += _evaluated(r) if r else 0
        per_s += secs
        right += (r.get("first_commit") or {}).get("commit") == firsts[case]
        print(json.dumps({"cell": case, "exit": rc, "evaluated": _evaluated(r) if r else None,
                          "seconds": secs}), flush=True)
    row = {"range": f"{a[:12]}..{b[:12]}", "commits": repo.count(a, b), "cells": len(cells),
           "multi": {"evaluated": multi_evals, "seconds": multi_s},
           "per_cell": {"evaluated": per_evals, "seconds": round(per_s, 1),
                        "same_first_commit": right},
           "ratio_evaluated": round(per_evals / max(multi_evals, 1), 2),
           "ratio_seconds": round(per_s / max(multi_s, 0.1), 2),
           "load": round(os.getloadavg()[0], 1)}
    print(json.dumps(row), flush=True)
    return row


def bench_folder(folder: Path) -> dict:
    r = json.loads((folder / "bisect.json").read_text())
    secs = [s["seconds"] for s in r["steps"] if s["outcome"] is not None]
    row = {"commits": r["commits"], "evaluated": r["evaluated_steps"],
           "skipped": r["skipped_steps"], "budget": r["step_budget"],
           "step_s_max": max(secs, default=None),
           "step_s_median": sorted(secs)[len(secs) // 2] if secs else None,
           "end_s": [r["good"]["step"]["seconds"], r["bad"]["step"]["seconds"]],
           "total_s": r["seconds"]}
    print(json.dumps(row))
    return row


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=["steps", "python", "plugin", "folder", "tree", "multi"])
    p.add_argument("--cases", default="cases/xnnpack_conv1d_same_even.json")
    p.add_argument("--backends", default="xnnpack")
    p.add_argument("--sizes", type=int, nargs="+", default=[16, 100, 758])
    p.add_argument("--source", default=os.environ.get("CONVCONF_ET_GIT"))
    p.add_argument("--commit", default="10d3009521b0610ba9ce1bdb55ea662146129a97")
    p.add_argument("--from", dest="a")
    p.add_argument("--to", dest="b")
    p.add_argument("--folder", type=Path)
    p.add_argument("--fresh", action="store_true", help="plugin: drop the bisect tree first")
    p.add_argument("--runs", type=Path, nargs=2, metavar=("OLD", "NEW"),
                   help="multi: runs at two commits to take the flips from (else made here)")
    p.add_argument("--work", type=Path, help="multi: where the runs and bisects go (kept)")
    a = p.parse_args()
    print(f"# bench_bisect {a.what} on {os.cpu_count()} cores "
          f"(affinity {len(os.sched_getaffinity(0))}), load {os.getloadavg()[0]:.1f}")
    if a.what == "steps":
        rows = bench_steps(a.sizes)
        return 0 if all(r["right"] and r["evaluated"] <= r["budget"] for r in rows) else 1
    if a.what == "folder":
        bench_folder(a.folder)
        return 0
    if not a.source:
        p.error("--source (or $CONVCONF_ET_GIT): an ExecuTorch git repository")
    if a.what == "python":
        return 0 if bench_python(a.source, a.commit)[-1] <= 60 else 1
    if a.what == "multi":
        work = a.work or Path(tempfile.mkdtemp(prefix="bench-multi-"))
        row = bench_multi(a.source, a.a, a.b, a.cases, a.backends, a.runs, work)
        return 0 if row["per_cell"]["same_first_commit"] == row["cells"] else 1
    if a.what == "tree":
        return 0 if all(r["exit"] == 0 for r in bench_tree(a.source, a.commit, a.cases,
                                                             a.backends)) else 1
    return 0 if bench_plugin(a.source, a.a, a.b, a.fresh)[-1]["seconds"] <= 300 else 1


if __name__ == "__main__":
    sys.exit(main())
