"""The release sweep (`nox -s releases`) against its 30-minute target (issue 50): where a leg's
time goes, the old way against the new way, and the whole sweep extrapolated.

One leg of the sweep is: a venv for the release (pip installs), its stock Vulkan plug-in, one
patched plug-in per runtime-patch set (`--fixes each`: 8 sets today), and `harness run` over
the corpus (165 cases) plus RELEASES_EXAMPLES=20 generated cases, 23 lanes each (2 backends,
stock + each fix + all), lowering every distinct program and executing every cell.

What this measures, in one invocation:
  leg     `harness run` of one release on a subset of the corpus (--cases, --fixes each,
          --max-examples 0, -j --jobs) with --python (default: this interpreter; a release venv's
          python for another release), twice on one fresh lowering cache: cold, then warm (the
          lowerings served, every cell executed again). Per run: wall seconds, the matrix's
          summed quantize / lower / run seconds, cells, cells that reused a lowering, executed
          cells, the cache's bytes; the patched plug-ins it needed (built or cache hits).
  plugins every plug-in in the convconf cache (manifest.json): build seconds by how its build
          tree was obtained (cold; seeded from the stock tree; seeded from a sibling set's tree,
          this change; its own tree), per release.
  venvs   runs/releases/venv-*/convconf-install.json: the measured install seconds.
Then the extrapolation to `nox -s releases -- 1.3.1 1.5.1` with the whole corpus: the old way
(a venv for every release; patched plug-ins cold where the stock tree is gone, as it was here;
lowerings in the convconf cache, which a run keeps under 2 GB, so the next sweep lowers again)
against the new way (the installed release in this environment; patched plug-ins seeded from a
sibling's tree; the sweep's own lowering cache, so the next sweep serves them), first sweep and
next sweep. The leg's per-case seconds scale linearly from the subset: read it as an estimate.

Measured 2026-12-07 (2 cores shared, load 7-20; executorch 1.5.1; cases: seed, culprit,
short_int_lists_2d = 12 cases): XNNPACK lanes alone (--backends xnnpack, 48 cells) cold 75.6 s,
warm 25.1 s (3.01x), cache 514.5 MB (99.8% refs.pt, 48 copies of 12 references); both backends
(276 cells) 462.9 s in the run after 35 min waiting for the build lock, 2.96 GB; its warm rerun
was cold again (a harness/stages commit landed in between: 350.8 s); a third run on that cache
served 275/276: 157.3 s (2.94x / 2.23x), statuses 276/276 equal. Plug-in builds in the cache: patched
seeded from the stock tree 18.1-39.9 s, patched cold 203.6-932.4 s, stock cold 194.3 s (1.5.1)
and 676.9 s (1.4.1). docs/performance.md ("The release sweep") has the table.

Measured 2026-12-07 later (quiet, load 2-4), the whole sweep (what --sweep runs):
`nox -s releases -- 1.3.1 1.5.1` on an empty lowering cache 1022 s (legs 427.7 s / 2907 cells
and 481.6 s / 3933 cells), again on that cache 340 s (101.6 s, 120.1 s; 2797 and 3832 cells
served): 3.0x, both under the 30-minute target. The 12-case leg: cold 63.3 s, warm 23.6 s.

Usage:
  python benchmarks/bench_releases.py [--cases F.json ...] [--jobs 2] [--python PY]
                                      [--label 1.5.1] [--out DIR] [--skip-leg]
  python benchmarks/bench_releases.py --sweep 1.3.1 1.5.1 [--out DIR]   (the whole sweep, twice)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
SUBSET = ["cases/seed.json", "cases/culprit.json", "cases/short_int_lists_2d.json"]
CORPUS_CASES = 165   # cases/*.json today (2026-12-07)
GENERATED = 20       # RELEASES_EXAMPLES' default
PATCH_SETS = 8       # distinct runtime-patch sets of `--fixes each` (runner.patch_sets)
RUN_CACHE_MAX = 2e9  # what a run keeps the convconf cache under ($CONVCONF_CACHE_MAX default)


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def leg(python: str, cases: list[str], jobs: int, out: Path, cache: Path,
        backends: list[str] | None = None) -> dict:
    """One `harness run` of the sweep's kind on ``cases``; its figures."""
    cmd = [python, "-m", "harness", "run", "--out", str(out), "--overwrite", "--cases", *cases,
           "--max-examples", "0", "--fixes", "each", "--no-progress", "-j", str(jobs),
           "--cache", str(cache), *(["--backends", ",".join(backends)] if backends else [])]
    env = dict(os.environ, CONVCONF_CACHE_MAX="none")
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode not in (0, 1):
        sys.exit(f"bench_releases: the run failed (exit {done.returncode}): "
                 f"{done.stderr.strip().splitlines()[-1:]}")
    df = pd.read_csv(out / "matrix.csv")
    header = json.loads((out / "run.json").read_text())
    patched = header.get("vulkan_patched") or {}
    num = lambda c: pd.to_numeric(df.get(c, pd.Series(dtype=float)), errors="coerce")  # noqa: E731
    return {
        "wall_s": round(wall, 1), "run_s": header.get("duration_s"), "cells": len(df),
        "cases": df["case_id"].nunique(), "lanes": df.groupby(["backend", "fixes"], dropna=False).ngroups,
        "quantize_s": round(num("quantize_time_s").sum(), 1),
        "lower_s": round(num("lower_time_s").sum(), 1),
        "execute_s": round(num("run_time_s").sum(), 1),
        "executed": int((num("run_time_s") > 0).sum()),
        "reused": int(df["reused_from"].fillna("").astype(str).ne("").sum()) if "reused_from" in df else 0,
        "cached": int(df["cached"].fillna(False).astype(bool).sum()) if "cached" in df else 0,
        "cache_bytes": folder_bytes(cache) if cache.exists() else 0,
        "patched_built": sum(1 for e in patched.values() if e.get("library") and not e.get("cached")),
        "patched_hits": sum(1 for e in patched.values() if e.get("cached")),
        "patched_build_s": round(sum(e.get("build_seconds", 0) for e in patched.values()
                                     if not e.get("cached")), 1),
        "executorch": header.get("versions", {}).get("executorch", "?"),
    }


def plugins() -> pd.DataFrame:
    """Every cached plug-in's build: release, patched or stock, how its tree came, seconds."""
    sys.path.insert(0, str(ROOT))
    from harness.runtimes import vulkan

    rows = []
    for manifest in sorted(vulkan.runtimes_dir().glob("*/manifest.json")):
        m = vulkan.Manifest.read(manifest)
        if m is None:
            continue
        how = (m.extra or {}).get("build_tree", "?")
        rows.append({"entry": manifest.parent.name, "release": m.executorch_version,
                     "kind": "patched" if m.patches else "stock",
                     "tree": "seeded" if str(how).startswith("seeded") else how,
                     "how": how, "build_s": m.build_seconds,
                     "shaders_s": (m.phase_seconds or {}).get("shaders"),
                     "compile_s": (m.phase_seconds or {}).get("compile"), "built_at": m.built_at})
    return pd.DataFrame(rows)


def venvs() -> dict:
    out = {}
    for f in sorted((ROOT / "runs" / "releases").glob("venv-*/convconf-install.json")):
        data = json.loads(f.read_text())
        out[data["executorch"]] = data["install_s"]
    return out


def median_of(df: pd.DataFrame, **where) -> float | None:
    sel = df
    for k, v in where.items():
        sel = sel[sel[k] == v]
    return float(statistics.median(sel["build_s"])) if len(sel) else None


def extrapolate(cold: dict, warm: dict, builds: pd.DataFrame, installs: dict) -> dict:
    """Seconds of `nox -s releases -- 1.3.1 1.5.1` with the whole corpus, old and new ways."""
    per_case = lambda r: r["wall_s"] / r["cases"]  # noqa: E731
    n = CORPUS_CASES + GENERATED
    leg_cold, leg_warm = per_case(cold) * n, per_case(warm) * n
    stock = median_of(builds, kind="stock") or 0.0
    patched_cold = median_of(builds, kind="patched", tree="cold") or 0.0
    patched_seeded = median_of(builds, kind="patched", tree="seeded") or 0.0
    venv = statistics.median(installs.values()) if installs else 150.0
    # a full leg's lowerings: the subset's cache bytes per cell, times a leg's cells
    leg_bytes = cold["cache_bytes"] / max(cold["cells"], 1) * n * cold["lanes"]
    survives = 2 * leg_bytes <= RUN_CACHE_MAX
    old_first = 2 * venv + 2 * stock + 2 * PATCH_SETS * patched_cold + 2 * leg_cold
    new_first = 1 * venv + 2 * stock + 2 * PATCH_SETS * patched_seeded + 2 * leg_cold
    old_next = 2 * (leg_warm if survives else leg_cold)  # venvs and plug-ins kept (locally)
    new_next = 2 * leg_warm
    return {"cases_per_leg": n, "leg_cold_s": round(leg_cold), "leg_warm_s": round(leg_warm),
            "venv_s": venv, "stock_build_s": stock, "patched_cold_s": patched_cold,
            "patched_seeded_s": patched_seeded, "leg_lowered_bytes": round(leg_bytes),
            "old_lowerings_survive_2GB": survives,
            "old_first_s": round(old_first), "new_first_s": round(new_first),
            "old_next_s": round(old_next), "new_next_s": round(new_next),
            "first_ratio": round(old_first / new_first, 2) if new_first else None,
            "next_ratio": round(old_next / new_next, 2) if new_next else None}


def sweep(releases: list[str], work: Path) -> dict:
    """The whole ``nox -s releases -- RELEASES`` twice on one fresh $RELEASES_CACHE (the
    sweep's lowerings): a first sweep (venvs, plug-ins as this machine has them) and the next
    one, as releases.yml runs it with its cache; per pass the wall seconds, each leg's run
    (duration, cells, cells served from the cache) and the cache's bytes."""
    cache = work / "sweep-cache"
    shutil.rmtree(cache, ignore_errors=True)
    passes = {}
    for name in ("first", "next"):
        env = dict(os.environ, RELEASES_CACHE=str(cache))
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "nox", "-s", "releases", "--", *releases],
                              cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - started
        (work / f"sweep-{name}.log").write_text(done.stdout + done.stderr)
        if done.returncode:
            sys.exit(f"bench_releases: nox -s releases failed (exit {done.returncode}): "
                     f"{work / f'sweep-{name}.log'}")
        legs = {}
        for release in releases:
            run = ROOT / "runs" / "releases" / release
            header = json.loads((run / "run.json").read_text())
            df = pd.read_csv(run / "matrix.csv")
            legs[release] = {"run_s": header.get("duration_s"), "cells": len(df),
                             "served": int(df["cached"].fillna(False).astype(bool).sum())}
        passes[name] = {"wall_s": round(wall, 1), "legs": legs,
                        "cache_bytes": folder_bytes(cache) if cache.exists() else 0}
        print(json.dumps({name: passes[name]}), flush=True)
    passes["next_vs_first"] = round(passes["first"]["wall_s"] / passes["next"]["wall_s"], 2)
    print(json.dumps({"next_vs_first": passes["next_vs_first"]}), flush=True)
    return passes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", nargs="+", default=SUBSET)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--python", default=sys.executable, help="the release's interpreter")
    ap.add_argument("--label", default="", help="names the leg in the output (a release)")
    ap.add_argument("--out", type=Path, default=None, help="keep the runs and bench.json here")
    ap.add_argument("--skip-leg", action="store_true", help="plug-ins and venvs only")
    ap.add_argument("--backends", nargs="+", default=None, help="the leg's backends (default: "
                    "the run's, both); the extrapolation then covers only their lanes")
    ap.add_argument("--sweep", nargs="+", metavar="RELEASE", help="time the whole "
                    "`nox -s releases -- RELEASE ...` twice on a fresh lowering cache (first "
                    "and next sweep) instead of a leg")
    args = ap.parse_args()

    work = args.out or Path(tempfile.mkdtemp(prefix="bench-releases-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.sweep:
        print(f"bench_releases: {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, "
              f"{time.strftime('%Y-%m-%d %H:%M')}; nox -s releases -- {' '.join(args.sweep)}")
        result = sweep(args.sweep, work)
        (work / "sweep.json").write_text(json.dumps(result, indent=1) + "\n")
        print(f"-> {work / 'sweep.json'}")
        return
    print(f"bench_releases: {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, "
          f"{time.strftime('%Y-%m-%d %H:%M')}; cases {' '.join(args.cases)}; -j {args.jobs}")
    result: dict = {"cases": args.cases, "jobs": args.jobs, "label": args.label}
    if not args.skip_leg:
        cache = work / "lowered"
        cold = leg(args.python, args.cases, args.jobs, work / "cold", cache, args.backends)
        warm = leg(args.python, args.cases, args.jobs, work / "warm", cache, args.backends)
        result.update(cold=cold, warm=warm)
        table = pd.DataFrame({"cold": cold, "warm": warm})
        print(f"\nleg ({cold['executorch']}, {cold['cases']} cases x {cold['lanes']} lanes):")
        print(table.to_string())
        print(f"warm vs cold: {cold['wall_s'] / warm['wall_s']:.2f}x")
    builds = plugins()
    result["plugins"] = builds.to_dict(orient="records")
    if len(builds):
        print("\nplug-in builds (cache manifests):")
        print(builds.drop(columns=["entry"]).to_string(index=False))
        summary = builds.groupby(["kind", "tree"])["build_s"].agg(["count", "median", "min", "max"])
        print(summary.to_string())
    installs = venvs()
    result["venvs"] = installs
    print(f"\nvenv installs: {installs or 'none measured'}")
    if not args.skip_leg:
        ex = extrapolate(result["cold"], result["warm"], builds, installs)
        result["extrapolated"] = ex
        print("\nnox -s releases -- 1.3.1 1.5.1, whole corpus, extrapolated (s):")
        for k, v in ex.items():
            print(f"  {k}: {v}")
    (work / "bench.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
    print(f"\n-> {work / 'bench.json'}")


if __name__ == "__main__":
    main()
