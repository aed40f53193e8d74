"""The static stages of every lane of one case, with the per-case work done once.

The eager module, its inputs and float reference, the quantization (prepare/calibrate/convert)
and ``torch.export`` are the same for every backend and fix set of a case; only lowering is per
lane. ``prepare_case`` does the shared part once per case (quantization and export once per
*quantizer*: the Vulkan lane quantizes with XNNPACK's quantizer, so both lanes share it) and
lowers each lane from a private copy of the exported program. Execution is not here: it runs
per cell, in its own worker call, so a native crash costs one cell (runner.py).

Lowered once per distinct program: a backend's lanes are lowered stock first (then by number of
fixes); before a fixed lane is lowered, its fix passes are applied to a copy of the edge program
the first lowering made (lower.probe_identity). Where the result is a program already lowered
for the case (a fix that changes nothing in this case's graph: the common case), the lane takes
that lane's Prepared as it is (program, references, static verdict) and says so in
``reused_from`` ("stock", or "+fixes" of the lane it matches); the bytes are those lowering it
would produce (tests/test_lowering_memo.py). Whether it still executes is the runner's call (a
runtime fix executes the same program on its own plug-in).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field, fields

import torch

from harness.stages import backends
from harness.stages.build import (build_module, dynamic_shapes, error_bound, make_inputs,
                                  upcast_reference)
from harness.stages.compare import ErrorBound
from harness.stages.lower import Watch, comparable, lower, probe_identity
from harness.stages.quantize import output_qparams, quantize
from harness.stages.sizes import sized_references
from harness.lane import Lane
from harness.spec import ConvCase
from harness.status import Status, machine_full


@dataclass
class References:
    """What a lane's output is judged against (compare.py): the inputs it ran on, the
    reference, and for int8 / fp16 / bf16 the float and eager outputs measured beside it."""
    inputs: tuple
    ref: torch.Tensor
    float_ref: torch.Tensor | None = None
    eager_ref: torch.Tensor | None = None
    # a float case's error bound (compare.ErrorBound: the reference in float64 and the
    # magnitude of the terms behind each element), by which it is judged; None for int8
    bound: ErrorBound | None = None
    # a dynamic case: the same per size it executes at (stages/sizes.py: dicts of size, inputs,
    # ref, float_ref, eager_ref), in the case's order; [] for a static case
    sizes: list = field(default_factory=list)


@dataclass
class Prepared:
    """One lane's static stages: the verdict so far, the lowered program, its references.
    What step 1 of a run hands to execution as it is (nothing is rebuilt or re-read), and what
    the cache stores (``to_meta`` + program.pte + refs.pt)."""
    lane: Lane
    status: str | None = None  # a static verdict, or None: to execute
    phase: str | None = None
    message: str = ""
    traceback: str = ""
    refs: References | None = None
    out_scale: float | None = None
    pte: bytes | None = None
    pte_size_kb: float | None = None
    quantize_time_s: float | None = None
    lower_time_s: float | None = None
    delegated_ops: dict = field(default_factory=dict)
    undelegated_ops: dict = field(default_factory=dict)
    contract_violations: list = field(default_factory=list)
    code_path: list = field(default_factory=list)  # backend.code_path: what the payload names
    prepare_share_s: float = 0.0  # this lane's share of the case's eager/quantize/export work
    # "": lowered for this lane; "stock" / "+fix,fix": the same program as that lane of the case
    # (its fix passes change nothing here), whose Prepared this is (lower_time_s: the check's)
    reused_from: str = ""

    def to_meta(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name not in ("lane", "refs", "pte")}

    @classmethod
    def from_meta(cls, lane: Lane, meta: dict, pte: bytes | None = None,
                  refs: References | None = None) -> Prepared:
        known = {f.name for f in fields(cls)}
        return cls(lane=lane, pte=pte, refs=refs, **{k: v for k, v in meta.items() if k in known})

    @property
    def seconds(self) -> float:
        return round((self.lower_time_s or 0) + self.prepare_share_s, 3)


def prepare_case(case: ConvCase, lanes: list[Lane]) -> dict[Lane, Prepared]:
    """-> a Prepared per lane; INVALID ones are not cacheable."""
    t0 = time.perf_counter()
    try:
        module = build_module(case)
        inputs = make_inputs(case)
        with torch.no_grad():
            float_ref = module(*inputs)  # the eager output, in the case's dtype
    except Exception as e:  # PyTorch's own verdict on the configuration
        return {lane: Prepared(lane, status=Status.INVALID.value, phase="eager",
                               message=f"{type(e).__name__}: {e}".splitlines()[0])
                for lane in lanes}
    programs: dict[str, _Program] = {}  # quantizer family -> exported program, refs, or error
    distinct: dict[str, _Distinct] = {}  # backend -> the programs its lanes lowered
    lanes_of = Counter(lane.backend for lane in lanes)
    prepared = {}
    for lane in sorted(lanes, key=lambda lane: (lane.backend, len(lane.fixes))):  # stock first
        backend = backends.get(lane.backend)
        family = backend.quantizer_family if case.quant else "float"
        if family not in programs:
            programs[family] = _program(case, module, inputs, float_ref, backend)
        prepared[lane] = _lowered(programs[family], backend, lane,
                                  distinct.setdefault(lane.backend,
                                                      _Distinct(watch=lanes_of[lane.backend] > 1)))
    shared_s = time.perf_counter() - t0 - sum(p.lower_time_s or 0 for p in prepared.values())
    for p in prepared.values():  # the case's shared seconds, split over its lanes
        p.prepare_share_s = round(shared_s / len(prepared), 3)
    return {lane: prepared[lane] for lane in lanes}


@dataclass
class _Distinct:
    """One backend's lowerings of one case: the edge program before any fix pass (from the
    first lowering that got that far) and, per program identity, the lane lowered with it."""
    watch: bool = True  # False: the backend has one lane here, nothing to compare it with
    base: object = None
    lowered: dict = field(default_factory=dict)  # identity -> Prepared
    stock_fixed: dict | None = None  # the sizes the stock lane's lowering fixed (ExecuTorch's)


@dataclass
class _Program:
    """What every lane of one quantizer family lowers: the exported program (or the error of
    the stage that failed), its references and the output scale."""
    refs: References
    exported: object = None
    status: str | None = None
    phase: str | None = None
    message: str = ""
    traceback: str = ""
    out_scale: float | None = None
    quantize_time_s: float | None = None
    export: object = None  # () -> a fresh export of the same module and inputs
    dynamic: bool = False  # the case exports with Dims: each lane lowers its own export


def specialized_sizes(exported) -> dict[str, int]:
    """The size symbols of ``exported`` that its ShapeEnv has fixed to a number (``s0 = 2``).
    Every deep copy of a program shares that ShapeEnv: a lowering that reads a symbolic size
    with ``int()`` made the program static for every lane lowered after it (nightly F-384df924:
    XNNPACK cells 'Propagating input shapes failed' at every batch but the export's, after a
    Vulkan fix lane), hence one export per lane of a dynamic program, and this check."""
    from torch._subclasses.fake_tensor import FakeTensor

    for node in exported.graph_module.graph.nodes:
        value = node.meta.get("val")
        if node.op == "placeholder" and isinstance(value, FakeTensor) and \
                value.fake_mode.shape_env is not None:
            return {str(k): int(v) for k, v in value.fake_mode.shape_env.replacements.items()
                    if getattr(v, "is_number", False)}
    return {}


def newly_fixed(exported, before: dict) -> dict[str, int]:
    """The sizes of ``exported`` fixed to a number since ``before`` (``specialized_sizes``)."""
    return {k: v for k, v in specialized_sizes(exported).items() if k not in before}


def _fixed_sizes(out: Prepared, fixed: dict) -> Prepared:
    """A lane whose fix passes fixed a dynamic size the stock lowering kept symbolic (int() of
    a SymInt, a shape compared): its program is static, not the case's; a LOWER_ERROR of our
    setup naming the sizes. (Sizes the stock lowering fixes too are ExecuTorch's: the stock
    program's, and every lane's cells show what that does.)"""
    sizes = ", ".join(f"{k} = {v}" for k, v in sorted(fixed.items()))
    out.status, out.phase, out.traceback = Status.LOWER_ERROR.value, "lower", ""
    out.message = (f"SetupError: this lane's fixes fixed the program's dynamic size {sizes}, "
                   f"which the stock lowering keeps symbolic: its program is static")
    return out


def _program(case: ConvCase, module, inputs: tuple, float_ref, backend) -> _Program:
    """Quantize (if the case asks for it) and export."""
    refs = References(inputs=inputs, ref=float_ref)
    if float_ref.dtype != torch.float32:  # fp16/bf16: judged against the upcast reference
        refs.ref, refs.eager_ref = upcast_reference(module, inputs, float_ref.dtype), float_ref
    if not case.quant:  # every float cell is judged against its error bound (compare.py)
        refs.bound = error_bound(case, module, inputs)
    program = _Program(refs=refs)
    program_module = module
    try:
        program.phase = "quantize"
        if case.quant:
            program_module, program.quantize_time_s = quantize(case, module, inputs, backend)
            with torch.no_grad():
                refs.ref = program_module(*inputs)
            refs.float_ref = float_ref
            qparams = output_qparams(program_module)
            program.out_scale = qparams[0] if qparams else None
        program.phase = "export"
        refs.sizes = sized_references(case, module, program_module)  # [] unless dynamic
        program.export = functools.partial(torch.export.export, program_module, inputs,
                                           dynamic_shapes=dynamic_shapes(case))
        program.exported, program.dynamic = program.export(), case.dynamic != "none"
    except Exception as e:  # the stage's own error is the finding, for every lane of it
        if machine_full(e):  # the machine's, not the case's: no verdict (the run stops)
            raise
        program.status, program.message = Status.LOWER_ERROR.value, first_line(e)
        program.traceback = traceback.format_exc(limit=-8)
    return program


def _lowered(program: _Program, backend, lane: Lane, distinct: _Distinct) -> Prepared:
    """One lane: the program another lane of the case lowered, where the lane's fix passes
    make it that program; else lower a private copy of the shared one, then the static checks."""
    out = Prepared(lane, status=program.status, phase=program.phase, message=program.message,
                   traceback=program.traceback, refs=program.refs, out_scale=program.out_scale,
                   quantize_time_s=program.quantize_time_s)
    if program.status is not None:
        return out
    if distinct.base is not None:
        t0 = time.perf_counter()
        before = specialized_sizes(distinct.base.exported_program())
        identity = probe_identity(distinct.base, backend, lane.fixes)
        if fixed := newly_fixed(distinct.base.exported_program(), before):
            distinct.base, distinct.lowered = None, {}
            return _fixed_sizes(out, fixed)
        if identity in distinct.lowered:
            return _reused(distinct.lowered[identity], lane, time.perf_counter() - t0)
    watch = Watch(keep_base=distinct.base is None) if distinct.watch else None
    # Lowering may rewrite the program it is given; every lane starts from the same one. A
    # dynamic program's lane starts from its own export: every deep copy shares one ShapeEnv,
    # which a lowering refines, so a second lowering of a copy can end otherwise than the
    # first (a dynamic circular pad: LOWER_ERROR for the first lane, RUNTIME_ERROR after it).
    exported = program.export() if program.dynamic else copy.deepcopy(program.exported)
    before = specialized_sizes(exported)
    try:
        out.phase = "lower"
        lowered = lower(exported, backend, list(lane.fixes), watch)
    except Exception as e:
        if machine_full(e):  # the machine's, not the lane's: no verdict (the run stops)
            raise
        out.status, out.message = Status.LOWER_ERROR.value, first_line(e)
        out.traceback = traceback.format_exc(limit=-8)
        return out
    finally:  # also a lowering that raised after partitioning began is a program (and verdict)
        if watch is not None:
            distinct.base = distinct.base or watch.base
            if watch.identity is not None and comparable(lane.fixes):
                distinct.lowered.setdefault(watch.identity, out)
    if not lane.fixes:  # ExecuTorch's own lowering may fix sizes: that is the stock program
        distinct.stock_fixed = newly_fixed(exported, before)
    elif distinct.stock_fixed is not None and \
            (ours := newly_fixed(exported, {**before, **distinct.stock_fixed})):
        distinct.base, distinct.lowered = None, {}  # not a program to compare, nor to reuse
        return _fixed_sizes(out, ours)
    out.phase, out.pte = "check", lowered.pte
    out.pte_size_kb = round(len(lowered.pte) / 1024, 2)
    out.lower_time_s = round(lowered.lower_time_s, 3)
    out.delegated_ops, out.undelegated_ops = lowered.delegated_ops, lowered.undelegated_ops
    # The contract check reads what went to the delegate: a partly delegated program runs
    # delegate code too, so it gets a prediction as well.
    out.contract_violations = backend.contract_violations(lowered.edge_manager)
    out.code_path = _code_path(backend, lowered.edge_manager)
    if not lowered.conv_delegated:
        outside = ", ".join(f"{k} x{v}" for k, v in sorted(lowered.undelegated_ops.items()))
        out.status = Status.NOT_DELEGATED.value
        out.message = f"outside the {backend.name} delegate: {outside or 'everything'}"
        return out
    if out.contract_violations:
        out.status = Status.CONTRACT_VIOLATION.value
        out.message = "; ".join(out.contract_violations)
    return out


def _code_path(backend, edge_manager) -> list[str]:
    """Coverage is an observation beside the verdict: a payload it cannot read is noted in
    the path, never a lowering failure."""
    try:
        return backend.code_path(edge_manager)
    except Exception as e:
        return [f"unreadable: {first_line(e)[:200]}"]


def _reused(source: Prepared, lane: Lane, seconds: float) -> Prepared:
    """``source``'s Prepared for ``lane``: the same program, references and static verdict."""
    label = f"+{source.lane.fixes_column}" if source.lane.fixes else "stock"
    return dataclasses.replace(
        source, lane=lane, reused_from=label, lower_time_s=round(seconds, 3), delegated_ops=dict(source.delegated_ops),
        undelegated_ops=dict(source.undelegated_ops),
        contract_violations=list(source.contract_violations), code_path=list(source.code_path))


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
