"""ExportedProgram -> lowered program (.pte bytes) + what ended up inside the delegate."""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from dataclasses import dataclass, field

from harness.stages import fixes as fix_registry
from harness.stages.backends import Backend
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


def lower(exported_program, backend: Backend, fix_names: list[str]) -> Lowered:
    from executorch.exir import to_edge_transform_and_lower

    chosen = [fix_registry.get(n) for n in fix_names]
    passes = [p for f in chosen for p in f.transform_passes()]
    t0 = time.perf_counter()
    with contextlib.ExitStack() as stack:
        stack.enter_context(backend.lowering_context())
        stack.enter_context(cia_ops_once())
        for f in chosen:
            stack.enter_context(f.patch())
        edge = to_edge_transform_and_lower(
            exported_program, partitioner=backend.partitioners(), transform_passes=passes or None)
        delegated, undelegated = op_counts(edge)  # before to_executorch adds memory planning
        pte = edge.to_executorch().buffer
    return Lowered(pte=pte, edge_manager=edge, delegated_ops=delegated,
                   undelegated_ops=undelegated, lower_time_s=time.perf_counter() - t0)
