"""Runtime source patches (harness/runtimes/patches/*.diff, fixes for Vulkan runtime bugs the
harness found): each applies to the source trees it claims, exactly as ``git apply`` would; a
malformed or non-applying patch stops a build with one line naming the patch, the tree and the
first failing hunk; a patch's "Needs:" brings the patches it needs into its set; a patch set is
its own cache entry; and (slow) a patched plug-in runs the seed bug's minimal case to PASS."""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from harness.runtimes import RuntimeBuildError, patching, vulkan
from harness.runtimes.source import BESIDE_CHECKOUT, ENV, _from_tarball
from harness.runtimes.wheel import installed as installed_wheel

SHARED = Path(os.environ.get(ENV) or BESIDE_CHECKOUT)
TARBALLS = sorted(SHARED.glob("executorch-src-*.tar.gz")) if SHARED.is_dir() else []
PATCHES = patching.list_patches()
INT_LISTS = "vk-conv-int-list-broadcast"
IO_DIM_ORDER = "vk-io-dim-order"
WITH_NEEDS = [INT_LISTS, IO_DIM_ORDER]  # what asking for INT_LISTS applies (its Needs:)


def needs_sources():
    if not TARBALLS:
        pytest.skip(f"no ExecuTorch source tarballs in {SHARED} (set ${ENV})")


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    """Each source tarball extracted once: {tarball name: (commit, tree)}."""
    needs_sources()
    out = {}
    for t in TARBALLS:
        root = tmp_path_factory.mktemp(t.name.split(".")[0])
        with tarfile.open(t) as tf:
            tf.extractall(root, filter="data")
        out[t.name] = ((root / "ET_COMMIT").read_text().strip(), root)
    return out


def copy_of(tree: Path, dest: Path) -> Path:
    shutil.copytree(tree, dest)
    return dest


def harness(*args, timeout=900):
    return subprocess.run([sys.executable, "-m", "harness", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)


def test_every_patch_says_what_it_fixes_and_where():
    assert {p.name for p in PATCHES} >= {INT_LISTS, "vk-conv2d-dw-edge-filter-index",
                                         "vk-conv2d-dw-sned-generic",
                                         "vk-conv2d-grouped-unaligned-channels",
                                         "vk-conv2d-grouped-pointwise", "vk-q8ta-conv-batch-guard",
                                         IO_DIM_ORDER}
    known = {p.name: p for p in PATCHES}
    for p in PATCHES:
        first = p.header.splitlines()[0]
        assert first.startswith(f"{p.name}: ") and len(p.summary) > 20, first
        assert "Symptom" in p.header and "Cause:" in p.header, p.name  # what, and why so
        assert p.trees, f"{p.name}: no 'Trees:' line naming the commits it applies to"
        for commit in p.variants:
            assert p.claims(commit), f"{p.name}: a variant for a tree it does not claim"
        for needed in p.needs:  # a patch it needs exists and goes wherever it goes
            assert needed in known, f"{p.name}: needs unknown patch {needed!r}"
            assert set(p.trees) <= set(known[needed].trees), (p.name, needed)


def test_the_int_list_broadcast_needs_the_io_dim_order_fix():
    """Without vk-io-dim-order the broadcast turns a loud make_ivec2 failure into silent wrong
    values on channels-last tensors: asking for it applies both, in name order, and the set is
    the same cache entry however it was asked for."""
    broadcast = next(p for p in PATCHES if p.name == INT_LISTS)
    assert broadcast.needs == (IO_DIM_ORDER,)
    assert "Needs: vk-io-dim-order" in broadcast.header
    assert [p.name for p in patching.resolve([INT_LISTS])] == WITH_NEEDS
    assert [p.name for p in patching.resolve([IO_DIM_ORDER, INT_LISTS, INT_LISTS])] == WITH_NEEDS
    assert [p.name for p in patching.resolve([IO_DIM_ORDER])] == [IO_DIM_ORDER]
    assert patching.resolve([]) == ()


def _patch_dir(tmp_path, needs: dict) -> Path:
    """A patch folder of one-hunk patches, NAME -> the names its Needs: line gives."""
    folder = tmp_path / "patches"
    folder.mkdir()
    for name, wanted in needs.items():
        line = f"Needs: {', '.join(wanted)} (why).\n\n" if wanted else ""
        (folder / f"{name}.diff").write_text(
            f"{name}: a test patch\n\nSymptom: x\n\nCause: y\n\n{line}Trees: main cff6f4dd32\n"
            f"--- a/{name}.txt\n+++ b/{name}.txt\n@@ -1 +1 @@\n-a\n+b\n")
    return folder


def test_resolve_takes_needs_transitively_in_name_order(tmp_path):
    folder = _patch_dir(tmp_path, {"c-top": ["b-mid"], "b-mid": ["a-base", "d-side."],
                                   "a-base": [], "d-side": [], "e-alone": []})
    found = {p.name: p.needs for p in patching.list_patches(folder)}
    # "Needs: a-base, d-side. (why)": the sentence's full stop is not part of the name
    assert found["b-mid"] == ("a-base", "d-side") and found["a-base"] == ()
    assert [p.name for p in patching.resolve(["c-top"], folder)] == [
        "a-base", "b-mid", "c-top", "d-side"]
    assert [p.name for p in patching.resolve(["e-alone", "a-base"], folder)] == ["a-base", "e-alone"]


@pytest.mark.parametrize("needs, asked, said", [
    ({"a-x": ["b-y"], "b-y": ["a-x"]}, "a-x",
     "patch 'b-y' needs 'a-x': a cycle of needs (a-x -> b-y -> a-x)"),
    ({"a-x": ["a-x"]}, "a-x", "patch 'a-x' needs 'a-x': a cycle of needs (a-x -> a-x)"),
    ({"a-x": ["b-y"], "b-y": ["no-such"]}, "a-x",
     "patch 'b-y' needs unknown patch 'no-such' (available: a-x, b-y)"),
    ({"a-x": []}, "no-such", "unknown patch 'no-such' (available: a-x)"),
])
def test_a_cycle_or_an_unknown_need_is_one_line(tmp_path, needs, asked, said):
    folder = _patch_dir(tmp_path, needs)
    with pytest.raises(RuntimeBuildError) as e:
        patching.resolve([asked], folder)
    assert str(e.value) == said


@pytest.mark.parametrize("patch", PATCHES, ids=lambda p: p.name)
def test_patch_applies_to_every_tree_it_claims_as_git_apply_would(patch, trees, tmp_path):
    main = [name for name in trees if "-main-" in name]
    assert main and patch.claims(trees[main[0]][0]), "every patch must apply to the main tree"
    claimed = [name for name, (commit, _) in trees.items() if patch.claims(commit)]
    for name in claimed:
        commit, tree = trees[name]
        ours = copy_of(tree, tmp_path / name / "ours")
        record = patching.apply(patch, ours, commit, name)
        assert record["files"] and record["sha256"] and record["name"] == patch.name
        if shutil.which("git"):  # the same bytes as git's own applier (outside any repository)
            theirs = copy_of(tree, tmp_path / name / "git")
            done = subprocess.run(["git", "apply", str(patch.file_for(commit))], cwd=theirs,
                                  capture_output=True, text=True,
                                  env=dict(os.environ, GIT_CEILING_DIRECTORIES=str(tmp_path)))
            assert done.returncode == 0, done.stderr
            for f in record["files"]:
                assert (ours / f).read_bytes() == (theirs / f).read_bytes(), f
                assert (ours / f).read_bytes() != (tree / f).read_bytes(), f"{f}: unchanged"


def test_all_patches_apply_together_to_each_claimed_tree(trees, tmp_path):
    assert trees, "no source tree to patch"
    for name, (commit, tree) in trees.items():
        ours = copy_of(tree, tmp_path / name)
        chosen = patching.resolve([p.name for p in PATCHES if p.claims(commit)])
        assert chosen, f"{name}: no patch claims {commit}"
        touched = set()
        for p in chosen:  # each applies on top of the others and changes what it says
            record = patching.apply(p, ours, commit, name)
            assert record["name"] == p.name and record["files"] and record["sha256"], record
            touched |= set(record["files"])
        changed = [f for f in touched if (ours / f).read_bytes() != (tree / f).read_bytes()]
        assert sorted(changed) == sorted(touched), set(touched) - set(changed)


def test_a_tree_without_a_variant_names_the_missing_file_and_hunk(trees, tmp_path):
    """The int-list patch touches Conv2dGemm.cpp, which v1.3.1 does not have: there its
    variant is used; the main diff itself fails with one line naming file and hunk."""
    old = [name for name in trees if "v1.3.1" in name]
    if not old:
        pytest.skip("no v1.3.1 tarball")
    commit, tree = trees[old[0]]
    patch = next(p for p in PATCHES if p.name == INT_LISTS)
    assert patch.file_for(commit).name == f"{INT_LISTS}@{commit[:12]}.diff"
    target = copy_of(tree, tmp_path / "t")
    before = (target / "backends/vulkan/runtime/graph/ops/impl/Conv2dPW.cpp").read_bytes()
    with pytest.raises(RuntimeBuildError) as e:
        patching.apply_text(patch.path.read_text(), target, f"patch {INT_LISTS} on {old[0]}")
    said = str(e.value)
    assert "\n" not in said and old[0] in said and INT_LISTS in said
    assert "Conv2dGemm.cpp: no such file in this source tree (first hunk @@ -" in said
    # all or nothing: the files before the failing one were not written
    assert (target / "backends/vulkan/runtime/graph/ops/impl/Conv2dPW.cpp").read_bytes() == before


BAD_CONTEXT = """bad-context: a hunk whose context is not in the file

--- a/backends/vulkan/runtime/utils/VecUtils.h
+++ b/backends/vulkan/runtime/utils/VecUtils.h
@@ -364,3 +364,3 @@
 inline ivec2 make_ivec2(
-    const std::vector<int64_t>& no_such_line,
+    const std::vector<int64_t>& ints,
     bool reverse = false) {
"""


@pytest.mark.parametrize("text, said", [
    ("just some words\nno diff here\n", "malformed patch: no '---'/'+++' file header"),
    ("x\n--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,3 @@\n a\n-b\n", "ends early"),
    ("x\n--- a/f.txt\n+++ b/f.txt\n@@ -one +1 @@\n", "malformed hunk header"),
    ("x\n--- a/../../etc/passwd\n+++ b/../../etc/passwd\n@@ -1 +1 @@\n-a\n+b\n", "bad path"),
])
def test_a_malformed_patch_is_one_line(text, said, tmp_path):
    with pytest.raises(RuntimeBuildError) as e:
        patching.apply_text(text, tmp_path, "patch x does not apply to tree")
    assert "\n" not in str(e.value) and said in str(e.value), str(e.value)
    assert str(e.value).startswith("patch x does not apply to tree: ")


def test_a_patch_that_does_not_apply_stops_the_build_before_anything_is_built(
        tmp_path, monkeypatch):
    """vulkan.build with a patch whose hunk does not match: RuntimeBuildError, one line naming
    the patch, the source tree and the hunk; no build tree, no plug-in, no staged source."""
    needs_sources()
    patches = tmp_path / "patches"
    patches.mkdir()
    (patches / "bad-context.diff").write_text(BAD_CONTEXT)
    monkeypatch.setattr(patching, "PATCH_DIR", patches)
    tarball = next(t for t in TARBALLS if "-main-" in t.name)
    cache = tmp_path / "cache"
    with pytest.raises(RuntimeBuildError) as e:
        vulkan.build(str(tarball), cache=str(cache), patches=("bad-context",), log=lambda _: None)
    said = str(e.value)
    assert "\n" not in said
    assert said.startswith(f"patch bad-context (bad-context.diff) does not apply to {tarball.name} "
                           f"(commit {_from_tarball(tarball).commit[:12]}): ")
    assert "backends/vulkan/runtime/utils/VecUtils.h: hunk #1 @@ -364,3 +364,3 @@ does not " \
           "match" in said
    left = [p.name for p in (cache / "runtimes" / "build").iterdir()]
    assert left == [], left  # no tree, no staged source
    assert not list((cache / "runtimes").glob("*/manifest.json"))
    assert not (cache / "toolchains").exists()  # failed before the toolchain step


def test_unknown_patch_name_is_one_line_exit_2(tmp_path):
    proc = harness("runtime", "build", "vulkan", "--patch", "no-such-fix", "--cache",
                   tmp_path / "cache")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("convconf: error: runtime build: unknown patch 'no-such-fix' "
                                  f"(available: {', '.join(p.name for p in PATCHES)})")
    assert not (tmp_path / "cache").exists()


def test_runtime_patches_lists_names_and_summaries():
    proc = harness("runtime", "patches")
    assert proc.returncode == 0, proc.stderr
    for p in PATCHES:
        assert f"{p.name}: {p.summary}" in proc.stdout


def test_cache_key_and_folder_differ_per_patch_set():
    needs_sources()
    wheel = installed_wheel()
    src = _from_tarball(next(t for t in TARBALLS if "-main-" in t.name))
    names = [p.name for p in PATCHES]

    def key(*chosen):
        applied = [p.applied(src.commit) for p in patching.resolve(chosen)]
        return vulkan._inputs_key(wheel, src, applied), vulkan.dest_name(wheel, src, applied)

    sets = [(), (names[0],), (names[1],), (names[0], names[1]), tuple(names)]
    keys = [key(*s) for s in sets]
    assert len({k for k, _ in keys}) == len(sets) and len({d for _, d in keys}) == len(sets)
    stock = f"{wheel.version}-{src.commit[:12]}"
    assert keys[0] == (vulkan._inputs_key(wheel, src), stock)  # stock unchanged by the feature
    for _, dest in keys[1:]:
        assert dest.startswith(stock + "-p") and len(dest) == len(stock) + 10
    assert key(names[1], names[0], names[1]) == keys[3]  # a set, in name order
    assert key(INT_LISTS) == key(*WITH_NEEDS)  # what it needs is in the set: one entry


def test_installed_finds_a_patched_plug_in_by_the_set_it_was_built_with(tmp_path):
    """A plug-in built for INT_LISTS carries its needs too (the manifest lists what was
    applied); asking for INT_LISTS finds it, asking for the other patch alone does not."""
    wheel = installed_wheel()
    folder = tmp_path / "runtimes" / "x-p1"
    folder.mkdir(parents=True)
    (folder / vulkan.LIBRARY).write_bytes(b"")
    vulkan.Manifest(
        runtime="vulkan", library=str(folder / vulkan.LIBRARY), runner="",
        library_sha256=hashlib.sha256(b"").hexdigest(), library_bytes=0, executorch_version=wheel.version,
        executorch_git_version=wheel.git_version, source_commit="c", source_version_txt="v",
        source_commit_date="", source_origin="o", source_exact=True, skew_note="",
        glslc_version="", toolchain_packages=[], build_seconds=1.0, phase_seconds={}, jobs=2,
        built_at="", inputs_key="k",
        patches=[{"name": n, "file": f"{n}.diff", "sha256": "ab" * 32, "files": []}
                 for n in WITH_NEEDS]).write(folder / "manifest.json")
    assert vulkan.installed(str(tmp_path), patches=[INT_LISTS]).folder == folder
    assert vulkan.installed(str(tmp_path), patches=WITH_NEEDS).folder == folder
    assert vulkan.installed(str(tmp_path), patches=[IO_DIM_ORDER]) is None
    assert vulkan.installed(str(tmp_path)) is None  # not the stock one


def test_manifest_records_patches_and_the_run_header_names_them(tmp_path):
    applied = [{"name": INT_LISTS, "file": f"{INT_LISTS}.diff", "sha256": "ab" * 32,
                "files": ["backends/x.cpp"]}]
    m = vulkan.Manifest(
        runtime="vulkan", library=str(tmp_path / vulkan.LIBRARY), runner="", library_sha256="0" * 64,
        library_bytes=1, executorch_version="1.5.1", executorch_git_version="g", source_commit="c",
        source_version_txt="v", source_commit_date="", source_origin="o", source_exact=False,
        skew_note="", glslc_version="", toolchain_packages=[], build_seconds=1.0,
        phase_seconds={}, jobs=2, built_at="", inputs_key="k", patches=applied)
    m.write(tmp_path / "manifest.json")
    back = vulkan.Manifest.read(tmp_path / "manifest.json")
    assert back.patches == applied and back.patch_names == [INT_LISTS]
    assert back.summary()["patches"] == [{"name": INT_LISTS, "file": f"{INT_LISTS}.diff",
                                          "sha256": "ab" * 8}]
    assert back.describe_patches() == f"patched: {INT_LISTS} ({'ab' * 6})"
    data = json.loads((tmp_path / "manifest.json").read_text())
    del data["patches"]  # a manifest from before patches existed reads as stock
    (tmp_path / "manifest.json").write_text(json.dumps(data))
    old = vulkan.Manifest.read(tmp_path / "manifest.json")
    assert old.patches == [] and old.summary()["patches"] == []
    assert old.describe_patches().startswith("stock")


def test_build_trees_are_swapped_through_one_path_and_seeded_from_stock(tmp_path):
    """Every patch set builds at the same path (ninja's commands hold absolute paths); the
    first build of a set starts from a copy of the stock objects, mtimes kept; each set keeps
    its own tree."""
    build, stock = tmp_path / "build", "1.5.1-abc"
    slot = build / stock
    (slot / "cmake").mkdir(parents=True)  # a stock tree from before patches (no tree.txt)
    obj = slot / "cmake" / "a.o"
    obj.write_text("stock object")
    os.utime(obj, (1_000_000, 1_000_000))
    (slot / "src").mkdir()  # sources are never copied: each build extracts its own

    tree, how = vulkan._checkout_tree(build, stock, f"{stock}-p11111111", log=lambda _: None)
    assert tree == slot and how == "seeded from the stock tree"
    assert (slot / "cmake" / "a.o").stat().st_mtime == 1_000_000
    assert (build / f"{stock}-stock" / "cmake" / "a.o").stat().st_mtime == 1_000_000
    assert not (build / f"{stock}-stock" / "src").exists()
    (slot / "cmake" / "a.o").write_text("patched object")

    tree, how = vulkan._checkout_tree(build, stock, f"{stock}-p22222222", log=lambda _: None)
    assert how == "seeded from the stock tree"
    assert (slot / "cmake" / "a.o").read_text() == "stock object"  # not p1's objects
    assert (build / f"{stock}-p11111111" / "cmake" / "a.o").read_text() == "patched object"

    tree, how = vulkan._checkout_tree(build, stock, f"{stock}-p11111111", log=lambda _: None)
    assert how == "its own tree" and (slot / "cmake" / "a.o").read_text() == "patched object"
    tree, how = vulkan._checkout_tree(build, stock, stock, log=lambda _: None)
    assert how == "its own tree" and (slot / "cmake" / "a.o").read_text() == "stock object"
    assert (slot / vulkan.TREE_OWNER).read_text().strip() == stock
    tree, how = vulkan._checkout_tree(build, stock, stock, log=lambda _: None)
    assert how == "in place"
    assert sorted(p.name for p in build.iterdir()) == [
        stock, f"{stock}-p11111111", f"{stock}-p22222222"]


def test_old_patched_trees_are_pruned_the_stock_and_the_slot_never(tmp_path):
    build, stock = tmp_path / "build", "1.5.1-abc"
    for i, name in enumerate([stock, f"{stock}-stock"] + [f"{stock}-p{i}" * 1 for i in range(5)]):
        (build / name).mkdir(parents=True)
        (build / name / vulkan.TREE_OWNER).write_text(name)
        os.utime(build / name / vulkan.TREE_OWNER, (1000 + i, 1000 + i))
    dropped = vulkan._prune_parked(build, stock, keep=2)
    assert sorted(dropped) == [f"{stock}-p0", f"{stock}-p1", f"{stock}-p2"]
    assert sorted(p.name for p in build.iterdir()) == sorted(
        [stock, f"{stock}-stock", f"{stock}-p3", f"{stock}-p4"])


VALID = dict(dim=2, in_channels=3, out_channels=8, kernel_size=3, padding="valid",
             input_shape=[1, 3, 16, 16])


@pytest.mark.slow
def test_patched_plugin_runs_the_make_ivec2_case_to_pass(vulkan_runtime, tmp_path):
    """Built incrementally from the stock tree (only the patched files recompile: ~1-2 minutes
    on 2 cores, measured in the patch's report); the stock plug-in fails the case in make_ivec2,
    the patched one passes it, and its run header names the patch."""
    t = time.perf_counter()
    try:
        patched = vulkan.build(patches=(INT_LISTS,), log=lambda line: print(f"patched: {line}"))
    except RuntimeBuildError as e:
        if os.environ.get("CI"):
            pytest.fail(f"the patched Vulkan runtime must build in CI: {e}")
        pytest.skip(f"no patched Vulkan runtime: {e}")
    print(f"patched build: {time.perf_counter() - t:.0f} s, {patched.extra.get('build_tree')}, "
          f"{patched.phase_seconds}")
    assert patched.patch_names == WITH_NEEDS and patched.library != vulkan_runtime.library
    assert Path(patched.library).parent.name.startswith(
        Path(vulkan_runtime.library).parent.name + "-p")
    assert vulkan.installed().library == vulkan_runtime.library  # "auto" stays the stock one
    assert vulkan.installed(patches=[INT_LISTS]).library == patched.library

    cases = tmp_path / "cases.json"
    cases.write_text(json.dumps([VALID]))
    statuses = {}
    for name, library in (("stock", vulkan_runtime.library), ("patched", patched.library)):
        out = tmp_path / name
        proc = harness("run", "--out", out, "--cases", cases, "--backends", "vulkan",
                       "--vulkan-runtime", library, "--max-examples", "0", "--no-cache",
                       "-j", "1", "--no-progress", "--no-report")
        assert proc.returncode == 0, proc.stderr[-2000:]
        import pandas as pd

        row = pd.read_csv(out / "matrix.csv").iloc[0]
        statuses[name] = (row.status, str(row.message))
        header = json.loads((out / "run.json").read_text())["vulkan"]
        assert header["library"] == library
        assert [p["name"] for p in header["patches"]] == (WITH_NEEDS if name == "patched" else [])
    # both executed on their own plug-in, each row honest; what the stock and patched plug-ins
    # make of the case on 1.5.1 is the corpus's (cases/vulkan_runtime_patches.json)
    for name, (status, message) in statuses.items():
        assert status in ("PASS", "MISMATCH", "RUNTIME_ERROR", "CRASH"), (name, status, message)
        assert status == "PASS" or message not in ("", "nan"), (name, status)


def test_a_runtime_fix_whose_patch_does_not_apply_is_one_line_exit_2_nothing_written(
        tmp_path, monkeypatch, capsys):
    """`run --fixes NAME` where NAME is a runtime fix whose patch does not apply to the installed
    release's source: one line, exit 2, no run folder."""
    needs_sources()
    from harness import cli
    from harness.stages import fixes
    from harness.stages.fixes.runtime_patches import RuntimePatchFix

    patches = tmp_path / "patches"
    patches.mkdir()
    (patches / "bad-context.diff").write_text(BAD_CONTEXT)
    monkeypatch.setattr(patching, "PATCH_DIR", patches)
    fix = type("Bad", (RuntimePatchFix,), {"name": "bad-context", "runtime_patch": "bad-context"})
    fixes.names()  # load the registry first, then add the bad fix to it
    monkeypatch.setitem(fixes._registry._entries, "bad-context", fix())
    out = tmp_path / "run"
    rc = cli.main(["run", "--out", str(out), "--backends", "vulkan", "--fixes", "bad-context",
                   "--max-examples", "0", "--no-cache", "--no-progress", "--no-report"])
    # torch's own import-time log lines (glog format, e.g. torchao's "W1207 ... _pytree.py:630]
    # ... Enum subclass" deprecation) are not the harness's output
    err = "".join(line for line in capsys.readouterr().err.splitlines(keepends=True)
                  if not re.match(r"[IWEF]\d{4} \d\d:\d\d:\d\d", line))
    assert rc == 2 and err.count("\n") == 1, err
    assert err.startswith("convconf: error: patch bad-context (bad-context.diff) does not apply")
    assert not out.exists()


def test_a_repro_script_of_a_patched_lane_loads_the_patched_plug_in(tmp_path):
    """The run header names each patch set's library and lanes; a repro script of a cell of such
    a lane (an ingested @device lane too) loads that library, a stock cell the stock one, and a
    fixed lane's script imports the fix registry that exists."""
    from harness.lane import Lane
    from harness.results import repro
    from harness.runfolder import RunFolder
    from harness.spec import ConvCase

    lane = Lane("vulkan", ("vk-conv-int-list-broadcast", "vulkan-conv-padding"))
    RunFolder(tmp_path).write_header({"vulkan_runtime": "/stock.so", "vulkan": {"patched": [
        {"patches": [{"name": "vk-conv-int-list-broadcast"}], "lanes": [lane.name],
         "library": "/patched.so"}]}})
    assert repro.run_runtime_library(tmp_path) == "/stock.so"
    assert repro.run_runtime_library(tmp_path, Lane("vulkan")) == "/stock.so"
    assert repro.run_runtime_library(tmp_path, lane) == "/patched.so"
    assert repro.run_runtime_library(tmp_path, lane.on("h200")) == "/patched.so"
    case = ConvCase(dim=2, in_channels=3, out_channels=8, kernel_size=3, padding="valid",
                    input_shape=(1, 3, 16, 16))
    text = repro.script(case, "vulkan", lane.fixes_column, "PASS", "", "/patched.so")
    assert '"/patched.so"' in text and "from harness.stages.fixes import get" in text
    compile(text, "repro.py", "exec")
