"""``harness bundle``: the Vulkan cells of a finished run as a folder that runs on another machine.

Layout (all paths relative, so the folder can be copied anywhere):
    bin/convconf_runner   the native runner (runtimes/native/runner.cpp), RUNPATH $ORIGIN:$ORIGIN/../lib
    lib/                  the wheel's libexecutorch.so + kernel libraries, the Vulkan plug-in
    bin-pXXXXXXXX/        per runtime patch set of the bundled lanes: the runner and the plug-in
                          built with those patches (found first, through $ORIGIN)
    cells/NNNN/           program.pte, input000.bin ... (raw bytes, the dtype/shape the program takes);
                          ``runtime`` names the bin folder of a patched lane's cell
    cells.json            NNNN -> case id, backend, fixes, patches (copied into the results)
    bundle.json           versions, runtime source commit, the run it came from
    run.sh                every cell in its own process under `timeout`, then results/
It needs an x86-64 Linux with glibc, libstdc++ and a Vulkan loader + driver (Debian/Ubuntu:
libvulkan1 and the vendor's ICD); no Python, no torch.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from harness.results import matrix
from harness import versions
from harness.header import RunHeader
from harness.lane import Lane
from harness.runfolder import RunFolder
from harness.spec import ConvCase
from harness.run.runner import lane_patches
from harness.stages.cache import Cache
from harness.status import Status

RUN_SH = """#!/bin/sh
# Runs every cell of this convconf bundle, each in its own process under a timeout, and writes
# RESULTS (default: ./results): per cell result.json / outputK.bin / log.txt / exit_code, plus
# devices.json (the Vulkan devices the loader sees). Then, on the harness machine:
#   python -m harness ingest RUN_DIR RESULTS --device-name NAME
set -u
here=$(cd "$(dirname "$0")" && pwd)
results=${1:-$here/results}
timeout_s=${CONVCONF_TIMEOUT:-120}
iters=${CONVCONF_ITERS:-3}
mkdir -p "$results"
cp "$here/cells.json" "$here/bundle.json" "$results/"
"$here/bin/convconf_runner" --devices > "$results/devices.json" 2> "$results/devices.log"
n=0
for cell in "$here"/cells/*/; do
  id=$(basename "$cell")
  bin=bin
  [ -f "$cell/runtime" ] && bin=$(cat "$cell/runtime")
  mkdir -p "$results/$id"
  timeout -s KILL "$timeout_s" "$here/$bin/convconf_runner" "$cell/program.pte" "$results/$id" \\
    --iters "$iters" "$cell"/input*.bin > "$results/$id/log.txt" 2>&1
  echo $? > "$results/$id/exit_code"
  n=$((n + 1))
done
echo "$n cells -> $results"
"""


class BundleError(Exception):
    """One line: what is wrong with the run folder or the request."""


def prepared_for(header: RunHeader, case: ConvCase, lane: Lane):
    """The cell's Prepared (program and references): from the run's cache where this machine
    has it, else prepared again (deterministic: same case id, same seeds, same versions)."""
    from harness.stages.cell import prepared_or_cached

    cache = Cache(header.cache_dir) if header.cache_dir else None
    return prepared_or_cached(case, lane, cache)[0]


def read_run(run_dir: Path) -> tuple[RunFolder, object, dict, RunHeader]:
    """A run folder's (folder, matrix, cases by id, header); ValueError naming what is unreadable."""
    folder = RunFolder(run_dir)
    return folder, matrix.read(run_dir), {c.case_id: c for c in folder.cases()}, folder.header()


def write(run_dir: Path, out: Path, lane: str = "vulkan", select: list[str] | None = None) -> dict:
    from harness.runtimes import vulkan

    if out.exists() and any(out.iterdir()):
        raise BundleError(f"{out} exists and is not empty")
    try:
        folder, df, cases, header = read_run(run_dir)
    except ValueError as e:
        raise BundleError(str(e)) from None
    manifest = vulkan.installed()
    if manifest is None:
        raise BundleError("no Vulkan runtime built for the installed executorch "
                          "(python -m harness runtime build runner)")
    if not manifest.runner or not Path(manifest.runner).exists():
        why = manifest.extra.get("runner_missing") or "its runner is missing from the cache"
        raise BundleError(f"no native runner for executorch {manifest.executorch_version}: {why}")
    rows = df[df["backend"] == lane]
    if select:
        rows = rows[rows["status"].isin(select)]
    else:  # every cell with a lowered program (a partly delegated one runs delegate code too)
        rows = rows[~rows["status"].isin([Status.INVALID.value, Status.LOWER_ERROR.value])]
    if rows.empty:
        raise BundleError(f"{run_dir}: no {lane} cells to bundle"
                          + (f" with status {', '.join(select)}" if select else ""))
    for sub in ("bin", "lib", "cells"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    shutil.copy2(manifest.runner, out / "bin" / vulkan.RUNNER)
    from harness.runtimes.wheel import installed as installed_wheel

    wheel = installed_wheel()
    for lib in (Path(manifest.library), wheel.runtime_lib, *wheel.kernel_libs):
        shutil.copy2(lib, out / "lib" / lib.name)
    patched = _patched_runtimes(out, rows, manifest)
    index = {}
    for n, r in enumerate(rows.itertuples(), start=1):
        prepared = prepared_for(header, cases[r.case_id], Lane.of(r.backend, r.fixes))
        if not prepared.pte:
            continue  # lowering failed again: nothing to run (the local row says why)
        cell = out / "cells" / f"{n:04d}"
        cell.mkdir()
        (cell / "program.pte").write_bytes(prepared.pte)
        for i, t in enumerate(prepared.refs.inputs):  # zero-padded: run.sh's glob is their order
            (cell / f"input{i:03d}.bin").write_bytes(_raw(t))
        patches = lane_patches(Lane.of(r.backend, r.fixes))
        if patches:
            (cell / "runtime").write_text(patched[patches]["bin"] + "\n")
        index[cell.name] = {"case_id": r.case_id, "backend": r.backend, "fixes": r.fixes,
                            "patches": list(patches)}
    (out / "cells.json").write_text(json.dumps(index, indent=1) + "\n")
    info = {"run_id": folder.run_id, "run_dir": str(run_dir.resolve()), "lane": lane,
            "cells": len(index),
            "versions": versions.stack(), "runtime": manifest.summary(),
            "patched": [{"patches": list(k), "bin": v["bin"], "runtime": v["summary"]}
                        for k, v in sorted(patched.items())]}
    (out / "bundle.json").write_text(json.dumps(info, indent=1) + "\n")
    (out / "run.sh").write_text(RUN_SH)
    (out / "run.sh").chmod(0o755)
    info["bytes"] = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    return info


def _patched_runtimes(out: Path, rows, stock) -> dict:
    """Each runtime patch set of the bundled lanes -> its own bin folder: a copy of the runner
    beside the plug-in built with those patches (the runner's RUNPATH starts at $ORIGIN, so that
    plug-in is the one it loads; the wheel's libraries still come from lib/)."""
    from harness.runtimes import vulkan

    sets = sorted({lane_patches(Lane.of(r.backend, r.fixes)) for r in rows.itertuples()} - {()})
    found = {}
    for patches in sets:
        manifest = vulkan.installed(patches=patches)
        if manifest is None:
            raise BundleError(f"no Vulkan plug-in built with {', '.join(patches)} for executorch "
                              f"{stock.executorch_version} (harness run builds it for its lanes; "
                              f"python -m harness runtime build vulkan --patch ...)")
        tag = "bin-p" + hashlib.sha256(",".join(patches).encode()).hexdigest()[:8]
        (out / tag).mkdir()
        shutil.copy2(stock.runner, out / tag / vulkan.RUNNER)
        shutil.copy2(manifest.library, out / tag / Path(manifest.library).name)
        found[patches] = {"bin": tag, "summary": manifest.summary()}
    return found


def _raw(t) -> bytes:
    """A tensor's bytes as the runner reads them; through uint8 because numpy has no bfloat16."""
    import torch

    return t.contiguous().view(torch.uint8).numpy().tobytes()
