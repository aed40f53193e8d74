"""The package's import graph in numbers: modules per folder, floors (the longest chain of
imports, after folding circles), circles (groups of modules that import each other, lazily or
not) and arrows back up (imports inside a circle: whichever way the floors are drawn, one of
them points up). Usage: python benchmarks/import_graph.py [PACKAGE_DIR] (default harness/)."""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path


def graph(package: Path) -> dict[str, set[str]]:
    root = package.name
    edges = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package).with_suffix("").parts
        name = ".".join(p for p in (root, *parts) if p != "__init__")
        is_pkg = path.name == "__init__.py"
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:  # relative: resolve against this module's package
                    base = name.split(".") if is_pkg else name.split(".")[:-1]
                    base = base[: len(base) - node.level + 1]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                found |= {mod} | {f"{mod}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
        edges[name] = found
    modules = set(edges)
    return {m: {t for t in ts if t in modules and t != m and not m.startswith(t + ".")}
            for m, ts in edges.items()}


def sccs(edges: dict[str, set[str]]) -> list[set[str]]:
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            out.append(comp)

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def numbers(package: Path) -> dict:
    edges = graph(package)
    comps = sccs(edges)
    of = {m: i for i, c in enumerate(comps) for m in c}
    dag = {i: {of[t] for m in c for t in edges[m]} - {i} for i, c in enumerate(comps)}
    depth: dict[int, int] = {}

    def floor(i):
        if i not in depth:
            depth[i] = 1 + max((floor(j) for j in dag[i]), default=0)
        return depth[i]

    circles = [sorted(c) for c in comps if len(c) > 1]
    back = sum(1 for c in comps if len(c) > 1 for m in c for t in edges[m] if t in c)
    folders = Counter(m.split(".")[1] if m.count(".") >= 2 or (package / m.split(".")[-1]).is_dir()
                      else "(top)" for m in edges)
    return {"modules": len(edges), "floors": max(map(floor, dag), default=0),
            "circles": circles, "arrows_back_up": back, "rooms_per_folder": dict(folders)}


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "harness").resolve()
    result = numbers(target)
    for k, v in result.items():
        print(f"{k}: {v}")
