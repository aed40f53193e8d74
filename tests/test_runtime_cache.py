"""A plug-in cache entry carries what it needs: a cache built by a clone that has since been
deleted (its source tarball gone with it), or a cache folder moved elsewhere, serves a new clone
whole: the same plug-in (a cache hit, nothing compiled), and the complete conv shader universe
that coverage is measured against, read from the entry's own copy of the source, never from a
path of the checkout that built it."""

import json
import shutil
from pathlib import Path

import pytest

from harness.runtimes import source as source_mod, vulkan


@pytest.fixture()
def moved(vulkan_runtime, tmp_path, monkeypatch):
    """The installed stock plug-in's cache entry copied into a new cache root, as an entry
    from before entries kept their source (no source.tar.gz, source_origin an absolute path
    that no longer exists); the source tarball it was built from moved to a new folder, and no
    ``shared/executorch-src`` beside the checkout."""
    entry = Path(vulkan_runtime.library).parent
    cache = tmp_path / "cache"
    copy = cache / "runtimes" / entry.name
    shutil.copytree(entry, copy)
    (copy / vulkan.SOURCE_COPY).unlink(missing_ok=True)
    data = json.loads((copy / "manifest.json").read_text())
    gone = tmp_path / "deleted-clone" / "executorch-src.tar.gz"
    data.update(source_origin=str(gone), conv_shaders={}, source_digest="")
    (copy / "manifest.json").write_text(json.dumps(data))
    # the source, found by commit wherever it is now (here: $CONVCONF_EXECUTORCH_SRC)
    found = vulkan_runtime.source_path()
    assert found, "the installed plug-in's entry has no source"
    new_home = tmp_path / "moved-source"
    new_home.mkdir()
    shutil.copy(found, new_home / "source.tar.gz")
    monkeypatch.setattr(source_mod, "BESIDE_CHECKOUT", tmp_path / "no-shared")
    monkeypatch.setenv(source_mod.ENV, str(new_home))
    return cache, copy, new_home


def test_manifest_paths_follow_the_entry(moved):
    cache, copy, _ = moved
    m = vulkan.Manifest.read(copy / "manifest.json")
    assert Path(m.library) == copy / vulkan.LIBRARY
    assert Path(m.library).is_file()


def test_an_old_entry_finds_its_source_by_commit_and_keeps_a_copy(moved, vulkan_runtime):
    cache, copy, new_home = moved
    m = vulkan.Manifest.read(copy / "manifest.json")
    universe = m.shader_universe()
    assert not universe.problem, universe.problem
    assert set(universe.known) == set(vulkan_runtime.shader_universe().known)
    assert len(universe.known) > 20
    assert (copy / vulkan.SOURCE_COPY).is_file()  # healed: the entry now carries its source
    kept = vulkan.Manifest.read(copy / "manifest.json")
    assert kept.conv_shaders["families"], "the universe is kept in the manifest"
    assert str(new_home) not in (copy / "manifest.json").read_text()


def test_an_entry_with_its_source_needs_nothing_else(moved, monkeypatch, vulkan_runtime):
    cache, copy, new_home = moved
    vulkan.Manifest.read(copy / "manifest.json").source_path()  # takes its copy
    shutil.rmtree(new_home)  # now no source is anywhere but in the entry
    data = json.loads((copy / "manifest.json").read_text())
    data["conv_shaders"] = {}
    (copy / "manifest.json").write_text(json.dumps(data))
    universe = vulkan.Manifest.read(copy / "manifest.json").shader_universe()
    assert not universe.problem, universe.problem
    assert set(universe.known) == set(vulkan_runtime.shader_universe().known)


def test_a_build_against_the_moved_cache_is_a_hit_that_restores_the_source(moved):
    """`harness runtime build vulkan` in the new clone: the source is found where it is now,
    the entry built elsewhere is a cache hit (nothing compiled) and carries its source after."""
    cache, copy, new_home = moved
    m = vulkan.build(str(new_home), cache=str(cache), log=lambda line: None)
    assert m.cached, "the moved entry should be a cache hit"
    assert Path(m.library) == copy / vulkan.LIBRARY
    assert (copy / vulkan.SOURCE_COPY).is_file()


def test_an_entry_without_its_source_says_what_to_do(moved, monkeypatch):
    cache, copy, new_home = moved
    shutil.rmtree(new_home)
    universe = vulkan.Manifest.read(copy / "manifest.json").shader_universe()
    assert not universe.known
    assert "runtime build vulkan" in universe.problem


def test_a_clone_with_no_source_beside_it_hits_the_cache_offline(moved, monkeypatch):
    """A new clone with no shared/executorch-src beside it and no $CONVCONF_EXECUTORCH_SRC:
    `harness runtime build vulkan` takes the source the cached entry carries (no fetch) and
    is a cache hit."""
    cache, copy, new_home = moved
    vulkan.Manifest.read(copy / "manifest.json").source_path()  # the entry takes its copy
    shutil.rmtree(new_home)
    monkeypatch.delenv(source_mod.ENV)

    def no_fetch(*args, **kwargs):
        raise AssertionError("fetched from the network although the cache has the source")

    monkeypatch.setattr(source_mod, "git_fetch", no_fetch)
    m = vulkan.build(cache=str(cache), log=lambda line: None)
    assert m.cached and Path(m.library) == copy / vulkan.LIBRARY
