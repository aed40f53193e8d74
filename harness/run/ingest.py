"""``harness ingest``: a bundle's results from another machine -> rows of a new lane.

The device lane is ``<backend>@<device name>`` (e.g. ``vulkan@h200``): its rows sit next to the
local lane's in the matrix, the report and the diff, judged by the same tolerance policy against
the same eager references. Static columns (delegated ops, the contract prediction) are the local
row's; status, message and timings are what happened on the device. A cell of the bundle with no
result is NO_RUNTIME saying so, never PASS.
"""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path

import numpy as np
import torch

from harness.stages import backends
from harness.results import matrix
from harness.header import RunHeader
from harness.lane import Lane
from harness.run.bundle import prepared_for, read_run
from harness.stages.compare import compare
from harness.stages.culprit import explain
from harness.stages.execute import runtime_message
from harness.record import METRIC_COLUMNS, CellResult, cell_key
from harness.runtimes.device import describe
from harness.status import Status

# ExecuTorch ScalarType codes -> torch dtypes (runtime/core/portable_type/scalar_type.h).
DTYPES = {0: torch.uint8, 1: torch.int8, 2: torch.int16, 3: torch.int32, 4: torch.int64,
          5: torch.float16, 6: torch.float32, 7: torch.float64, 15: torch.bfloat16}


class IngestError(Exception):
    """Malformed or foreign results: one line naming the file and the problem."""


def _json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise IngestError(f"{path}: unreadable ({str(e).splitlines()[0]})") from None


def _output(cell_dir: Path, spec: dict) -> torch.Tensor:
    dtype = DTYPES.get(spec.get("dtype"))
    if dtype is None:
        raise IngestError(f"{cell_dir}: output dtype code {spec.get('dtype')} is unknown")
    raw = (cell_dir / spec["file"]).read_bytes()
    t = torch.frombuffer(bytearray(raw), dtype=dtype) if raw else torch.empty(0, dtype=dtype)
    if t.numel() != int(np.prod(spec["sizes"])):
        raise IngestError(f"{cell_dir / spec['file']}: {t.numel()} values, sizes {spec['sizes']}")
    return t.reshape(spec["sizes"])


def _death(code: int, log: str) -> str:
    said = " | ".join(ln for ln in log.splitlines() if ln.strip())[-400:]
    if code == 124:
        what = "timeout: the runner did not finish within the bundle's timeout"
    elif code > 128:
        try:
            what = f"runner killed by {signal.Signals(code - 128).name} (signal {code - 128})"
        except ValueError:
            what = f"runner killed by signal {code - 128}"
    else:
        what = f"runner exited with code {code}"
    return what + (f"; it printed: {said}" if said else "")


# What a device lane keeps of the local cell: the lowering is the same program, run elsewhere.
FROM_LOCAL = ("predicted", "contract_violations", "delegated_ops", "undelegated_ops",
              "pte_size_kb", "lower_time_s", "quantize_time_s", "source")


def cell_result(header: RunHeader, local: CellResult, case, lane: str,
                cell_dir: Path) -> CellResult:
    """The device lane's row of one cell, its culprit named as a local cell's is (cell.blame):
    from what the native runner printed (``log.txt``) and, for a wrong value, the conv shaders
    the same program dispatched in the local lane (the native runner does not report them)."""
    from harness.stages.cell import blame

    row = _device_row(header, local, case, lane, cell_dir)
    if row.status == Status.MISMATCH.value and not row.reached:
        row.reached = list(local.reached or [])
    log_file = cell_dir / "log.txt"
    return blame(row, None, log_file.read_text(errors="replace") if log_file.exists() else "")


def _device_row(header: RunHeader, local: CellResult, case, lane: str,
                cell_dir: Path) -> CellResult:
    backend = backends.get(local.backend)
    row = CellResult(case=case, backend=lane, fixes=local.fixes, phase="execute",
                     **{k: getattr(local, k) for k in FROM_LOCAL})
    code_file = cell_dir / "exit_code"
    if not code_file.exists():
        row.update(status=Status.NO_RUNTIME.value,
                   message=f"no result for this cell in {cell_dir.parent} (the bundle did not run it)")
        return row
    try:
        code = int(code_file.read_text().strip())
    except ValueError:
        raise IngestError(f"{code_file}: not an exit code") from None
    log = (cell_dir / "log.txt").read_text(errors="replace") if (cell_dir / "log.txt").exists() else ""
    if code == 3:
        result = _json(cell_dir / "result.json")
        row.update(status=Status.RUNTIME_ERROR.value, message=explain(
            runtime_message(RuntimeError(result.get("message", ""))), log))
        return row
    if code == 2:
        row.update(status=Status.NO_RUNTIME.value,
                   message=f"the runner refused the cell's inputs: {log.strip()[-300:]}")
        return row
    if code != 0:
        row.update(status=Status.CRASH.value, message=_death(code, log))
        return row
    result = _json(cell_dir / "result.json")
    if result.get("status") != "ok" or not result.get("outputs"):
        raise IngestError(f"{cell_dir / 'result.json'}: exit 0 without outputs")
    out = _output(cell_dir, result["outputs"][0])
    prepared = prepared_for(header, case, Lane.of(local.backend, local.fixes))
    refs = prepared.refs
    verdict = compare(out, refs.ref, float_ref=refs.float_ref, eager_ref=refs.eager_ref,
                      bound=refs.bound, out_scale=prepared.out_scale,
                      steps=backend.quant_tolerance_steps,
                      groups=case.groups)
    row.update(**{c: verdict.metrics.get(c) for c in METRIC_COLUMNS})
    row.error_pattern = verdict.metrics.get("error_pattern") or ""
    row.evidence = verdict.evidence
    row.update(status=(Status.PASS if verdict.ok else Status.MISMATCH).value,
               message=verdict.message, run_time_s=result.get("run_s"))
    return row


def ingest(run_dir: Path, results: Path, device_name: str) -> tuple[list[CellResult], dict]:
    """-> (the new lane's rows, the device header); the run's matrix and run.json updated."""
    if not re.fullmatch(r"[A-Za-z0-9._-]+", device_name or ""):
        raise IngestError(f"--device-name {device_name!r}: use letters, digits, '.', '_', '-'")
    index = _json(results / "cells.json")
    bundle = _json(results / "bundle.json")
    try:
        folder, df, cases, header = read_run(run_dir)
    except ValueError as e:
        raise IngestError(str(e)) from None
    if bundle.get("run_id") != folder.run_id:  # the run's identity, wherever its folder is now
        raise IngestError(f"{results}: results of a bundle of run {bundle.get('run_id')} "
                          f"(made from {bundle.get('run_dir')}), not of run {folder.run_id} in "
                          f"{run_dir}")
    local = {r.key: r for r in map(CellResult.from_row, df.to_dict(orient="records"))}
    rows = []
    for cell, ref in sorted(index.items()):
        k = cell_key(ref["case_id"], ref["backend"], ref["fixes"])
        if k not in local or ref["case_id"] not in cases:
            raise IngestError(f"{results / 'cells.json'}: cell {cell} ({ref['case_id']}) is not in {run_dir}")
        rows.append(cell_result(header, local[k], cases[ref["case_id"]],
                                f"{ref['backend']}@{device_name}", results / cell))
        if rows[-1].evidence is not None:  # a MISMATCH's |out - ref|, for its picture
            r = rows[-1]
            folder.write_evidence(r.case_id, r.backend, r.fixes, r.evidence)
            r.evidence = None
    devices = _json(results / "devices.json") if (results / "devices.json").exists() else {}
    device = {"name": device_name, "devices": devices.get("devices", []),
              "described": [describe(d) for d in devices.get("devices", [])],
              "runtime": bundle.get("runtime", {}), "results": str(results.resolve())}
    lane = f"{bundle.get('lane', 'vulkan')}@{device_name}"
    kept = df[df["backend"] != lane].to_dict(orient="records")  # a re-ingest replaces the lane
    matrix.write(matrix.frame(kept + [r.to_row() for r in rows]), run_dir)
    header.devices[lane] = device
    folder.write_header(header)
    return rows, device
