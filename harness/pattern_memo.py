"""Build ExecuTorch's Vulkan fusable-pattern graphs once per process instead of per lowering.

Why: every Vulkan lowering asks each registered pattern for its example graphs twice (the
partitioner's ``get_all_fusable_subgraphs`` and ``FusePatternsPass``), and building them means
tracing and exporting small models (``patterns/rope_hf.py: get_hf_rope_graphs``, ``rope.py:
get_rope_graphs``): more than half of a warm conv lowering (benchmarks/bench.py --profile).
ExecuTorch meant to cache them, but in 1.5.1 the ``@lru_cache`` sits *above*
``@register_pattern_graph``, so the registry holds the undecorated function and the cache is
never consulted (a finding worth reporting upstream: swap the two decorators).

Scope: only while the context is active (``lower`` enters it for the Vulkan lane); on exit the
registry gets its own functions back. The graphs are kept per process, keyed by the original
function, so a worker pays for them once. They are only matched against (SubgraphMatcher does
not mutate its pattern), and tests/test_pattern_memo.py checks that the .pte bytes are
identical with and without the memo for cases of every kind.
"""

from __future__ import annotations

import contextlib
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
    """How many pattern builders this process has memoized (for tests and the benchmark)."""
    return len(_GRAPHS)
