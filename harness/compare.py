"""Delegate output vs eager reference, and the tolerance policy (documented in README).

fp32:  PASS iff every element satisfies |out - ref| <= FP32_ATOL + FP32_RTOL * |ref|.
int8:  the reference is the *quantized* model run in eager (same math as the delegate);
       PASS iff max |out - qref| <= steps * output_scale (steps = the backend's
       ``quant_tolerance_steps``, 1 by default: one rounding step of the output quantizer).
       The float model's output gives ``sqnr_db`` (the quantization error itself, not judged).
Shapes or dtypes that differ are a MISMATCH whatever the values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

FP32_RTOL = 1e-4
FP32_ATOL = 1e-4


@dataclass
class Verdict:
    ok: bool
    message: str
    metrics: dict


def sqnr_db(signal: torch.Tensor, noisy: torch.Tensor) -> float:
    try:
        from torch.ao.ns.fx.utils import compute_sqnr

        value = float(compute_sqnr(signal.float(), noisy.float()))
    except ImportError:
        noise = (signal - noisy).float().norm()
        value = float(20 * torch.log10(signal.float().norm() / noise))
    return value if math.isfinite(value) else float("inf")


def _errors(out: torch.Tensor, ref: torch.Tensor) -> dict:
    diff = (out.double() - ref.double()).abs()
    rel = diff / ref.double().abs().clamp_min(1e-12)
    return {"max_abs_error": float(diff.max()) if diff.numel() else 0.0,
            "mae": float(diff.mean()) if diff.numel() else 0.0,
            "max_rel_error": float(rel.max()) if rel.numel() else 0.0}


def compare(out: torch.Tensor, ref: torch.Tensor, *, float_ref: torch.Tensor | None = None,
            out_scale: float | None = None, steps: float = 1.0) -> Verdict:
    metrics = {"out_shape": list(out.shape), "ref_shape": list(ref.shape)}
    if tuple(out.shape) != tuple(ref.shape) or out.dtype != ref.dtype:
        return Verdict(False, f"output {tuple(out.shape)} {out.dtype} vs reference "
                              f"{tuple(ref.shape)} {ref.dtype}", metrics)
    metrics.update(_errors(out, ref))
    if float_ref is not None:
        metrics["sqnr_db"] = sqnr_db(float_ref, out)
        metrics["max_abs_error_vs_float"] = _errors(out, float_ref)["max_abs_error"]
    if not bool(torch.isfinite(out).all()):
        return Verdict(False, "output has NaN/Inf", metrics)
    if out_scale is not None:
        tol = steps * out_scale * (1 + 1e-5)
        metrics["tolerance"] = tol
        metrics["error_steps"] = metrics["max_abs_error"] / out_scale
        ok = metrics["max_abs_error"] <= tol
        return Verdict(ok, "" if ok else f"max|d|={metrics['max_abs_error']:.3g} is "
                                         f"{metrics['error_steps']:.2f} output steps > {steps}",
                       metrics)
    bound = FP32_ATOL + FP32_RTOL * ref.abs()
    bad = (out - ref).abs() > bound
    metrics["tolerance"] = FP32_ATOL
    n_bad = int(bad.sum())
    ok = n_bad == 0
    return Verdict(ok, "" if ok else f"{n_bad}/{bad.numel()} elements outside atol={FP32_ATOL} "
                                     f"rtol={FP32_RTOL}, max|d|={metrics['max_abs_error']:.3g}",
                   metrics)
