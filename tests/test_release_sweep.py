"""The release sweep's sharing (issue 50): a patched plug-in's build tree when the stock tree is
gone, and what `nox -s releases` decides before it installs anything."""

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.runtimes import vulkan

STOCK = "1.5.1-abc"
SIBLING = f"{STOCK}-p11111111"
WANT = f"{STOCK}-p22222222"


def _manifest(folder: Path, files: list[str]) -> None:
    folder.mkdir(parents=True)
    vulkan.Manifest(
        runtime="vulkan", library=str(folder / vulkan.LIBRARY), runner="", library_sha256="0" * 64,
        library_bytes=1, executorch_version="1.5.1", executorch_git_version="g",
        source_commit="abc", source_version_txt="v", source_commit_date="", source_origin="o",
        source_exact=True, skew_note="", glslc_version="", toolchain_packages=[],
        build_seconds=1.0, phase_seconds={}, jobs=2, built_at="", inputs_key="k",
        patches=[{"name": "p", "file": "p.diff", "sha256": "ab" * 32, "files": files}],
    ).write(folder / "manifest.json")


def _tree(build: Path, owner: str) -> Path:
    """A parked build tree of ``owner``: a ninja project copying ../src/executorch/{a,b}.c to
    {a,b}.o, its objects written after the sources it was built from."""
    cmake = build / owner / "cmake"
    cmake.mkdir(parents=True)
    (build / owner / vulkan.TREE_OWNER).write_text(owner + "\n")
    (cmake / "build.ninja").write_text(
        "rule cp\n  command = cp $in $out\n"
        "build a.o: cp ../src/executorch/a.c\nbuild b.o: cp ../src/executorch/b.c\n")
    for name in ("a.o", "b.o"):
        (cmake / name).write_text(f"{owner}'s object")
        os.utime(cmake / name, (2_000_000, 2_000_000))
    return build / owner


def _extract(slot: Path) -> Path:
    """What a build does first: its own sources, at the tarball's (old) mtimes."""
    src = slot / "src" / "executorch"
    src.mkdir(parents=True)
    for name in ("a.c", "b.c"):
        (src / name).write_text("source")
        os.utime(src / name, (1_000_000, 1_000_000))
    return src


def test_without_a_stock_tree_a_set_starts_from_a_sibling_and_rebuilds_its_patched_files(
        tmp_path):
    """The stock tree pruned: a patch set's first build copies another set's tree (that tree
    stays) and makes exactly the files that set's patches changed newer than their objects,
    so ninja recompiles them and nothing else (a cold build was 200-400 s, a seeded one 20-40 s)."""
    runtimes = tmp_path / "runtimes"
    build = runtimes / "build"
    _manifest(runtimes / SIBLING, files=["a.c"])
    _tree(build, SIBLING)

    slot, how = vulkan._checkout_tree(build, STOCK, WANT, log=lambda _: None)
    assert slot == build / STOCK and how == f"seeded from {SIBLING}'s tree"
    assert (build / SIBLING / "cmake" / "a.o").is_file()  # the sibling keeps its own tree
    assert (slot / vulkan.TREE_OWNER).read_text().strip() == WANT
    src = _extract(slot)
    assert vulkan.touch_seed_files(slot, runtimes) == ["a.c"]
    assert (src / "a.c").stat().st_mtime > (slot / "cmake" / "a.o").stat().st_mtime
    assert (src / "b.c").stat().st_mtime < (slot / "cmake" / "b.o").stat().st_mtime


@pytest.mark.skipif(not shutil.which("ninja"), reason="ninja is the plug-in build's tool")
def test_ninja_recompiles_only_the_sibling_patched_file_in_a_seeded_tree(tmp_path):
    runtimes = tmp_path / "runtimes"
    build = runtimes / "build"
    _manifest(runtimes / SIBLING, files=["a.c"])
    sibling = _tree(build, SIBLING)
    (sibling / "src" / "executorch").mkdir(parents=True)  # its build, for real: ninja's log
    for name in ("a.c", "b.c"):
        (sibling / "src" / "executorch" / name).write_text(f"{SIBLING}'s source")
        os.utime(sibling / "src" / "executorch" / name, (1_500_000, 1_500_000))
    subprocess.run(["ninja"], cwd=sibling / "cmake", capture_output=True, check=True)
    shutil.rmtree(sibling / "src")  # a parked tree keeps no sources
    slot, _ = vulkan._checkout_tree(build, STOCK, WANT, log=lambda _: None)
    _extract(slot)

    def dry() -> str:
        return subprocess.run(["ninja", "-n"], cwd=slot / "cmake", capture_output=True,
                              text=True, check=True).stdout

    assert "no work to do" in dry()  # untouched, the sibling's a.o would be linked: wrong
    vulkan.touch_seed_files(slot, runtimes)
    said = dry()
    assert "a.o" in said and "b.o" not in said


def test_a_sibling_without_a_manifest_is_no_seed_and_a_finished_build_forgets_its_seed(tmp_path):
    """A tree whose plug-in entry is gone cannot say what its patches changed: cold. Where no
    other tree exists, cold too; touching is a no-op in a tree that was not seeded."""
    runtimes = tmp_path / "runtimes"
    build = runtimes / "build"
    _tree(build, SIBLING)  # no manifest under runtimes/
    slot, how = vulkan._checkout_tree(build, STOCK, WANT, log=lambda _: None)
    assert how == "cold" and not (slot / "cmake").exists()
    _extract(slot)
    assert vulkan.touch_seed_files(slot, runtimes) == []


def _noxfile():
    spec = importlib.util.spec_from_file_location(
        "noxfile_under_test", Path(__file__).resolve().parents[1] / "noxfile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_sweep_keeps_its_lowerings_beside_the_convconf_cache_or_where_told(
        tmp_path, monkeypatch):
    """Its own folder: a run keeps the convconf cache under 2 GB (a sweep outgrows it) and the
    plug-ins' build trees live there."""
    nox_file = _noxfile()
    monkeypatch.delenv("RELEASES_CACHE", raising=False)
    monkeypatch.setenv("CONVCONF_CACHE", str(tmp_path / "convconf"))
    assert nox_file._sweep_cache() == tmp_path / "convconf-releases"
    monkeypatch.setenv("RELEASES_CACHE", str(tmp_path / "elsewhere"))
    assert nox_file._sweep_cache() == tmp_path / "elsewhere"


def test_the_installed_pair_is_what_this_interpreter_imports():
    """The leg of the release installed here runs without a venv: executorch's version and
    torch's without its local tag (a release's pairing names 2.13.0, the CPU build is +cpu)."""
    from importlib.metadata import version

    executorch, torch = _noxfile()._installed_pair()
    assert executorch == version("executorch") and "+" not in torch
    assert version("torch").startswith(torch)
