"""The house rules the folder layout stands for, checked on the code itself: the cache digest
covers every module that decides a cached outcome, and imports only go down the data flow."""

import ast
import shutil
from pathlib import Path

import pytest

from harness import versions

PACKAGE = Path(versions.__file__).resolve().parent


def test_the_digest_is_the_import_closure_of_the_stages_folder():
    stages = sorted((PACKAGE / "stages").rglob("*.py"))
    digested = set(versions.digested_sources())
    assert stages and set(stages) <= digested  # every stage module, found by walking
    # what the stages import, found by their imports: the case vocabulary and the runtimes
    assert {PACKAGE / "spec.py", PACKAGE / "status.py", PACKAGE / "lane.py",
            PACKAGE / "runtimes" / "load.py"} <= digested
    outside = {p.relative_to(PACKAGE).parts[0] for p in digested}
    assert not outside & {"run", "results", "cli", "generation"}  # never imported by a lowering


def _copy(tmp_path) -> Path:
    copy = tmp_path / "harness"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def test_editing_any_module_of_the_closure_moves_the_digest_and_none_outside_does(tmp_path):
    copy = _copy(tmp_path)
    before = versions.digest_of(copy)
    assert before == versions.pipeline_digest()  # the copy digests like the real package
    inside = {p.relative_to(PACKAGE) for p in versions.digested_sources()}
    every = {p.relative_to(PACKAGE) for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts}
    unmoved, moved = [], []  # a digested module whose edit keeps it; an outside one moving it
    for rel in sorted(every):
        text = (copy / rel).read_text()
        (copy / rel).write_text(text + "\n# a changed rule\n")
        same = versions.digest_of(copy) == before
        if rel in inside and same:
            unmoved.append(rel)
        if rel not in inside and not same:
            moved.append(rel)
        (copy / rel).write_text(text)
    assert unmoved == [] and moved == []
    assert len(inside) > 20 and len(every - inside) > 20
    assert versions.digest_of(copy) == before


@pytest.mark.parametrize("module", ["stages/cell.py", "stages/prepare.py", "stages/lower.py",
                                    "stages/backends/vulkan_contract.py", "spec.py",
                                    "stages/fixes/vulkan_conv_padding.py"])
def test_editing_a_module_that_decides_a_cached_outcome_changes_the_digest(module, tmp_path):
    copy = _copy(tmp_path)
    before = versions.digest_of(copy)
    with open(copy / module, "a") as fh:
        fh.write("\n# a changed rule\n")
    assert versions.digest_of(copy) != before


def test_a_module_newly_imported_by_a_stage_joins_the_digest(tmp_path):
    """An import added to a stage module pulls its target (and what it imports) into the key."""
    copy = _copy(tmp_path)
    assert copy / "results" / "pictures.py" not in versions.digested_sources(copy)
    with open(copy / "stages" / "compare.py", "a") as fh:
        fh.write("\nfrom harness.results import pictures  # noqa\n")
    assert copy / "results" / "pictures.py" in versions.digested_sources(copy)


def test_a_new_stage_module_changes_the_digest(tmp_path):
    copy = tmp_path / "harness"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = versions.digest_of(copy)
    (copy / "stages" / "fixes" / "new_fix.py").write_text("NAME = 'new'\n")
    assert versions.digest_of(copy) != before


def imports() -> dict[str, set[str]]:
    """module (dotted, under harness) -> the harness modules it imports (top level or not)."""
    graph = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        name = ".".join(p for p in ("harness", *parts) if p != "__init__")
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("harness"):
                found |= {f"{node.module}.{a.name}" for a in node.names} | {node.module}
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.startswith("harness")}
        graph[name] = found
    modules = set(graph)
    return {m: {t for t in targets if t in modules and t != m} for m, targets in graph.items()}


FLOORS = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}


def floor(module: str) -> str:
    parts = module.split(".")
    if module == "harness.__main__":  # the entry point stands on the command line's floor
        return "cli"
    return parts[1] if len(parts) > 1 and parts[1] in FLOORS else "vocabulary"


# What each floor may import (besides itself): the data flow, downwards only.
ALLOWED = {
    "vocabulary": {"vocabulary"},
    "runtimes": {"vocabulary", "runtimes"},
    "generation": {"vocabulary", "generation", "stages"},  # from_model builds modules to check cases
    "stages": {"vocabulary", "stages", "runtimes"},
    "results": {"vocabulary", "results", "stages", "runtimes"},
    "run": {"vocabulary", "run", "stages", "runtimes", "results", "generation"},
    "cli": {"vocabulary", "cli", "run", "stages", "runtimes", "results", "generation"},
}


def test_imports_go_down_the_data_flow():
    back = [f"{m} -> {t}" for m, targets in imports().items() for t in targets
            if floor(t) not in ALLOWED[floor(m)] | {floor(m)}]
    assert not back, "\n".join(sorted(back))


def test_results_never_import_run_machinery():
    graph = imports()
    assert not [(m, t) for m, ts in graph.items() if floor(m) == "results"
                for t in ts if floor(t) == "run"]


def test_no_import_circles():
    graph = imports()
    # package __init__ files re-export their children; an edge to a parent package is not a cycle
    edges = {m: {t for t in ts if not m.startswith(t + ".")} for m, ts in graph.items()}
    state: dict[str, int] = {}
    cycles = []

    def visit(m, stack):
        state[m] = 1
        for t in edges.get(m, ()):
            if state.get(t) == 1:
                cycles.append(" -> ".join(stack[stack.index(t):] + [t]))
            elif t not in state:
                visit(t, stack + [t])
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m, [m])
    assert not cycles, "\n".join(cycles)


def test_a_lane_with_every_fix_has_a_repro_name_any_file_system_accepts(tmp_path):
    from harness.runfolder import RunFolder, repro_name
    from harness.stages import fixes

    case_id = "conv3d_i1o1_k3_s3_p1_mreplicate_d2L_g1_b0_x1x1x5x3x5_q8c-5b1b6f95"
    every = ",".join(fixes.names()) + "," + ",".join(f"vk-patch-{i}" for i in range(12))
    name = repro_name(case_id, "vulkan@NVIDIA H200", every)
    assert len(name.encode()) <= 255 and name.startswith(case_id) and name.endswith(".py")
    # distinct lanes keep distinct names; a short lane keeps its readable name
    assert repro_name(case_id, "vulkan", every + ",x") != name
    assert repro_name(case_id, "xnnpack", "xnnpack-conv1d-same-even") == \
        f"{case_id}__xnnpack+xnnpack-conv1d-same-even.py"
    path = RunFolder(tmp_path).repro_path(case_id, "vulkan", every)
    path.parent.mkdir()
    path.write_text("# ok")
    assert path.read_text() == "# ok"
