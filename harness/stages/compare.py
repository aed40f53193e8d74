"""Delegate output vs eager reference, and the tolerance policy (documented in README).

fp32:  PASS iff every element satisfies |out - ref| <= FP32_ATOL + FP32_RTOL * |ref|.
int8:  the reference is the *quantized* model run in eager (same math as the delegate);
       PASS iff max |out - qref| <= steps * output_scale (steps = the backend's
       ``quant_tolerance_steps``, 1 by default: one rounding step of the output quantizer).
       The float model's output gives ``sqnr_db`` (the quantization error itself, not judged).
fp16 / bf16: the reference is the case's own weights and inputs (already in that dtype) computed
       in float32 and cast to the dtype once: the correctly rounded answer, whatever the eager
       kernel of that dtype does. The error is measured in steps of the dtype's epsilon at the
       output magnitude, ``max|out - ref| / (eps(dtype) * max|ref|)`` (``error_steps``); PASS iff
       it is <= LOW_PRECISION_STEPS[dtype]. The magnitude is the output's largest element, not
       each element's own: an output near zero is the sum of terms as large as the others and
       carries their rounding. The eager output of the same dtype is measured in the same units
       (``eager_error_steps``, recorded, not judged): how far PyTorch's own kernel is.
Shapes or dtypes that differ are a MISMATCH whatever the values.

Every MISMATCH verdict also says *where* the output is wrong (``metrics["error_pattern"]``,
stages/fingerprint.py: which batches, channels / groups and spatial bands hold the elements
outside tolerance, by the same per-element rule as the verdict; int8 in output steps) and keeps
``evidence`` (the drawn ``|out - ref|``, small) for the finding's picture.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

FP32_RTOL = 1e-4
FP32_ATOL = 1e-4
# Eager CPU (fp32 accumulation, one rounding) is within 0.9 steps of the reference over 150
# generated cases (fp16; bf16 0.0). A bound of a few steps admits a delegate that accumulates
# in float32 and rounds a few times (pads, bias, layout changes), not one that accumulates in
# the low-precision type across the kernel's terms, which is a finding.
LOW_PRECISION_STEPS = {torch.float16: 4.0, torch.bfloat16: 4.0}


@dataclass
class Verdict:
    ok: bool
    message: str
    metrics: dict
    evidence: dict | None = None  # a MISMATCH's fingerprint.evidence (numpy arrays), else None


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


def epsilon_unit(ref: torch.Tensor) -> float:
    """One step of ref's dtype at the output magnitude: eps(dtype) * max|ref|."""
    return torch.finfo(ref.dtype).eps * (float(ref.float().abs().max()) if ref.numel() else 0.0)


def epsilon_steps(out: torch.Tensor, ref: torch.Tensor) -> float:
    """max|out - ref| in units of ref's dtype epsilon at the output magnitude (max|ref|)."""
    if not ref.numel():
        return 0.0
    unit = epsilon_unit(ref)
    err = float((out.double() - ref.double()).abs().max())
    return err / unit if unit > 0 else (0.0 if err == 0 else math.inf)


def tolerance_mask(out: torch.Tensor, ref: torch.Tensor, *, out_scale: float | None = None,
                   steps: float = 1.0) -> torch.Tensor:
    """The tolerance rule, the one place it is written: the elements that are wrong, one by one.
    int8 (``out_scale``): |d| > steps output steps; fp16/bf16: |d| > LOW_PRECISION_STEPS epsilon
    units at the output magnitude; fp32: |d| > atol + rtol |ref|; any non-finite output. The
    verdict is "no element wrong" (compare.compare), and the fingerprint draws these elements."""
    diff = (out.double() - ref.double()).abs()
    if out_scale is not None:
        bad = diff > int8_tolerance(out_scale, steps)
    elif ref.dtype in LOW_PRECISION_STEPS:  # in units, as error_steps: max(d)/u == max(d/u)
        unit = epsilon_unit(ref)
        bad = (diff / unit > LOW_PRECISION_STEPS[ref.dtype]) if unit > 0 else diff > 0
    else:
        bad = diff > FP32_ATOL + FP32_RTOL * ref.double().abs()
    return bad | ~torch.isfinite(out.double())


def int8_tolerance(out_scale: float, steps: float) -> float:
    """``steps`` output quantization steps (and a hair for the scale's own rounding)."""
    return steps * out_scale * (1 + 1e-5)


def compare(out: torch.Tensor, ref: torch.Tensor, *, float_ref: torch.Tensor | None = None,
            out_scale: float | None = None, steps: float = 1.0,
            eager_ref: torch.Tensor | None = None, groups: int = 1) -> Verdict:
    """The verdict; a MISMATCH's with its error pattern and evidence (``groups``: the conv's,
    so that the pattern can speak of groups)."""
    verdict = _verdict(out, ref, float_ref=float_ref, out_scale=out_scale, steps=steps,
                       eager_ref=eager_ref)
    if not verdict.ok:
        verdict.metrics["error_pattern"], verdict.evidence = _where(out, ref, out_scale, steps,
                                                                    groups)
    return verdict


def _where(out: torch.Tensor, ref: torch.Tensor, out_scale: float | None, steps: float,
           groups: int) -> tuple[str, dict | None]:
    """(the fingerprint's text, the evidence) of a wrong output. A fingerprint that cannot be
    made says why in its text: the verdict stands without it."""
    from harness.stages import fingerprint

    try:
        if tuple(out.shape) != tuple(ref.shape) or out.dim() < 3:
            mask = torch.zeros(0, dtype=torch.bool)
        else:
            mask = tolerance_mask(out, ref, out_scale=out_scale, steps=steps)
        text = fingerprint.error_pattern(out, ref, mask, groups).text
        return text, fingerprint.evidence(out, ref)
    except Exception as e:  # noqa: BLE001 - a bug in the fingerprint must not cost the verdict
        return f"no fingerprint ({type(e).__name__}: {str(e)[:200]})", None


def _verdict(out: torch.Tensor, ref: torch.Tensor, *, float_ref: torch.Tensor | None,
             out_scale: float | None, steps: float, eager_ref: torch.Tensor | None) -> Verdict:
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
    n_bad = int(tolerance_mask(out, ref, out_scale=out_scale, steps=steps).sum())
    ok = n_bad == 0
    if out_scale is not None:
        metrics["tolerance"] = int8_tolerance(out_scale, steps)
        metrics["error_steps"] = metrics["max_abs_error"] / out_scale
        return Verdict(ok, "" if ok else f"max|d|={metrics['max_abs_error']:.3g} is "
                                         f"{metrics['error_steps']:.2f} output steps > {steps}",
                       metrics)
    if ref.dtype in LOW_PRECISION_STEPS:
        return _low_precision(ok, ref, out, eager_ref, metrics)
    metrics["tolerance"] = FP32_ATOL
    return Verdict(ok, "" if ok else f"{n_bad}/{ref.numel()} elements outside atol={FP32_ATOL} "
                                     f"rtol={FP32_RTOL}, max|d|={metrics['max_abs_error']:.3g}",
                   metrics)


def _low_precision(ok: bool, ref: torch.Tensor, out: torch.Tensor,
                   eager_ref: torch.Tensor | None, metrics: dict) -> Verdict:
    """The fp16/bf16 verdict's metrics and message (``ok``: tolerance_mask's)."""
    allowed = LOW_PRECISION_STEPS[ref.dtype]
    metrics["error_steps"] = epsilon_steps(out, ref)
    metrics["tolerance"] = allowed * epsilon_unit(ref)
    if eager_ref is not None and eager_ref.shape == ref.shape:
        metrics["eager_error_steps"] = epsilon_steps(eager_ref, ref)
    name = str(ref.dtype).replace("torch.", "")
    return Verdict(ok, "" if ok else f"max|d|={metrics['max_abs_error']:.3g} is "
                                     f"{metrics['error_steps']:.2f} {name} eps at the output "
                                     f"magnitude > {allowed:g}", metrics)
