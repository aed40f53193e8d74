"""Standalone repro scripts for cells (reports/templates/repro.py.j2)."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from harness.stages import backends
from harness.stages.build import (case_seed, context_source, input_names, module_class,
                                  module_kwargs)
from harness.stages.compare import LOW_PRECISION_STEPS
from harness.results.templates import environment
from harness.lane import Lane
from harness.runfolder import RunFolder
from harness.spec import ConvCase
from harness.status import Status


def script(case: ConvCase, backend: str, fixes: str, status: str = "?", message: str = "",
           runtime_library: str | None = None) -> str:
    kwargs = ", ".join(f"{k}={v!r}" for k, v in module_kwargs(case).items())
    return environment().get_template("repro.py.j2").render(
        case=case, case_id=case.case_id, backend=backend, fixes=fixes, status=status, message=message,
        module_class=module_class(case).__name__, kwargs=kwargs,
        weight_seed=case_seed(case, "weights") % (2**63), input_seed=case_seed(case, "inputs") % (2**63),
        # Same order as build.calibration_inputs: the test input first, then calib0..2.
        calib_seeds=[case_seed(case, "inputs") % (2**63)]
        + [case_seed(case, f"calib{i}") % (2**63) for i in range(3)],
        input_shape=tuple(case.input_shape), quant=case.quant, dtype=case.dtype,
        low_precision_steps=LOW_PRECISION_STEPS.get(getattr(torch, case.dtype)),
        per_channel=case.quant == "int8_per_channel",
        context=context_source(case) if case.has_context else None,
        input_names=input_names(case), inputs_expr=inputs_expr(case, "inputs"),
        # build.calibration_inputs' salts: the test input, then calib0..2
        calib_exprs=[inputs_expr(case, s) for s in ("inputs", "calib0", "calib1", "calib2")],
        runtime_name=backends.get(backend).runtime_name, runtime_library=runtime_library)


def inputs_expr(case: ConvCase, salt: str) -> str:
    """The repro's expression for every graph input (build.make_inputs with ``salt``): x and
    the residuals drawn from their seeds, the weight and bias the conv's own."""
    def draw(shape, name):
        return f"draw({tuple(shape)!r}, {case_seed(case, name) % (2**63)})"

    parts = [draw(case.input_shape, salt)]
    if case.weights == "input":
        parts += ["conv.weight.detach()"] + (["conv.bias.detach()"] if case.bias else [])
    parts += [draw(case.output_shape(), f"{salt}:residual{i}") for i in range(case.residual_count())]
    return "(" + ", ".join(parts) + ",)"


def write_for_run(run_dir: str | os.PathLike, df) -> int:
    """A repro script for every cell that is not PASS (and not INVALID); -> scripts written."""
    folder = RunFolder(run_dir)
    folder.repro_dir.mkdir(exist_ok=True)
    cases = {c.case_id: c for c in load_run_cases(run_dir)}
    n = 0
    for r in df.itertuples():
        if r.status in (Status.PASS.value, Status.INVALID.value) or r.case_id not in cases:
            continue
        library = run_runtime_library(run_dir, Lane.of(r.backend, r.fixes))
        text = script(cases[r.case_id], r.backend, r.fixes, r.status, r.message or "", library)
        folder.repro_path(r.case_id, r.backend, r.fixes).write_text(text)
        n += 1
    return n


def load_run_cases(run_dir: Path) -> list[ConvCase]:
    return RunFolder(run_dir).cases()  # RunFolderError (a ValueError) names the file


def run_runtime_library(run_dir: Path, lane: Lane | None = None) -> str | None:
    """The Vulkan plug-in a run executed ``lane``'s cells with (its run.json: a lane with runtime
    patches ran on the plug-in built with them), for repro scripts to load."""
    header = RunFolder(run_dir).header_or_empty()
    if lane is not None:
        local = lane.on(None).name  # an ingested @device lane: the same program
        for entry in (header.vulkan or {}).get("patched") or []:
            if local in entry.get("lanes", ()) and entry.get("library"):
                return entry["library"]
    return header.vulkan_runtime
