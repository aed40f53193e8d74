"""Cases from a model: every convolution one forward pass really runs, as a case file.

``harness cases from-model MODULE:FACTORY`` builds the model (no weights: a factory builds it from
its config, randomly initialised), runs one forward under ``torch.no_grad`` with a pre-hook on
every ``nn.Conv*``/``nn.ConvTranspose*``, and turns each call into a ConvCase with the arguments
*as the module stores them* (``nn.Conv2d(padding=0)`` stores ``(0, 0)``: that tuple is what the
op receives, so that is what the case spells; ``padding="valid"`` stays the string) and the input
shape and dtype the call really saw. Equal cases are one entry listing every module path.

Each call also carries its context in the model (``graph_context``: one ``torch.export`` of the
same forward): the explicit constant pad before it (``prologue``; the case's input is then the
pad's input) and the ops consuming its output (``epilogue``: conv -> batchnorm -> relu, a residual
add, relu6, ...), as far as the ConvCase vocabulary goes; what the chain runs into beyond it
(``silu``, ``permute -> layer_norm``) is named in the entry's ``context_rest`` and ``source``.
Equal cases, context included, are one entry. A model that does not export is recorded without
context, and the result says why.

``--max-spatial N`` shrinks each case's spatial input sizes for slow devices, keeping what
decides the conv's behaviour (kernel, stride, dilation, padding spelling, groups, and the stride
remainder, so the last window still falls where it did); the entry's ``source`` says what changed.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import os
import sys
from dataclasses import dataclass, field

from harness.generation.graph_context import ConvContext
from harness.spec import CaseError, ConvCase

DTYPE_NAMES = {"torch.float32": "float32", "torch.float16": "float16",
               "torch.bfloat16": "bfloat16"}
MODULE_PATHS_IN_SOURCE = 3  # the rest of a long list is in the entry's "modules"


class FromModelError(ValueError):
    """Bad input to from-model (not importable, not a factory, forward failed): one line."""


@dataclass
class Entry:
    case: ConvCase
    modules: list = field(default_factory=list)
    original_shapes: list = field(default_factory=list)  # before --max-spatial, when it shrank
    rests: list = field(default_factory=list)  # context beyond the case ("then silu"), distinct

    def source(self, model: str, max_spatial: int | None) -> str:
        paths = self.modules[:MODULE_PATHS_IN_SOURCE]
        more = len(self.modules) - len(paths)
        text = f"{model} @ {', '.join(paths)}" + (f" (+{more} more)" if more else "")
        if self.rests:
            text += f"; beyond the case: {' / '.join(self.rests)}"
        if self.original_shapes:
            was = ", ".join("x".join(map(str, s)) for s in self.original_shapes)
            now = "x".join(map(str, self.case.input_shape))
            text += f"; --max-spatial {max_spatial}: input_shape {was} -> {now}"
        return text

    def to_json(self, model: str, max_spatial: int | None) -> dict:
        entry = {"case": self.case.to_dict(), "source": self.source(model, max_spatial),
                 "modules": list(self.modules)}
        if self.original_shapes:
            entry["original_input_shapes"] = [list(s) for s in self.original_shapes]
        if self.rests:
            entry["context_rest"] = list(self.rests)
        return entry


@dataclass
class Result:
    entries: list  # [Entry], in the order the forward pass first called them
    calls: int = 0
    skipped: list = field(default_factory=list)  # ["module path: why"]
    no_context: str = ""  # why no context was recorded (the model did not export), else ""
    unmatched: list = field(default_factory=list)  # conv calls the exported graph had no node for


def resolve(target: str, what: str):
    """'package.module:attr' -> the attribute; FromModelError saying what is wrong with it."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise FromModelError(f"{what} {target!r} must be MODULE:NAME (e.g. cases.models.zoo:resnet50)")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` would: the `convconf` script does not
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # ImportError, or whatever the module raises while importing
        raise FromModelError(f"{what} {target!r}: cannot import {module_name} "
                             f"({type(e).__name__}: {_first_line(e)})") from None
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise FromModelError(f"{what} {target!r}: {module_name} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise FromModelError(f"{what} {target!r} is a {type(obj).__name__}, not callable")
    return obj


def parse_shape(text: str) -> tuple:
    try:
        shape = tuple(int(x) for x in text.replace("x", ",").split(","))
    except ValueError:
        shape = ()
    if not shape or any(s < 1 for s in shape):
        raise FromModelError(f"--input-shape {text!r} must be positive ints separated by commas, "
                             f"e.g. 1,3,224,224")
    return shape


def build(factory_target: str, input_shape: tuple | None = None,
          input_factory: str | None = None):
    """-> (model, args, kwargs) ready for one forward; FromModelError on any bad input."""
    import torch

    factory = resolve(factory_target, "factory")
    make_input = resolve(input_factory, "--input-factory") if input_factory else None
    if input_shape is None and make_input is None:
        # a factory may say what it eats (cases/models does), else the user must
        input_shape = getattr(factory, "input_shape", None)
        if input_shape is None:
            raise FromModelError(f"{factory_target} says no input shape: give --input-shape or "
                                 f"--input-factory")
    model = _call(factory, factory_target)
    if not isinstance(model, torch.nn.Module):
        raise FromModelError(f"factory {factory_target} returned a {type(model).__name__}, "
                             f"not a torch.nn.Module")
    if make_input is None:
        dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.float32)
        torch.manual_seed(0)
        return model.eval(), (torch.randn(tuple(input_shape), dtype=dtype),), {}
    made = _call(make_input, input_factory)
    if isinstance(made, dict):
        return model.eval(), (), made
    return model.eval(), tuple(made) if isinstance(made, (tuple, list)) else (made,), {}


def _call(fn, target: str):
    try:
        return fn()
    except Exception as e:
        raise FromModelError(f"{target}() raised {type(e).__name__}: {_first_line(e)}") from None


def _first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return lines[0] if lines else ""


def record(model, args: tuple, kwargs: dict, max_spatial: int | None = None,
           context: bool = True) -> Result:
    """One forward of ``model`` with a pre-hook on every conv: the de-duplicated cases, each
    with its context in the exported graph (``context=False``: the lone convs)."""
    import torch

    from harness.generation.graph_context import contexts

    result = Result(entries=[])
    by_id: dict[str, Entry] = {}
    found: dict = {}
    if context:
        try:
            found = contexts(model, args, kwargs)
        except Exception as e:  # torch.export's verdict on the model: the convs still count
            result.no_context = f"torch.export failed ({type(e).__name__}: {_first_line(e)})"
    calls: dict[str, int] = {}

    def hook_for(path: str):
        def hook(module, inputs):
            result.calls += 1
            x = inputs[0]
            n = calls[path] = calls.get(path, 0) + 1
            ctx = found.get(path, [])
            here = ctx[n - 1] if n <= len(ctx) else None
            if here is None and context and not result.no_context:
                result.unmatched.append(path)  # recorded alone: said, not hidden
            try:
                case, rest = case_in_context(
                    with_layout(case_of(module, tuple(x.shape),
                                        DTYPE_NAMES.get(str(x.dtype), str(x.dtype))), module, x),
                    here)
                original = case.input_shape
                if max_spatial is not None:
                    case = shrink(case, max_spatial)
            except (CaseError, TypeError) as e:
                result.skipped.append(f"{path}: {e}")
                return
            entry = by_id.get(case.case_id)
            if entry is None:
                entry = by_id[case.case_id] = Entry(case)
                result.entries.append(entry)
            if path not in entry.modules:
                entry.modules.append(path)
            if rest and rest not in entry.rests:
                entry.rests.append(rest)
            if case.input_shape != original and original not in entry.original_shapes:
                entry.original_shapes.append(original)
        return hook

    convs = (torch.nn.modules.conv._ConvNd,)
    handles = [m.register_forward_pre_hook(hook_for(path or "<root>"))
               for path, m in model.named_modules() if isinstance(m, convs)]
    try:
        with torch.no_grad():
            model(*args, **kwargs)
    except Exception as e:
        raise FromModelError(f"forward of the model raised {type(e).__name__}: "
                             f"{_first_line(e)}") from None
    finally:
        for h in handles:
            h.remove()
    return result


def case_in_context(case: ConvCase, context: ConvContext | None) -> tuple[ConvCase, str]:
    """``case`` (the lone conv, input as the conv saw it) with its graph context: the prologue's
    pad moved out of the input shape, the epilogue ops. -> (case, what the case cannot say: the
    epilogue's rest, or a pad it cannot carry, e.g. before a conv with padding of its own)."""
    import dataclasses

    if context is None:
        return case, ""
    notes = [f"then {context.rest}"] if context.rest else []
    case_with = dataclasses.replace(case, epilogue=context.epilogue)
    if context.prologue is not None:
        _, pads, value = context.prologue
        shape = list(case.input_shape)
        for j in range(len(pads) // 2):  # F.pad's order: last dimension first
            if j < case.dim:
                shape[-1 - j] -= pads[2 * j] + pads[2 * j + 1]
        try:
            if len(pads) > 2 * case.dim or min(shape) < 1:
                raise CaseError("pads beyond the spatial dimensions")
            case_with = dataclasses.replace(case_with, prologue=context.prologue,
                                            input_shape=tuple(shape))
        except CaseError as e:
            notes.insert(0, f"after pad {list(pads)} value {value:g} ({e})")
    return case_with, "; ".join(notes)


def with_layout(case: ConvCase, module, x) -> ConvCase:
    """The memory format the model really ran the conv with (issue 39): ``channels_last`` when
    the conv's input is channels-last and not contiguous (a model fed or converted so), and
    ``module_channels_last`` when the conv's weight is; a tensor that is both (C = 1, 1x1
    spatial) reads as contiguous. The rest stays as case_of made it."""
    import torch

    fmt = {4: torch.channels_last, 5: torch.channels_last_3d}.get(x.dim())
    if fmt is None:
        return case

    def channels_last(t) -> bool:
        return t is not None and t.dim() == x.dim() and not t.is_contiguous() \
            and t.is_contiguous(memory_format=fmt)

    changes = {}
    if channels_last(x):
        changes["memory_format"] = "channels_last_3d" if x.dim() == 5 else "channels_last"
    if channels_last(getattr(module, "weight", None)):
        changes["module_channels_last"] = True
    return dataclasses.replace(case, **changes) if changes else case


def case_of(module, input_shape: tuple, dtype: str) -> ConvCase:
    """The ConvCase of one conv call, every argument as the module stores it. padding_mode and
    output_padding are named only off their default: every module stores output_padding (0, 0),
    which as a case would be a spelling of its own (another id) for the same conv. A value the
    ConvCase rejects is a CaseError for this one module, not a crash."""
    fields = dict(dim=len(module.kernel_size), transposed=bool(module.transposed),
                  in_channels=module.in_channels, out_channels=module.out_channels,
                  kernel_size=module.kernel_size, stride=module.stride, padding=module.padding,
                  dilation=module.dilation, groups=module.groups, bias=module.bias is not None,
                  input_shape=input_shape, dtype=dtype)
    if module.padding_mode != "zeros":
        fields["padding_mode"] = module.padding_mode
    if module.transposed and any(module.output_padding):
        fields["output_padding"] = tuple(module.output_padding)
    return ConvCase.from_dict(fields)


def shrink(case: ConvCase, max_spatial: int) -> ConvCase:
    """Spatial sizes above ``max_spatial`` cut down to at most it, never below the smallest size
    whose output is non-empty; for a strided conv the cut keeps the size's remainder modulo the
    stride, so the last window still overhangs (or not) by what it did at the real size."""
    import dataclasses

    spatial = case.input_shape[2:]
    kernel, stride, dilation = (case.spatial(n) for n in ("kernel_size", "stride", "dilation"))
    pads = [max(sides) for sides in case.side_pads()]  # "same": its larger half
    new = []
    for i, size in enumerate(spatial):
        if size <= max_spatial:
            new.append(size)
            continue
        reach = dilation[i] * (kernel[i] - 1) + 1
        if case.transposed:
            extra = case.spatial("output_padding")[i]
            # out = (L-1)*s - 2p + reach + output_padding must be >= 1
            smallest = 1 + max(0, math.ceil((2 * pads[i] - reach - extra + 1) / stride[i]))
            new.append(max(max_spatial, smallest))
            continue
        smallest = 1 if case.padding == "same" else max(1, reach - 2 * pads[i])
        if case.padding_mode != "zeros":
            smallest = max(smallest, pads[i] + 1)  # reflect/circular pad less than the input
        fit = max_spatial - (max_spatial - size) % stride[i]  # largest <= N, same remainder
        if fit < smallest:  # N is below what the conv needs: the smallest size that works
            fit = smallest + (size - smallest) % stride[i]
        new.append(fit)
    if tuple(new) == spatial:
        return case
    return dataclasses.replace(case, input_shape=case.input_shape[:2] + tuple(new))


def from_model(factory_target: str, input_shape: tuple | None = None,
               input_factory: str | None = None, max_spatial: int | None = None,
               context: bool = True) -> tuple:
    """-> (case-file entries as JSON objects, Result)."""
    if max_spatial is not None and max_spatial < 1:
        raise FromModelError("--max-spatial must be >= 1")
    model, args, kwargs = build(factory_target, input_shape, input_factory)
    result = record(model, args, kwargs, max_spatial, context)
    return [e.to_json(factory_target, max_spatial) for e in result.entries], result


def case_sources(case_files) -> dict:
    """{case_id: source} of the entries of these case files that carry one (from-model's);
    a case named by several files gets their sources joined. A file that cannot be read any more
    (a resumed run whose case file moved) just contributes nothing: sources are notes."""
    from harness.spec import load_entries

    found: dict[str, list] = {}
    for path in case_files:
        try:
            pairs = load_entries(path)
        except CaseError:
            continue
        for case, entry in pairs:
            source = entry.get("source")
            if source and source not in found.setdefault(case.case_id, []):
                found[case.case_id].append(source)
    return {case_id: " | ".join(texts) for case_id, texts in found.items()}
