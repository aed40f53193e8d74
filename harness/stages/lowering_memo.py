"""Compute once per process what ExecuTorch and torch.export recompute on every call.

Three places rebuild, on every call, something that does not change between calls:

1. Vulkan lowering (``vulkan_patterns_once``). Every Vulkan lowering asks each registered pattern for its example graphs twice (the
partitioner's ``get_all_fusable_subgraphs`` and ``FusePatternsPass``), and building them means
tracing and exporting small models (``patterns/rope_hf.py: get_hf_rope_graphs``, ``rope.py:
get_rope_graphs``): more than half of a warm conv lowering (benchmarks/bench.py --profile).
ExecuTorch meant to cache them, but in 1.5.1 the ``@lru_cache`` sits *above*
``@register_pattern_graph``, so the registry holds the undecorated function and the cache is
never consulted (a finding worth reporting upstream: swap the two decorators).

2. XNNPACK's quantizer (``quantizer_patterns_once``): ``prepare_pt2e`` annotates conv-bn[-relu]
   by ``torch.export``-ing eight small conv-bn patterns (1d/2d, transposed, relu in place or
   not) through torchao's ``_get_aten_graph_module_for_pattern``, every time: about half of a
   quantized cell's static stages.

3. torch.export's decomposition (``cia_ops_once``): ``run_decompositions`` collects every
   CompositeImplicitAutograd op of every op namespace, 5-9 times per lowering (~0.1 s each once
   executorch's namespaces are loaded). torch caches the ``aten`` part only, because another
   namespace may gain ops later; the memo is keyed on the namespaces and the number of
   registered ops and CIA kernels, so a new registration is a new key.

Scope: only while a context is active (``lower`` enters the first for the Vulkan lane and the
third for every lane, ``quantize`` the second); on exit the originals are back. Results are kept per process, so a
worker pays once. Vulkan's graphs are only matched against (SubgraphMatcher does not mutate its
pattern); the quantizer's matcher rewrites its pattern's outputs, so that memo hands out a deep
copy. tests/test_lowering_memo.py checks the .pte bytes are identical with and without both, for
cases of every kind.
"""

from __future__ import annotations

import contextlib
import copy
import threading

_GRAPHS: dict = {}  # original get_graphs_fn -> the list it returned, once per process
_LOCK = threading.RLock()  # re-entrant: a memoized builder may export, which asks for CIA ops
enabled = True  # off: every lowering rebuilds the graphs, as stock ExecuTorch does (bench, tests)


def _memoized(fn):
    def get_graphs():
        with _LOCK:
            if fn not in _GRAPHS:
                _GRAPHS[fn] = fn()
            return _GRAPHS[fn]

    get_graphs.__wrapped__ = fn
    return get_graphs


@contextlib.contextmanager
def vulkan_patterns_once():
    if not enabled:
        yield
        return
    from executorch.backends.vulkan.patterns import fusable_patterns

    originals = {name: entry.get_graphs_fn for name, entry in fusable_patterns.items()
                 if entry.get_graphs_fn is not None}
    for name, fn in originals.items():
        fusable_patterns[name].get_graphs_fn = _memoized(fn)
    try:
        yield
    finally:
        for name, fn in originals.items():
            fusable_patterns[name].get_graphs_fn = fn


def _pattern_key(pattern, example_inputs: tuple, is_cuda: bool, kwargs: dict):
    """What a conv-bn pattern's graph depends on: its code, the values it closes over (conv_fn,
    has_relu, relu_is_inplace) and the example inputs' shapes and dtypes (not their random
    values). None when something in it is not hashable: then no memo."""
    fn = getattr(pattern, "fn", pattern)
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    try:
        key = (code, tuple(c.cell_contents for c in fn.__closure__ or ()),
               tuple((tuple(x.shape), x.dtype) if hasattr(x, "shape") else x
                     for x in example_inputs), is_cuda, tuple(sorted(kwargs.items())))
        hash(key)
    except (TypeError, ValueError):
        return None
    return key


@contextlib.contextmanager
def quantizer_patterns_once():
    if not enabled:
        yield
        return
    from executorch.backends.xnnpack.quantizer import xnnpack_quantizer_utils as utils

    original = utils._get_aten_graph_module_for_pattern

    def get_graph(pattern, example_inputs, is_cuda=False, **kwargs):
        key = _pattern_key(pattern, example_inputs, is_cuda, kwargs)
        if key is None:
            return original(pattern, example_inputs, is_cuda, **kwargs)
        with _LOCK:
            if key not in _GRAPHS:
                _GRAPHS[key] = original(pattern, example_inputs, is_cuda, **kwargs)
            return copy.deepcopy(_GRAPHS[key])

    utils._get_aten_graph_module_for_pattern = get_graph
    try:
        yield
    finally:
        utils._get_aten_graph_module_for_pattern = original


@contextlib.contextmanager
def cia_ops_once():
    if not enabled:
        yield
        return
    import torch
    import torch.export.decomp_utils as decomp_utils
    import torch.export.exported_program as exported_program

    original = exported_program._collect_all_valid_cia_ops
    cia = torch._C.DispatchKey.CompositeImplicitAutograd.name

    def collect():
        key = ("cia", tuple(torch.ops._dir), len(torch._C._dispatch_get_all_op_names()),
               len(torch._C._dispatch_get_registrations_for_dispatch_key(cia)))
        with _LOCK:
            if key not in _GRAPHS:
                _GRAPHS[key] = frozenset(original())
            return set(_GRAPHS[key])  # callers get their own set, as from the original

    patched = [m for m in (exported_program, decomp_utils)
               if getattr(m, "_collect_all_valid_cia_ops", None) is original]
    for m in patched:
        m._collect_all_valid_cia_ops = collect
    try:
        yield
    finally:
        for m in patched:
            m._collect_all_valid_cia_ops = original


@contextlib.contextmanager
def disabled():
    """Stock behaviour for the duration (the benchmark's "before", the .pte identity test)."""
    global enabled
    saved, enabled = enabled, False
    try:
        yield
    finally:
        enabled = saved


def built() -> int:
    """How many pattern graphs (or lists) this process has memoized (tests, the benchmark)."""
    return len(_GRAPHS)
