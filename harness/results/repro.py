"""Standalone repro scripts for cells (reports/templates/repro.py.j2)."""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

import torch

from harness.stages import backends
from harness.stages.build import (build_module, case_seed, context_source, error_bound,
                                  input_names, make_inputs, module_class, module_kwargs)
from harness.stages.compare import LAMBDA, SAFETY, LOW_PRECISION_STEPS, unit_roundoff
from harness.results.templates import environment
from harness.lane import Lane
from harness.runfolder import RunFolder
from harness.spec import ConvCase
from harness.status import Status


def script(case: ConvCase, backend: str, fixes: str, status: str = "?", message: str = "",
           runtime_library: str | None = None, found_by: str = "") -> str:
    kwargs = ", ".join(f"{k}={v!r}" for k, v in module_kwargs(case).items())
    return environment().get_template("repro.py.j2").render(
        case=case, case_id=case.case_id, backend=backend, fixes=fixes, status=status, message=message,
        found_by=found_by,
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
        runtime_name=backends.get(backend).runtime_name, runtime_library=runtime_library,
        # a float case is judged by its error bound (a dynamic one size by size: its loop
        # computes each size's)
        bound_lines=None if case.quant or case.dynamic != "none" else bound_lines(
            case, model="module", exact="exact"),
        size_bound_lines=bound_lines(case, model="module", inputs="xs", exact="ref")
        if case.dynamic != "none" and not case.quant else None)


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
    by = found_by(folder.header_or_empty())
    for r in df.itertuples():
        if r.status in (Status.PASS.value, Status.INVALID.value) or r.case_id not in cases:
            continue
        library = run_runtime_library(run_dir, Lane.of(r.backend, r.fixes))
        text = script(cases[r.case_id], r.backend, r.fixes, r.status, r.message or "", library,
                      by)
        folder.repro_path(r.case_id, r.backend, r.fixes).write_text(text)
        n += 1
    return n


def found_by(header) -> str:
    """The run that drew a cell's case, as a command: its profile and seed (a nightly's seed
    is its own, harness/nights.py); "" when the header names no seed."""
    if header.seed is None:
        return ""
    return (f"python -m harness run --profile {header.profile or 'ci'} --seed {header.seed}"
            + (f" --max-examples {header.max_examples}" if header.max_examples is not None
               else ""))


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


# Statuses the minimal script cannot state without the harness's own machinery: a static
# contract verdict (the full script's make_ivec2 check), and a dynamic program's every-size loop.
FULL_SCRIPT_STATUSES = (Status.CONTRACT_VIOLATION.value, Status.INVALID.value, Status.NO_RUNTIME.value)
PARTITIONERS = {"xnnpack": ("executorch.backends.xnnpack.partition.xnnpack_partitioner",
                            "XnnpackPartitioner"),
                "vulkan": ("executorch.backends.vulkan.partitioner.vulkan_partitioner",
                           "VulkanPartitioner")}
LOADER_BEGIN, LOADER_END = "# --- plug-in loader", "# --- end of plug-in loader"


def minimal_script(case: ConvCase, backend: str, status: str, detail: str = "",
                   title: str = "") -> str:
    """The shortest standalone script that shows ``status`` for ``case`` on the stock lane
    (issue 47): the conv, its inputs, lower as ExecuTorch's docs do, run, compare; only what
    the status needs (the try around lowering for a LOWER_ERROR, around execution for a
    runtime error; no contract check). It prints expected vs actual at the worst element and
    ``STATUS: <status>``. The Vulkan runtime plug-in is loaded from $VULKAN_RUNTIME when set
    (no local path in the script). A case the minimal script cannot state (a dynamic
    program, a contract verdict) gets ``script`` (the full one)."""
    if case.dynamic != "none" or status in FULL_SCRIPT_STATUSES:
        # the full script, its plug-in from $VULKAN_RUNTIME too (no local path in it)
        return script(case, backend, "", status, detail, "VULKAN_RUNTIME").replace(
            'os.environ.get("CONVCONF_VULKAN_RUNTIME", "VULKAN_RUNTIME")',
            'os.environ.get("VULKAN_RUNTIME", "")')
    module, name = PARTITIONERS[backend]
    lowp = case.dtype in ("float16", "bfloat16")
    one_line = " ".join(detail.split())
    return environment().get_template("upstream_repro.py.j2").render(
        title=title or f"{backend}: {case.case_id}",
        status=status, detail=one_line[:300], detail_short=one_line[:80].replace('"', "'"),
        vulkan=backend == "vulkan", quant=case.quant, per_channel=case.quant == "int8_per_channel",
        partitioner_module=module, partitioner=name, module_class=module_class(case).__name__,
        kwargs=module_args(case), weight_seed=case_seed(case, "weights") % (2**63),
        input_seed=case_seed(case, "inputs") % (2**63), input_shape=tuple(case.input_shape),
        calib_seeds=[case_seed(case, "inputs") % (2**63)]
        + [case_seed(case, f"calib{i}") % (2**63) for i in range(3)],
        context=context_source(case) if case.has_context else None,
        inputs_expr=inputs_expr(case, "inputs"),
        calib_exprs=[inputs_expr(case, s) for s in ("inputs", "calib0", "calib1", "calib2")],
        cl_input=case.memory_format != "contiguous", cl_module=case.module_channels_last,
        cl_format="channels_last_3d" if case.dim == 3 else "channels_last",
        lowp=lowp, dtype=case.dtype, bound_lines=None if case.quant else bound_lines(case),
        check_shape=status == Status.MISMATCH.value and "shape" in detail)


def bound_lines(case: ConvCase, model: str = "model", inputs: str = "x",
                conv: str = "conv", exact: str = "expected") -> list[str] | None:
    """The float script's error bound, as the harness judges a float cell (stages/compare.py
    ErrorBound, build.error_bound; docs/concepts.md "Tolerance policy"), in a few lines of
    torch: ``exact`` = the float64 reference of the same (rounded) weights and inputs, ``M`` =
    |W| conv |X| + |b| carried through the epilogue, ``bound`` = SAFETY x ((gamma_K + r u) M +
    u |exact|) per element, floored at (K + 1) tiny. K and r come from build.error_bound itself
    (the case's own module and inputs), so the script's numbers are the harness's. The lines
    run after ``model`` and ``inputs`` are in the case's dtype; ``conv`` is the nn.Conv* a
    context Model was built from. None for a case eager PyTorch cannot build (an INVALID
    cell's: its script states the eager error, no bound)."""
    try:
        eb = error_bound(case, build_module(case), make_inputs(case))
    except Exception:  # noqa: BLE001 - eager's own error; the script shows it when it runs
        return None
    names = input_names(case)
    lines = [f"wide = copy.deepcopy({model}).double()  # the same (rounded) weights and inputs "
             "in float64",
             f"{exact} = wide(*(t.double() for t in {inputs}))  # the reference"]
    if not case.has_context:
        lines += ["for p in wide.parameters(): p.data.abs_()  # noqa: E701",
                  f"M = wide(*(t.double().abs() for t in {inputs}))  # |W| conv |X| + |b|: "
                  "the terms' magnitude"]
    else:
        if case.weights == "input":
            params = ["weight"] + (["bias"] if case.bias else [])
            lines += [f"c = copy.deepcopy({conv}).double()  # the weights are graph inputs"]
            lines += [f"c.{n}.data = {inputs}[{names.index(n)}].double()" for n in params]
        else:
            lines += ["c = wide.conv"]
        x0 = f"{inputs}[0].double()"
        if case.prologue is not None:
            _, pads, value = case.prologue
            x0 = f"torch.nn.functional.pad({x0}, {list(pads)!r}, value={float(value)!r})"
        lines += ["for p in c.parameters(): p.data.abs_()  # noqa: E701",
                  f"M = c({x0}.abs())  # |W| conv |X| + |b|: the terms' magnitude"]
        view = "view(1, -1" + ", 1" * case.dim + ")"
        residual = 0
        for i, op in enumerate(case.epilogue):
            name = op if isinstance(op, str) else op[0]
            if name == "batchnorm":  # |a| (M + |mean|) + |b|, a = w / sqrt(var + eps)
                bn = f"wide.bn{i}"
                lines += [f"M = ({bn}.weight / ({bn}.running_var + {bn}.eps).sqrt()).abs()."
                          f"{view} * (M + {bn}.running_mean.abs().{view}) + "
                          f"{bn}.bias.abs().{view}"]
            elif name == "add":
                k = names.index(f"residual{residual}")
                lines += [f"M = M + {inputs}[{k}].double().abs()"]
                residual += 1
    exponent = -int(round(math.log2(unit_roundoff(getattr(torch, case.dtype)))))
    per_m = f"(g + {eb.roundings} * u)" if eb.roundings else "g"
    lam = f"{LAMBDA:g}"
    lines += [f"u, K = 2.0 ** -{exponent}, {eb.terms}  # {case.dtype}'s unit roundoff (its sums "
              "too), terms per output",
              f"g = min(K * u / (1 - K * u) if K * u < 1 else math.inf, math.expm1({lam} * "
              "math.sqrt(K) * u + K * u * u / (1 - u)))  # gamma_K, Higham-Mary's too",
              f"bound = ({SAFETY:g} * ({per_m} * M + u * {exact}.abs())).clamp_min((K + 1) * "
              f"torch.finfo(torch.{case.dtype}).tiny)"]
    return lines


MODULE_DEFAULTS = {"stride": 1, "padding": 0, "dilation": 1, "groups": 1, "bias": True,
                   "padding_mode": "zeros", "output_padding": 0}


def module_args(case: ConvCase) -> str:
    """``4, 4, 7, padding=3, groups=4``: the module's arguments as PyTorch spells them, the
    defaults left out."""
    kw = module_kwargs(case)
    head = [repr(kw.pop(k)) for k in ("in_channels", "out_channels", "kernel_size") if k in kw]
    return ", ".join(head + [f"{k}={v!r}" for k, v in kw.items()
                             if MODULE_DEFAULTS.get(k, object()) != v])


# ExecuTorch's top-level folders: a path in a runtime message is cut to start at one of them.
ET_DIRS = ("backends", "runtime", "kernels", "extension", "exir", "devtools", "codegen",
           "schema", "examples", "third-party")
_ABS_PATH = re.compile(r"(?<![\w.:/~])~?(?:/[\w.@+-]+)+")


def scrub(text: str) -> str:
    """Local paths out of a message: a path into an ExecuTorch tree becomes the repository
    path (``.../src/executorch/backends/vulkan/runtime/utils/VecUtils.h:367`` ->
    ``backends/vulkan/runtime/utils/VecUtils.h:367``), any other absolute path its last name."""
    def one(m: re.Match) -> str:
        parts = m.group(0).split("/")
        for i, p in enumerate(parts[1:], 1):
            if p in ET_DIRS:
                return "/".join(parts[i:])
        return parts[-1]
    return _ABS_PATH.sub(one, text or "")


def code_lines(text: str) -> int:
    """A script's length as the issue counts it: lines of code, not blank, not comment-only,
    outside the module docstring and the optional plug-in loader block."""
    n, in_doc, in_loader = 0, False, False
    for i, line in enumerate(text.splitlines()):
        s = line.strip()
        if i == 0 and s.startswith('"""'):
            in_doc = not (len(s) > 3 and s.endswith('"""'))
            continue
        if in_doc:
            in_doc = not s.endswith('"""')
            continue
        if s.startswith(LOADER_BEGIN) or s.startswith(LOADER_END):
            in_loader = s.startswith(LOADER_BEGIN)
            continue
        if in_loader or not s or s.startswith("#"):
            continue
        n += 1
    return n
