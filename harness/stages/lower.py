"""ExportedProgram -> lowered program (.pte bytes) + what ended up inside the delegate.

Lowering once per distinct program: ``to_edge_transform_and_lower`` first converts the exported
program to the edge dialect (``to_edge``: the decompositions, most of a lowering's time), then
runs the lane's fix passes, then partitions, builds the delegate and serializes. A ``Watch``
passed to ``lower`` keeps what the lowering showed on the way: the edge program before any fix
pass (``base``) and the identity of what the first partitioner was handed (``identity``: a
digest of the graph's canonical printout, its signature and its constants' bytes).
``probe_identity`` applies another lane's fix passes to a copy of that base the way the lowering
does and returns the identity its partitioner would be handed, in milliseconds: where it equals
a lowered lane's, the two lanes' programs are one program and lowering it again would produce
the same bytes (prepare.py reuses it; tests/test_lowering_memo.py checks the bytes).

Lowering is set up as ExecuTorch's own examples set it up (``register_runtime_ops``: the
quantized out variants), so a quantized program that leaves a quantize/dequantize outside the
delegate lowers, and then runs or fails for its real reason.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import importlib
import io
import time
from collections import Counter
from dataclasses import dataclass, field

from harness.stages import fixes as fix_registry
from harness.stages.backends import Backend
from harness.stages.fixes.base import Fix
from harness.stages.lowering_memo import cia_ops_once

# Ops that are bookkeeping rather than computation when left outside a delegate.
_BOOKKEEPING = {"getitem", "executorch_call_delegate"}


@dataclass
class Lowered:
    pte: bytes
    edge_manager: object
    delegated_ops: dict = field(default_factory=dict)
    undelegated_ops: dict = field(default_factory=dict)
    lower_time_s: float = 0.0

    @property
    def conv_delegated(self) -> bool:
        return not self.undelegated_ops and any("convolution" in k for k in self.delegated_ops)


def _op_name(node) -> str:
    target = node.target
    name = getattr(target, "__name__", str(target))
    return name.replace(".default", "") if isinstance(name, str) else str(name)


def op_counts(edge_manager) -> tuple[dict, dict]:
    from executorch.exir.lowered_backend_module import get_lowered_submodules

    gm = edge_manager.exported_program().graph_module
    delegated: Counter = Counter()
    for _, lm, _ in get_lowered_submodules(gm):
        for n in lm.original_module.graph_module.graph.nodes:
            if n.op == "call_function" and _op_name(n) not in _BOOKKEEPING:
                delegated[_op_name(n)] += 1
    undelegated = Counter(_op_name(n) for n in gm.graph.nodes
                          if n.op == "call_function" and _op_name(n) not in _BOOKKEEPING)
    return dict(delegated), dict(undelegated)


@dataclass
class Watch:
    """What one lowering showed on the way (filled as it goes: also when it raises later)."""
    keep_base: bool = True  # keep a copy of the edge program before any fix pass
    base: object = None  # that copy (an EdgeProgramManager), or None: the lowering never got there
    identity: str | None = None  # program_identity of what the first partitioner was handed


def comparable(fix_names) -> bool:
    """Whether a lane's lowering is fully described by the program its partitioner is handed:
    no fix of it patches the delegate's builder (``Fix.patch``), which acts after that point."""
    return all(type(fix_registry.get(n)).patch is Fix.patch for n in fix_names)


def program_identity(edge_manager) -> str:
    """A digest of every method's graph (canonical printout: nodes, targets, arguments, the
    shape/dtype/stride of every value), graph signature, range constraints and constants (name,
    dtype, shape, stride, bytes): equal for two programs that lower identically."""
    digest = hashlib.sha256()
    for method in sorted(edge_manager.methods):
        ep = edge_manager.exported_program(method)
        digest.update(method.encode())
        digest.update(ep.graph_module.print_readable(print_output=False, include_stride=True,
                                                     include_device=True).encode())
        digest.update(f"{ep.graph_signature}\n{ep.range_constraints}\n".encode())
        for kind, table in (("state", ep.state_dict), ("constant", ep.constants)):
            for name in sorted(table):
                digest.update(f"{kind} {name} ".encode() + _value_bytes(table[name]))
    return digest.hexdigest()


def _value_bytes(value) -> bytes:
    import torch

    if not isinstance(value, torch.Tensor):
        return repr(value).encode()
    t = value.detach()
    head = f"{t.dtype} {tuple(t.shape)} {t.stride()} ".encode()
    try:
        return head + t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
    except (RuntimeError, TypeError):  # a dtype that cannot be viewed as bytes: serialized
        buf = io.BytesIO()
        torch.save(t.contiguous(), buf)
        return head + buf.getvalue()


@contextlib.contextmanager
def _watching(watch: Watch | None):
    """Fill ``watch`` during a lowering: the edge program at its first transform or partitioning
    (to_edge's output), the identity at its first partitioning (after the fix passes)."""
    if watch is None:
        yield
        return
    from executorch.exir import EdgeProgramManager

    transform, to_backend = EdgeProgramManager.transform, EdgeProgramManager.to_backend

    def first_sight(manager) -> None:
        if watch.keep_base and watch.base is None:
            watch.base = copy.deepcopy(manager)

    def watched_transform(self, *args, **kwargs):
        first_sight(self)
        return transform(self, *args, **kwargs)

    def watched_to_backend(self, *args, **kwargs):
        first_sight(self)
        if watch.identity is None:
            watch.identity = program_identity(self)
        return to_backend(self, *args, **kwargs)

    EdgeProgramManager.transform, EdgeProgramManager.to_backend = (watched_transform,
                                                                   watched_to_backend)
    try:
        yield
    finally:
        EdgeProgramManager.transform, EdgeProgramManager.to_backend = transform, to_backend


def probe_identity(base, backend: Backend, fix_names) -> str | None:
    """The identity of the program ``lower(..., fix_names)`` would hand its partitioner, from
    ``base`` (a Watch's): the lane's fix passes applied to a copy of it as
    ``to_edge_transform_and_lower`` applies them (``EdgeProgramManager.transform``, then
    ``lift_constant_tensor_pass`` on every method). None when that cannot be told here (a fix
    whose builder patch could act on the program, ``Fix.patch_acts_on``; a pass that raises; an
    ExecuTorch without those steps): then the lane is lowered."""
    from executorch.exir import to_edge_transform_and_lower

    steps = importlib.import_module(to_edge_transform_and_lower.__module__)
    lift = getattr(steps, "lift_constant_tensor_pass", None)
    ordered = [fix_registry.get(n) for n in fix_registry.ordered(fix_names)]
    passes = [p for fix in ordered for p in fix.transform_passes()]
    try:
        with backend.lowering_context(), cia_ops_once():
            edge = copy.deepcopy(base)
            if passes:
                if lift is None:
                    return None
                edge = edge.transform(passes)
                for method in edge.methods:
                    lift(edge.exported_program(method))
            if any(fix.patch_acts_on(edge) is not False for fix in ordered):
                return None
            return program_identity(edge)
    except Exception:  # the lane's own lowering will raise it, with its traceback
        return None


class SetupError(RuntimeError):
    """Our own lowering setup is incomplete (component ``harness``): e.g. the quantized
    out-variant library that ExecuTorch's examples load could not be loaded here."""


# The quantized_decomposed ops a quantized program may leave outside a delegate (a weight's or
# activation's quantize/dequantize); to_executorch needs their .out variants registered.
QUANTIZED_OUT_OPS = ("quantize_per_tensor", "dequantize_per_tensor", "quantize_per_channel",
                     "dequantize_per_channel")


@functools.lru_cache(maxsize=1)
def register_runtime_ops() -> str:
    """Set up lowering as ExecuTorch's examples do (examples/xnnpack/quantization/example.py,
    backends/xnnpack/test/ops/test_conv2d.py, backends/test/suite/flows/nxp.py):
    ``import executorch.kernels.quantized``, which loads ``libquantized_ops_aot_lib`` and so
    registers the ``quantized_decomposed::*.out`` variants ``to_executorch`` swaps in for a
    quantize/dequantize left outside a delegate. Without it such a program fails "Missing out
    variants" — our setup, not ExecuTorch's. Once per process; -> "" when every needed .out
    variant is registered, else why not (the module swallows a failed load: we check)."""
    import torch

    try:
        import executorch.kernels.quantized  # noqa: F401
    except Exception as e:  # an ExecuTorch without the package: said, never silent
        return f"import executorch.kernels.quantized failed: {type(e).__name__}: {e}"
    def overloads(op: str) -> set:  # asked afresh: an op packet torch.ops made earlier keeps
        try:  # the overloads it saw then (the quantizer's Python-defined ops, before .out)
            return {s.overload_name for s in
                    torch._C._jit_get_schemas_for_operator(f"quantized_decomposed::{op}")}
        except RuntimeError:
            return set()

    missing = [op for op in QUANTIZED_OUT_OPS if "out" not in overloads(op)]
    if missing:
        return ("executorch.kernels.quantized did not register the .out variants of "
                + ", ".join(f"quantized_decomposed::{op}" for op in missing)
                + " (libquantized_ops_aot_lib did not load)")
    return ""


def lower(exported_program, backend: Backend, fix_names: list[str],
          watch: Watch | None = None) -> Lowered:
    from executorch.exir import to_edge_transform_and_lower

    register_runtime_ops()
    chosen = [fix_registry.get(n) for n in fix_registry.ordered(fix_names)]
    passes = [p for f in chosen for p in f.transform_passes()]
    t0 = time.perf_counter()
    with contextlib.ExitStack() as stack:
        stack.enter_context(backend.lowering_context())
        stack.enter_context(cia_ops_once())
        for f in chosen:
            stack.enter_context(f.patch())
        stack.enter_context(_watching(watch))
        edge = to_edge_transform_and_lower(
            exported_program, partitioner=backend.partitioners(), transform_passes=passes or None)
        delegated, undelegated = op_counts(edge)  # before to_executorch adds memory planning
        try:
            pte = edge.to_executorch().buffer
        except RuntimeError as e:
            problem = register_runtime_ops()
            if problem and "Missing out variants" in str(e):  # our setup, not ExecuTorch
                raise SetupError(f"{problem}: {str(e).splitlines()[0]}") from e
            raise
    return Lowered(pte=pte, edge_manager=edge, delegated_ops=delegated,
                   undelegated_ops=undelegated, lower_time_s=time.perf_counter() - t0)
