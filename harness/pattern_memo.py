"""Build the pattern graphs ExecuTorch matches against once per process, not once per call.

Two places rebuild, on every call, small example graphs that never change:

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

Scope: only while a context is active (``lower`` enters the first for the Vulkan lane,
``quantize`` the second); on exit the originals are back. Results are kept per process, so a
worker pays once. Vulkan's graphs are only matched against (SubgraphMatcher does not mutate its
pattern); the quantizer's matcher rewrites its pattern's outputs, so that memo hands out a deep
copy. tests/test_pattern_memo.py checks the .pte bytes are identical with and without both, for
cases of every kind.
"""

from __future__ import annotations

import contextlib
import copy
import threading

_GRAPHS: dict = {}  # original get_graphs_fn -> the list it returned, once per process
_LOCK = threading.Lock()
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
