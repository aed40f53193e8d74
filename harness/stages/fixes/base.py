"""What a fix provides. A fix hooks the pipeline at one of two depths:

- ``transform_passes``: edge-dialect graph passes run by ``to_edge_transform_and_lower`` before
  partitioning (where an upstream fix would be a pass);
- ``patch``: a context manager active only while one cell is lowered, for a fix that must act
  inside the delegate's own graph builder. It must restore everything it touches on exit, so
  that nothing leaks into the next cell in the same worker.
"""

from __future__ import annotations

import contextlib

import torch
from torch.fx.passes.infra.pass_base import PassResult


class Fix:
    name: str = ""
    backends: tuple[str, ...] = ()
    summary: str = ""
    bug: str = ""  # the delegate bug it addresses (one line; upstream issue where there is one)
    verified: str = ""  # where it was shown stock-fail -> fixed-pass (corpus file, devices)
    # A runtime fix: the name of a source patch (harness/runtimes/patches/NAME.diff); cells whose
    # fix set names it execute on the plug-in built with it. None: a graph fix.
    runtime_patch: str | None = None
    # Fixes whose passes must run before this one's when a lane has both (a lane's fix set is
    # a sorted name tuple; ``harness.stages.fixes.ordered`` gives the order the passes run in).
    runs_after: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        return "runtime" if self.runtime_patch else "graph"

    def unavailable(self) -> str | None:
        """Why this fix cannot run with the installed ExecuTorch (one line), or None: it can."""
        return None

    def transform_passes(self) -> list:
        return []

    def patch(self):
        return contextlib.nullcontext()

    def patch_acts_on(self, edge_manager) -> bool | None:
        """Whether ``patch`` can change how this program (an EdgeProgramManager, the lane's fix
        passes applied: what the partitioner is handed) lowers; None: cannot be told, so the
        lane is lowered. False for a fix without a patch. A fix whose patch is a partitioner
        rule (``vk_util.vulkan_partitioner_declines``) says whether any node of the program is
        one its rule declines: where none is, the lowering is byte for byte the one without
        the patch (tests/test_lowering_memo.py), so the lane may reuse that program."""
        return None if type(self).patch is not Fix.patch else False


def is_call(node, name: str) -> bool:
    """``node`` is an FX call of an op whose qualified name contains ``name``."""
    return isinstance(node, torch.fx.Node) and node.op == "call_function" and name in str(node.target)


def any_node(edge_manager, predicate) -> bool:
    """Whether ``predicate`` holds for some node of some method of an EdgeProgramManager."""
    return any(predicate(node) for method in edge_manager.methods
               for node in edge_manager.exported_program(method).graph.nodes)


def pass_result(graph_module, modified: bool) -> PassResult:
    """A graph pass's ending: lint and recompile the module when the pass changed it."""
    if modified:
        graph_module.graph.lint()
        graph_module.recompile()
    return PassResult(graph_module, modified)


def val(arg):
    return arg.meta["val"] if isinstance(arg, torch.fx.Node) else arg


def fake_val(target, args, kwargs=None):
    """``target`` run on the fake values of its arguments (the node's new ``meta["val"]``)."""
    vals = [[val(a) for a in x] if isinstance(x, (list, tuple)) else val(x) for x in args]
    flat = [v for x in vals for v in (x if isinstance(x, list) else [x])]
    fake = next(v for v in flat if isinstance(v, torch.Tensor))
    with fake.fake_mode:
        return target(*vals, **(kwargs or {}))


def set_conv_args(conv, args) -> None:
    """A conv's rewritten arguments, its fake value recomputed: the rewrite must not move its
    output (``check_same_shape``)."""
    conv.args = tuple(args)
    new_val = fake_val(conv.target, conv.args)
    check_same_shape(conv, new_val)
    conv.meta["val"] = new_val


def check_same_shape(conv, new_val) -> None:
    """A rewrite must not move the conv's output: its new fake value has the old shape."""
    if tuple(new_val.shape) != tuple(conv.meta["val"].shape):
        raise AssertionError(f"{conv.name}: rewritten shape {tuple(new_val.shape)} != "
                             f"{tuple(conv.meta['val'].shape)}")


def static_sizes(node) -> bool:
    """Whether every size of the node's fake value is a plain int. A dynamic program's sizes are
    SymInts, and ``int()`` of one is a guard that specializes the symbol in the program's
    ShapeEnv (``s0`` replaced by the export size): the lowered program turns static, its output
    sized for the example batch, and the runtime aborts at every other size ("Attempted to
    resize a static tensor", issue 39: a dynamic-batch Conv1d, PASS stock, CRASH with
    vk-conv1d-pw-stride-pad, which only read its batch). The ShapeEnv is shared by every deep
    copy of the exported program, so the specialization also reached the lanes the harness
    lowered after it in that process. The graph fixes are verified on static programs only and
    leave a conv with a symbolic size alone (xnnpack-tconv-output-padding's shape check fixed
    a dynamic transposed conv's sizes too, issue 39)."""
    v = val(node)
    return isinstance(v, torch.Tensor) and all(type(s) is int for s in v.shape)
