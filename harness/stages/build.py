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


def build_conv(case: ConvCase) -> torch.nn.Module:
    """The case's nn.Conv* with its weights drawn (float32; seeded from the case id)."""
    module = module_class(case)(**module_kwargs(case))
    g = generator(case, "weights")
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.rand(p.shape, generator=g) * 2 - 1)
    return module


def build_module(case: ConvCase) -> torch.nn.Module:
    """The eager module; raises whatever PyTorch raises for an illegal configuration.

    A case without context is the nn.Conv* itself. With context (prologue, epilogue, weights
    as inputs) it is ``Model`` of ``context_source(case)``: the same source text the repro
    script carries, so the graph a cell lowers and the one its repro builds are one text."""
    conv = build_conv(case)
    if case.has_context:
        namespace = {"torch": torch}
        exec(compile(context_source(case), f"<convconf model {case.case_id}>", "exec"), namespace)
        conv = namespace["Model"](conv)
    # Drawn in float32 and then cast: the same stream of numbers for every dtype.
    conv = conv.to(torch_dtype(case)).eval()
    if case.module_channels_last:  # the model converted as a user does (its 4-D/5-D weights)
        conv = conv.to(memory_format=torch_memory_format(case))
    return conv


def torch_memory_format(case: ConvCase) -> torch.memory_format:
    """The channels-last format of the case's rank (channels_last for 2-D convs, channels_last_3d
    for 3-D); what ``memory_format`` and ``module_channels_last`` convert to."""
    return torch.channels_last_3d if case.dim == 3 else torch.channels_last


def input_names(case: ConvCase) -> list[str]:
    """The graph's inputs, in order: x, then the weight and bias (weights="input"), then one
    residual per "add" of the epilogue."""
    names = ["x"]
    if case.weights == "input":
        names += ["weight"] + (["bias"] if case.bias else [])
    return names + [f"residual{i}" for i in range(case.residual_count())]


def make_inputs(case: ConvCase, salt: str = "inputs", shape: tuple | None = None
                ) -> tuple[torch.Tensor, ...]:
    """Every graph input (``input_names``), in the case's dtype and memory format (activations
    only: x and residuals). ``salt`` draws the activations; the weights are the case's own
    whatever the salt. ``shape``: x at another of the case's sizes (a dynamic case's)."""
    x = torch.randn(shape or case.input_shape, generator=generator(case, salt))
    found = [x]
    if case.weights == "input":
        conv = build_conv(case)
        found += [conv.weight.detach()] + ([conv.bias.detach()] if case.bias else [])
    for i in range(case.residual_count()):
        found.append(torch.randn(case.output_shape(), generator=generator(case, f"{salt}:residual{i}")))
    found = [t.to(torch_dtype(case)) for t in found]
    if case.memory_format != "contiguous":  # x and the residuals (the rank's activations)
        found = [t.to(memory_format=torch_memory_format(case)) if name == "x" or
                 name.startswith("residual") else t for name, t in zip(input_names(case), found,
                                                                      strict=True)]
    return tuple(found)


def size_inputs(case: ConvCase, shape: tuple) -> tuple[torch.Tensor, ...]:
    """A dynamic case's inputs at one of its sizes (its own draw per size, same weights)."""
    return make_inputs(case, salt="inputs@" + "x".join(map(str, shape)), shape=tuple(shape))


def dynamic_shapes(case: ConvCase):
    """torch.export's ``dynamic_shapes`` for the case's inputs (None for a static case): one
    ``Dim`` per dynamic dimension of x, bounded by the case's sizes; the other inputs static."""
    bounds = case.dynamic_bounds()
    if not bounds:
        return None
    spatial = {1: ("length",), 2: ("height", "width"), 3: ("depth", "height", "width")}[case.dim]
    names = {0: "batch"} | {a + 2: name for a, name in enumerate(spatial)}
    x = {a: torch.export.Dim(names[a], min=lo, max=hi) for a, (lo, hi) in bounds.items()}
    return (x,) + (None,) * (len(input_names(case)) - 1)


def batchnorm_stats(case: ConvCase, index: int) -> dict[str, torch.Tensor]:
    """Random eval-mode statistics and affine parameters of the epilogue's ``index``-th op (a
    batchnorm), seeded from the case id: a variance in [0.5, 2), a mean and shift ~N(0, 0.5),
    a scale in [0.5, 1.5)."""
    g = generator(case, f"batchnorm{index}")
    c = case.out_channels
    return {"running_mean": torch.randn(c, generator=g) * 0.5,
            "running_var": torch.rand(c, generator=g) * 1.5 + 0.5,
            "weight": torch.rand(c, generator=g) + 0.5,
            "bias": torch.randn(c, generator=g) * 0.5}


def _functional_conv(case: ConvCase) -> str:
    """The call of the functional conv, arguments exactly as the case spells them."""
    def arg(v):
        return repr(list(v) if isinstance(v, tuple) else v)

    name = ("conv_transpose" if case.transposed else "conv") + f"{case.dim}d"
    bias = "bias" if case.bias else "None"
    if case.transposed:  # F.conv_transpose*d(input, weight, bias, stride, padding, output_padding, groups, dilation)
        return (f"torch.nn.functional.{name}(x, weight, {bias}, stride={arg(case.stride)}, "
                f"padding={arg(case.padding)}, output_padding={arg(case.output_padding)}, "
                f"groups={case.groups}, dilation={arg(case.dilation)})")
    return (f"torch.nn.functional.{name}(x, weight, {bias}, stride={arg(case.stride)}, "
            f"padding={arg(case.padding)}, dilation={arg(case.dilation)}, groups={case.groups})")


def context_source(case: ConvCase) -> str:
    """Python source of ``class Model(torch.nn.Module)`` for a case with context: built from
    the case alone (batchnorm statistics are literals), so build_module and the repro script
    exec the same text. ``Model(conv)`` takes the case's nn.Conv* with its weights drawn."""
    lines = ["class Model(torch.nn.Module):",
             f'    """{case.case_id}: the conv in context."""', "",
             "    def __init__(self, conv):", "        super().__init__()"]
    if case.weights == "constant":
        lines.append("        self.conv = conv")
    else:
        lines.append("        # weights=\"input\": the weight and bias are graph inputs (conv unused)")
    body = []
    if case.prologue is not None:
        _, pads, value = case.prologue
        body.append(f"x = torch.nn.functional.pad(x, {list(pads)!r}, value={float(value)!r})")
    body.append(f"y = {'self.conv(x)' if case.weights == 'constant' else _functional_conv(case)}")
    residual = 0
    for i, op in enumerate(case.epilogue):
        if op == "relu":
            body.append("y = torch.nn.functional.relu(y)")
        elif op == "relu6":
            body.append("y = torch.nn.functional.relu6(y)")
        elif op == "batchnorm":
            lines.append(f"        self.bn{i} = torch.nn.BatchNorm{case.dim}d({case.out_channels})")
            lines.append("        with torch.no_grad():")
            for k, t in batchnorm_stats(case, i).items():
                target = f"self.bn{i}.{k}"
                # float32 values as the shortest double repr: the literal reads back exactly
                lines.append(f"            {target}.copy_(torch.tensor({t.tolist()!r}))")
            body.append(f"y = self.bn{i}(y)")
        elif op == "add":
            body.append(f"y = y + residual{residual}")
            residual += 1
        elif op[0] == "hardtanh":
            body.append(f"y = torch.nn.functional.hardtanh(y, {float(op[1])!r}, {float(op[2])!r})")
        else:  # clamp
            low, high = (None if v is None else float(v) for v in op[1:])
            body.append(f"y = torch.clamp(y, {low!r}, {high!r})")
    args = ", ".join(["self"] + input_names(case))
    lines += ["", f"    def forward({args}):"] + [f"        {b}" for b in body] + ["        return y", ""]
    return "\n".join(lines)


def upcast_reference(module: torch.nn.Module, inputs: tuple, dtype: torch.dtype) -> torch.Tensor:
    """The low-precision case's reference: its own (already rounded) weights and inputs,
    computed in float32, then cast to the case's dtype: the correctly rounded answer up to
    float32's accumulation error, whatever the eager kernel of that dtype does."""
    wide = copy.deepcopy(module).float()
    with torch.no_grad():
        return wide(*(x.float() for x in inputs)).to(dtype)


def exact_reference(module: torch.nn.Module, inputs: tuple) -> torch.Tensor:
    """The float case's reference: its own (already rounded) weights and inputs computed in
    float64, not rounded back (what every float cell is judged against, with its bound)."""
    wide = copy.deepcopy(module).double()
    with torch.no_grad():
        return wide(*(x.double() for x in inputs))


# Epilogue ops that round (their roundings to the program's dtype) and add a term to the sum;
# relu, relu6, hardtanh and clamp are exact and 1-Lipschitz: the error passes, nothing added.
# Batchnorm (y - mean) w / sqrt(var + eps) + b: three roundings for the scale, three applying it.
_EPILOGUE_ROUNDINGS = {"batchnorm": 6, "add": 1}


def error_bound(case: ConvCase, module: torch.nn.Module, inputs: tuple):
    """The float case's ``compare.ErrorBound``: its float64 reference (``exact_reference``) and
    the magnitude of the terms behind each output element, M = |W| conv |X| + |b| (the case's
    own conv, padding mode included, on absolute weights, bias and padded input, float64),
    carried through the epilogue (batchnorm (y - mean) a + b: |a| (M + |mean|) + |b|; add:
    M + |residual|; the clamps: M unchanged). K = in_channels / groups x kernel volume (an
    upper bound per output of a transposed conv), + 1 for the bias and each batchnorm or add."""
    from harness.stages.compare import ErrorBound

    given = dict(zip(input_names(case), inputs, strict=True))
    if case.weights == "input":
        weight, bias = given["weight"], given.get("bias")
    else:
        conv = module.conv if case.has_context else module
        weight, bias = conv.weight, conv.bias
    magnitude_conv = build_conv(case).double()
    with torch.no_grad():
        magnitude_conv.weight.copy_(weight.detach().double().abs())
        if bias is not None:
            magnitude_conv.bias.copy_(bias.detach().double().abs())
        x = given["x"].double()
        if case.prologue is not None:  # the pad's constant enters the sum as |value|
            _, pads, value = case.prologue
            x = torch.nn.functional.pad(x, list(pads), value=float(value))
        magnitude = magnitude_conv(x.abs())
    kernel_volume = 1
    for k in weight.shape[2:]:
        kernel_volume *= int(k)
    terms = case.in_channels // case.groups * kernel_volume + (1 if bias is not None else 0)
    # the conv's output rounded to a low-precision dtype before an epilogue op (the last
    # rounding, at the value, is the bound's own term)
    roundings = 1 if case.dtype != "float32" and case.epilogue else 0
    residual = 0
    for i, op in enumerate(case.epilogue):
        name = op if isinstance(op, str) else op[0]
        if name == "batchnorm":
            bn = getattr(module, f"bn{i}")
            scale = bn.weight.double().abs() / torch.sqrt(bn.running_var.double() + bn.eps)
            shape = (1, -1) + (1,) * (magnitude.dim() - 2)
            # |a| (M + |mean|) + |b|: the terms as eager spells them; covers a folded weight
            # and shift b - mean a too
            mean = bn.running_mean.double().abs().view(shape)
            magnitude = scale.view(shape) * (magnitude + mean) + bn.bias.double().abs().view(shape)
        elif name == "add":
            magnitude = magnitude + given[f"residual{residual}"].double().abs()
            residual += 1
        roundings += _EPILOGUE_ROUNDINGS.get(name, 0)
        terms += 1 if name in _EPILOGUE_ROUNDINGS else 0
    return ErrorBound(exact=exact_reference(module, inputs), magnitude=magnitude.detach(),
                      terms=terms, dtype=case.dtype, roundings=roundings)


def calibration_inputs(case: ConvCase, n: int = 4) -> list[tuple[torch.Tensor, ...]]:
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
