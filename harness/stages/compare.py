"""Delegate output vs eager reference, and the tolerance policy (docs/concepts.md, "Tolerance
policy").

fp32, fp16, bf16 (every cell the harness runs): the reference is the case's own weights and
       inputs (already in the case's dtype) computed in float64, and each output element is judged
       against an error bound derived from its computation (``ErrorBound``: Higham, "Accuracy and
       Stability of Numerical Algorithms", 2nd ed., sec. 3.1 inner products, and its probabilistic
       form, Higham & Mary 2019): with M = |W| conv |X| + |b| (the same conv on absolute
       values, float64, carried through the epilogue) and K terms summed per output,
           bound = SAFETY * (min(gamma_K, gamma~_K)(u_acc) M + r u_out M + u_out |ref|),
       gamma~_K(u) = exp(LAMBDA sqrt(K) u + K u^2 / (1 - u)) - 1 (~ LAMBDA sqrt(K) u), u_acc the
       unit roundoff of the accumulation (the program's dtype: ACCUMULATION), u_out the
       dtype's, r its roundings before the last (epilogue ops), floored at what flushing
       subnormals costs (K smallest normals of the accumulation + one of the dtype). PASS iff
       every |out - ref| <= bound; ``bound_ratio`` = max |out - ref| / bound (3.2: "3.2x the
       bound"), ``tolerance_bound`` = the bound at that element.
int8:  the reference is the *quantized* model run in eager (same math as the delegate);
       PASS iff max |out - qref| <= steps * output_scale (steps = the backend's
       ``quant_tolerance_steps``, 1 by default: one rounding step of the output quantizer).
       The float model's output gives ``sqnr_db`` (the quantization error itself, not judged).
fp16 / bf16 also keep ``error_steps``: ``max|out - ref| / (eps(dtype) * max|ref|)`` against the
       float32-computed, once-rounded reference, recorded beside the eager output's own
       (``eager_error_steps``); no longer the verdict when a bound is given.
Without a bound (a caller with hand-made tensors and no computation behind them) the earlier
constant rules apply: fp32 ``|d| <= 1e-4 + 1e-4 |ref|``, fp16/bf16 LOW_PRECISION_STEPS eps at the
output magnitude.
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
# The constant rules, for a caller with no ErrorBound (hand-made tensors); every cell the
# harness runs is judged by its bound. fp16/bf16 rows still record error_steps in these units.
LOW_PRECISION_STEPS = {torch.float16: 4.0, torch.bfloat16: 4.0}

# The error bound (docs/concepts.md "Tolerance policy"). LAMBDA: Higham & Mary's probabilistic
# bound holds with probability >= 1 - 2K exp(-LAMBDA^2 (1-u)^2 / 2) per output element (< 1e-9
# for K = 3e5 at 8); SAFETY: for what the model leaves out (a delegate's reordered or folded
# weights, each rounded once; a layout copy is exact).
LAMBDA = 8.0
SAFETY = 2.0
# The accumulation a float program is held to: its own dtype's arithmetic. float32 for fp32;
# for fp16/bf16 the sum may run in the low-precision type, as measured here: XNNPACK's fp16
# conv (Conv2d(4, 4, 3), K = 37: max|d| 0.0123, 23x a float32-accumulation bound; K = 9217:
# 5.05 at |ref| 260), ExecuTorch's portable conv (it computes in the tensor's type: a
# Conv2d(65536, 8, 1) the Vulkan partitioner leaves outside, 36.4 at |ref| 516); Vulkan's fp16
# 3x3 conv rounds once (0.124 at |ref| 260: half an ulp) and sits far inside.
# docs/concepts.md "Tolerance policy".
ACCUMULATION = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def unit_roundoff(dtype: torch.dtype) -> float:
    """u = eps / 2: the largest relative error of one round-to-nearest in ``dtype``."""
    return torch.finfo(dtype).eps / 2


def gamma(terms: int, u: float) -> float:
    """Higham's deterministic gamma_K = K u / (1 - K u) (Accuracy and Stability, Lemma 3.1 and
    eq. 3.5): |fl(sum) - sum| <= gamma_K sum |terms|, in any order of summation."""
    return terms * u / (1 - terms * u) if terms * u < 1 else math.inf


def gamma_tilde(terms: int, u: float, lam: float = LAMBDA) -> float:
    """Higham & Mary's probabilistic gamma~_K(lambda) = exp(lambda sqrt(K) u + K u^2/(1-u)) - 1
    (SIAM J. Sci. Comput. 41(5), 2019, Thm 2.4/3.1): the same inner-product bound with sqrt(K)
    in place of K, for rounding errors that are independent and of mean zero."""
    return math.expm1(lam * math.sqrt(terms) * u + terms * u * u / (1 - u))


@dataclass
class ErrorBound:
    """What the arithmetic can promise for each output element of one float cell: the float64
    reference and the magnitude of the terms behind it (built with the reference,
    build.error_bound), judged by ``allowed``. Tensors, numbers and a string only (the cache
    stores it)."""
    exact: torch.Tensor  # the reference in float64 (the case's own weights and inputs)
    magnitude: torch.Tensor  # float64: |W| conv |X| + |b|, carried through the epilogue
    terms: int  # K: the most terms summed into one output element (+ bias, epilogue terms)
    dtype: str  # the program's dtype ("float32", "float16", "bfloat16")
    roundings: int = 0  # roundings to the program's dtype before the last (epilogue ops; the
    #                     conv's own output of an fp16/bf16 program with an epilogue)

    @property
    def unit_acc(self) -> float:
        return unit_roundoff(ACCUMULATION[self.dtype])

    @property
    def unit_out(self) -> float:
        return unit_roundoff(getattr(torch, self.dtype))

    @property
    def accumulation(self) -> float:
        """The sum's bound per unit of magnitude: the smaller of Higham's gamma_K and its
        probabilistic gamma~_K (both hold; gamma_K is the smaller below K ~ LAMBDA^2)."""
        return min(gamma(self.terms, self.unit_acc), gamma_tilde(self.terms, self.unit_acc))

    def allowed(self) -> torch.Tensor:
        """The per-element bound (float64, the output's shape): SAFETY x (the sum's error,
        the roundings before the last, at the magnitude; the last rounding, at the value),
        at least what flushing subnormals to zero can cost: K smallest normals of the
        accumulation, one of the dtype's (the output)."""
        m, exact = self.magnitude.double(), self.exact.double()
        bound = SAFETY * ((self.accumulation + self.roundings * self.unit_out) * m
                          + self.unit_out * exact.abs())
        return bound.clamp_min(self.terms * torch.finfo(ACCUMULATION[self.dtype]).tiny
                               + torch.finfo(getattr(torch, self.dtype)).tiny)


torch.serialization.add_safe_globals([ErrorBound])  # a cached References holds one


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
                   steps: float = 1.0, bound: ErrorBound | None = None) -> torch.Tensor:
    """The tolerance rule, the one place it is written: the elements that are wrong, one by one.
    int8 (``out_scale``): |d| > steps output steps; a float cell with its ``bound``:
    |out - bound.exact| > bound.allowed(); without one, fp16/bf16: |d| > LOW_PRECISION_STEPS
    epsilon units at the output magnitude, fp32: |d| > atol + rtol |ref|; any non-finite output.
    The verdict is "no element wrong" (compare.compare), and the fingerprint draws these."""
    if out_scale is None and bound is not None:
        bad = (out.double() - bound.exact).abs() > bound.allowed()
        return bad | ~torch.isfinite(out.double())
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
            eager_ref: torch.Tensor | None = None, groups: int = 1,
            bound: ErrorBound | None = None) -> Verdict:
    """The verdict; a MISMATCH's with its error pattern and evidence (``groups``: the conv's,
    so that the pattern can speak of groups). ``bound``: a float cell's error bound (its
    reference in float64 and the magnitudes behind it), by which it is judged; ``ref`` stays
    the reference in the case's dtype (the output's dtype and shape are checked against it)."""
    if out_scale is not None:
        bound = None  # int8: one output step of the quantized model's output
    verdict = _verdict(out, ref, float_ref=float_ref, out_scale=out_scale, steps=steps,
                       eager_ref=eager_ref, bound=bound)
    if not verdict.ok:
        verdict.metrics["error_pattern"], verdict.evidence = _where(out, ref, out_scale, steps,
                                                                    groups, bound)
    return verdict


def _where(out: torch.Tensor, ref: torch.Tensor, out_scale: float | None, steps: float,
           groups: int, bound: ErrorBound | None = None) -> tuple[str, dict | None]:
    """(the fingerprint's text, the evidence) of a wrong output. A fingerprint that cannot be
    made says why in its text: the verdict stands without it."""
    from harness.stages import fingerprint

    try:
        if tuple(out.shape) != tuple(ref.shape) or out.dim() < 3:
            mask = torch.zeros(0, dtype=torch.bool)
        else:
            mask = tolerance_mask(out, ref, out_scale=out_scale, steps=steps, bound=bound)
        text = fingerprint.error_pattern(out, ref, mask, groups).text
        return text, fingerprint.evidence(out, ref)
    except Exception as e:  # noqa: BLE001 - a bug in the fingerprint must not cost the verdict
        return f"no fingerprint ({type(e).__name__}: {str(e)[:200]})", None


def bound_metrics(out: torch.Tensor, bound: ErrorBound) -> dict:
    """How far inside or outside its bound the worst element is: ``bound_ratio`` = max over
    elements of |out - exact| / bound (PASS iff <= 1), ``tolerance_bound`` = the bound there."""
    if not out.numel():
        return {"bound_ratio": 0.0, "tolerance_bound": 0.0}
    diff = (out.double() - bound.exact).abs()
    allowed = bound.allowed()
    ratio = torch.where(allowed > 0, diff / allowed.clamp_min(1e-300),
                        torch.where(diff > 0, math.inf, 0.0))
    worst = int(ratio.reshape(-1).argmax())
    return {"bound_ratio": float(ratio.reshape(-1)[worst]),
            "tolerance_bound": float(allowed.reshape(-1)[worst])}


def _verdict(out: torch.Tensor, ref: torch.Tensor, *, float_ref: torch.Tensor | None,
             out_scale: float | None, steps: float, eager_ref: torch.Tensor | None,
             bound: ErrorBound | None = None) -> Verdict:
    metrics = {"out_shape": list(out.shape), "ref_shape": list(ref.shape)}
    if tuple(out.shape) != tuple(ref.shape) or out.dtype != ref.dtype:
        return Verdict(False, f"output {tuple(out.shape)} {out.dtype} vs reference "
                              f"{tuple(ref.shape)} {ref.dtype}", metrics)
    metrics.update(_errors(out, ref if bound is None else bound.exact))
    if float_ref is not None:
        metrics["sqnr_db"] = sqnr_db(float_ref, out)
        metrics["max_abs_error_vs_float"] = _errors(out, float_ref)["max_abs_error"]
    if not bool(torch.isfinite(out).all()):
        return Verdict(False, "output has NaN/Inf", metrics)
    n_bad = int(tolerance_mask(out, ref, out_scale=out_scale, steps=steps, bound=bound).sum())
    ok = n_bad == 0
    if out_scale is not None:
        metrics["tolerance"] = int8_tolerance(out_scale, steps)
        metrics["error_steps"] = metrics["max_abs_error"] / out_scale
        return Verdict(ok, "" if ok else f"max|d|={metrics['max_abs_error']:.3g} is "
                                         f"{metrics['error_steps']:.2f} output steps > {steps}",
                       metrics)
    if bound is not None:
        return _bounded(ok, n_bad, ref, out, eager_ref, bound, metrics)
    if ref.dtype in LOW_PRECISION_STEPS:
        return _low_precision(ok, ref, out, eager_ref, metrics)
    metrics["tolerance"] = FP32_ATOL
    return Verdict(ok, "" if ok else f"{n_bad}/{ref.numel()} elements outside atol={FP32_ATOL} "
                                     f"rtol={FP32_RTOL}, max|d|={metrics['max_abs_error']:.3g}",
                   metrics)


def _bounded(ok: bool, n_bad: int, ref: torch.Tensor, out: torch.Tensor,
             eager_ref: torch.Tensor | None, bound: ErrorBound, metrics: dict) -> Verdict:
    """A float cell judged by its error bound: the verdict's metrics and message."""
    metrics.update(bound_metrics(out, bound))
    metrics["tolerance"] = metrics["tolerance_bound"]
    if ref.dtype in LOW_PRECISION_STEPS:  # recorded beside the bound, as before (not judged)
        metrics["error_steps"] = epsilon_steps(out, ref)
        if eager_ref is not None and eager_ref.shape == ref.shape:
            metrics["eager_error_steps"] = epsilon_steps(eager_ref, ref)
    worst = bound_text(metrics["bound_ratio"])
    return Verdict(ok, "" if ok else f"{n_bad}/{ref.numel()} elements outside the error bound "
                                     f"(K={bound.terms}), worst {worst}, "
                                     f"max|d|={metrics['max_abs_error']:.3g}", metrics)


def bound_text(ratio: float | None) -> str:
    """How a ratio to the bound is shown: "3.2x the bound" ("" for none)."""
    if ratio is None or (isinstance(ratio, float) and math.isnan(ratio)):
        return ""
    return f"{ratio:.3g}x the bound" if math.isfinite(ratio) else "inf x the bound"


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
