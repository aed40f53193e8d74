"""The static stages of every lane of one case, with the per-case work done once.

The eager module, its inputs and float reference, the quantization (prepare/calibrate/convert)
and ``torch.export`` are the same for every backend and fix set of a case; only lowering is per
lane. ``prepare_case`` does the shared part once per case (quantization and export once per
*quantizer*: the Vulkan lane quantizes with XNNPACK's quantizer, so both lanes share it) and
lowers each lane from a private copy of the exported program. Execution is not here: it runs
per cell, in its own worker call, so a native crash costs one cell (runner.py).
"""

from __future__ import annotations

import copy
import time
import traceback

import torch

from . import backends
from .build import build_module, make_inputs, upcast_reference
from .lower import lower
from .quantize import output_qparams, quantize
from .spec import ConvCase
from .status import Status

Lane = tuple  # (backend name, sorted fix names as a list)


def prepare_case(case: ConvCase, lanes: list[Lane]) -> dict[tuple[str, str], dict]:
    """-> {(backend, "fix,names"): cache entry} for every lane; INVALID entries are not cacheable."""
    t0 = time.perf_counter()
    try:
        module = build_module(case)
        inputs = make_inputs(case)
        with torch.no_grad():
            float_ref = module(*inputs)  # the eager output, in the case's dtype
    except Exception as e:  # PyTorch's own verdict on the configuration
        invalid = {"status": Status.INVALID.value, "phase": "eager",
                   "message": f"{type(e).__name__}: {e}".splitlines()[0]}
        return {(b, ",".join(f)): dict(invalid) for b, f in lanes}
    programs: dict[str, dict] = {}  # quantizer family -> exported program, refs, or the error
    entries = {}
    for backend_name, fix_names in lanes:
        backend = backends.get(backend_name)
        family = backend.quantizer_family if case.quant else "float"
        if family not in programs:
            programs[family] = _program(case, module, inputs, float_ref, backend)
        entries[(backend_name, ",".join(fix_names))] = _lowered(programs[family], backend,
                                                                fix_names)
    shared_s = time.perf_counter() - t0 - sum(e.get("lower_time_s") or 0 for e in entries.values())
    for entry in entries.values():  # the case's shared seconds, split over its lanes
        entry["prepare_share_s"] = round(shared_s / len(entries), 3)
    return entries


def _program(case: ConvCase, module, inputs: tuple, float_ref, backend) -> dict:
    """Quantize (if the case asks for it) and export: what every lane of a quantizer lowers."""
    refs = {"inputs": inputs, "ref": float_ref, "float_ref": None}
    if float_ref.dtype != torch.float32:  # fp16/bf16: judged against the upcast reference
        refs.update(ref=upcast_reference(module, inputs, float_ref.dtype), eager_ref=float_ref)
    program = {"status": None, "phase": None, "message": "", "refs": refs}
    program_module = module
    try:
        program["phase"] = "quantize"
        if case.quant:
            program_module, program["quantize_time_s"] = quantize(case, module, inputs, backend)
            with torch.no_grad():
                refs["ref"] = program_module(*inputs)
            refs["float_ref"] = float_ref
            qparams = output_qparams(program_module)
            program["out_scale"] = qparams[0] if qparams else None
        program["phase"] = "export"
        program["exported"] = torch.export.export(program_module, inputs)
    except Exception as e:  # the stage's own error is the finding, for every lane of it
        program.update(status=Status.LOWER_ERROR.value, message=first_line(e),
                       traceback=traceback.format_exc(limit=-8))
    return program


def _lowered(program: dict, backend, fix_names: list[str]) -> dict:
    """One lane's cache entry: lower a private copy of the shared program, then the checks."""
    entry = {k: v for k, v in program.items() if k != "exported"}
    if program["status"] is not None:
        return entry
    try:
        entry["phase"] = "lower"
        # Lowering may rewrite the program it is given; every lane starts from the same one.
        lowered = lower(copy.deepcopy(program["exported"]), backend, fix_names)
    except Exception as e:
        entry.update(status=Status.LOWER_ERROR.value, message=first_line(e),
                     traceback=traceback.format_exc(limit=-8))
        return entry
    entry.update(phase="check", pte=lowered.pte, pte_size_kb=round(len(lowered.pte) / 1024, 2),
                 lower_time_s=round(lowered.lower_time_s, 3),
                 delegated_ops=lowered.delegated_ops, undelegated_ops=lowered.undelegated_ops)
    if not lowered.conv_delegated:
        outside = ", ".join(f"{k} x{v}" for k, v in sorted(lowered.undelegated_ops.items()))
        entry.update(status=Status.NOT_DELEGATED.value,
                     message=f"outside the {backend.name} delegate: {outside or 'everything'}")
        return entry
    violations = backend.contract_violations(lowered.edge_manager)
    entry["contract_violations"] = violations
    if violations:
        entry.update(status=Status.CONTRACT_VIOLATION.value, message="; ".join(violations))
    return entry


def first_line(e: BaseException) -> str:
    """The error's first line, then its root cause's (pass managers wrap the real error);
    a bare ``assert`` (no message) is named by where it failed."""
    text = _describe(e)
    root = e
    while root.__cause__ is not None and root.__cause__ is not root:
        root = root.__cause__
    if root is not e:
        text += f" <- {_describe(root)}"
    return text[:600]


def _describe(e: BaseException) -> str:
    lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
    if lines:
        return f"{type(e).__name__}: {lines[0]}"
    frame = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
    if frame is None:
        return type(e).__name__
    where = frame.filename.split("site-packages/")[-1]
    return f"{type(e).__name__} at {where}:{frame.lineno}: {frame.line}"
