"""ConvCase -> (nn.Module, example inputs), deterministic per case id.

Weights and inputs come from a generator seeded by the case id, so every backend, fix set, worker
and machine sees the same numbers for the same case (what makes the cells of a row comparable).
"""

from __future__ import annotations

import copy
import hashlib

import torch

from harness.spec import ConvCase

_MODULES = {
    (1, False): torch.nn.Conv1d, (2, False): torch.nn.Conv2d, (3, False): torch.nn.Conv3d,
    (1, True): torch.nn.ConvTranspose1d, (2, True): torch.nn.ConvTranspose2d,
    (3, True): torch.nn.ConvTranspose3d,
}


def case_seed(case: ConvCase, salt: str = "") -> int:
    return int.from_bytes(hashlib.sha256((case.case_id + salt).encode()).digest()[:8], "little")


def generator(case: ConvCase, salt: str = "") -> torch.Generator:
    return torch.Generator().manual_seed(case_seed(case, salt) % (2**63))


def module_class(case: ConvCase) -> type:
    """The torch.nn class a case builds (nn.Conv1d ... nn.ConvTranspose3d)."""
    return _MODULES[(case.dim, case.transposed)]


def module_kwargs(case: ConvCase) -> dict:
    """The nn.Conv* keyword arguments, padding passed through exactly as spelled."""
    def arg(v):
        return list(v) if isinstance(v, tuple) else v

    kwargs = dict(
        in_channels=case.in_channels, out_channels=case.out_channels,
        kernel_size=arg(case.kernel_size), stride=arg(case.stride), padding=arg(case.padding),
        dilation=arg(case.dilation), groups=case.groups, bias=case.bias,
    )
    # Later fields only when set, so the modules (and repro scripts) of older cases read as before.
    if case.padding_mode != "zeros":
        kwargs["padding_mode"] = case.padding_mode
    if case.output_padding != 0:
        kwargs["output_padding"] = arg(case.output_padding)
    return kwargs


def torch_dtype(case: ConvCase) -> torch.dtype:
    return getattr(torch, case.dtype)


def build_module(case: ConvCase) -> torch.nn.Module:
    """The eager module; raises whatever PyTorch raises for an illegal configuration."""
    cls = module_class(case)
    module = cls(**module_kwargs(case))
    g = generator(case, "weights")
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.rand(p.shape, generator=g) * 2 - 1)
    # Drawn in float32 and then cast: the same stream of numbers for every dtype.
    return module.to(torch_dtype(case)).eval()


def make_inputs(case: ConvCase, salt: str = "inputs") -> tuple[torch.Tensor]:
    x = torch.randn(case.input_shape, generator=generator(case, salt))
    return (x.to(torch_dtype(case)),)


def upcast_reference(module: torch.nn.Module, inputs: tuple, dtype: torch.dtype) -> torch.Tensor:
    """The low-precision case's reference: its own (already rounded) weights and inputs,
    computed in float32, then cast to the case's dtype: the correctly rounded answer up to
    float32's accumulation error, whatever the eager kernel of that dtype does."""
    wide = copy.deepcopy(module).float()
    with torch.no_grad():
        return wide(*(x.float() for x in inputs)).to(dtype)


def calibration_inputs(case: ConvCase, n: int = 4) -> list[tuple[torch.Tensor]]:
    """Inputs the quantizer's observers see; the test input is among them, so no value of it
    falls outside the calibrated range (that clipping would be the quantizer's doing, not the
    delegate's)."""
    return [make_inputs(case)] + [make_inputs(case, f"calib{i}") for i in range(n - 1)]


def eager_check(case: ConvCase) -> str | None:
    """None when eager PyTorch accepts the case, else its error message (-> INVALID)."""
    try:
        with torch.no_grad():
            build_module(case)(*make_inputs(case))
    except Exception as e:  # PyTorch's own verdict on the configuration
        return f"{type(e).__name__}: {e}".splitlines()[0]
    return None
