"""``harness upstream --run-repros``: each draft's repro.py run alone, as a maintainer would run
it: a fresh Python (``-I``: no convconf, no user site), its own empty folder, only torch and
executorch importable, the run's Vulkan plug-in named by $VULKAN_RUNTIME. What it printed and
its STATUS go into the draft (issue.md, repro.log, validation.log)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from harness.lane import Lane
from harness.results import repro, upstream
from harness.runfolder import RunFolder

TIMEOUT_S = 600


def run_one(script: str, library: str | None, timeout: float = TIMEOUT_S) -> tuple[str, str]:
    """(status, output): the STATUS line's status ("CRASH" for a process that died or hung,
    "?" for one that printed none) and its stdout with the stderr's last lines."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "CONVCONF_KNOWN_ISSUES", "VULKAN_RUNTIME")}
    if library:
        env["VULKAN_RUNTIME"] = library
    with tempfile.TemporaryDirectory(prefix="repro-") as where:
        path = Path(where) / "repro.py"
        path.write_text(script)
        try:
            proc = subprocess.run([sys.executable, "-I", str(path)], capture_output=True,
                                  text=True, timeout=timeout, cwd=where, env=env)
        except subprocess.TimeoutExpired:
            return "CRASH", f"(no result in {timeout:.0f} s)"
    out = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    said = [ln for ln in out if ln.startswith("STATUS:")]
    status = said[-1].split()[1] if said else ("CRASH" if proc.returncode < 0 else "?")
    tail = [ln for ln in proc.stderr.splitlines() if ln.strip() and "Warning" not in ln][-6:]
    text = "\n".join(out + ([f"(exit {proc.returncode}; stderr, last lines:)"] + tail
                            if proc.returncode else []))
    return status, text


def run_repros(run_dir: Path, drafts: list, log=print) -> None:
    """Run every draft's repro.py alone and record what it printed (upstream.render again)."""
    header = RunFolder(run_dir).header()
    for d in drafts:
        lane = Lane.of(d.cell.backend, "")
        library = repro.run_runtime_library(run_dir, lane) if lane.backend == "vulkan" else None
        d.repro_status, d.repro_output = run_one(d.repro, library)
        upstream.render(d, header)
        log(f"  {d.folder}: repro.py printed STATUS: {d.repro_status} (stated {d.stated})")
