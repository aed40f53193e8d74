"""The cache stays honest and bounded (issue 49): every entry carries the sha256 of its content
and a load checks it (a truncated or bit-flipped program is a miss with one warning line naming
the entry, and is replaced: never a cell's verdict); a served entry is the most recently used;
``harness cache info`` / ``prune`` (the cheapest to make again first, least recently used first
within a kind; never the plug-in the installed wheel pairs with) and the maximum size enforced after a run."""

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from harness.cli import cache as cache_cli
from harness.cli import main
from harness.cli.common import UsageError
from harness.lane import Lane
from harness.runtimes import vulkan
from harness.spec import ConvCase
from harness.stages import cache as cache_mod
from harness.stages.cell import run_cell

CASE = ConvCase(dim=1, in_channels=2, out_channels=2, kernel_size=3, padding="valid",
                input_shape=(1, 2, 10))
XNN = Lane("xnnpack")
DAY = 86400


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """One real lowering (XNNPACK, fp32 conv1d) stored in a cache: (cache root, entry folder,
    the cold cell's verdict)."""
    root = tmp_path_factory.mktemp("template")
    cold = run_cell(CASE, "xnnpack", [], cache_mod.Cache(root))
    assert cold.cached is False
    entry = cache_mod.Cache(root).path(CASE.case_id, XNN)
    return root, entry, cold


def _copy_cache(template, tmp_path) -> tuple[cache_mod.Cache, Path]:
    root, entry, _ = template
    dest = tmp_path / "cache"
    shutil.copytree(root, dest)
    return cache_mod.Cache(dest), dest / entry.relative_to(root)


def test_an_entry_carries_the_sha256_of_its_content(template):
    _, entry, _ = template
    meta = json.loads((entry / "meta.json").read_text())
    sums = meta[cache_mod.CHECKS]
    assert set(sums) == {"program.pte", "refs.pt", "meta.json"}
    assert sums["program.pte"] == cache_mod.sha256((entry / "program.pte").read_bytes())
    blob = cache_mod.named_blob(entry)  # the references, kept once under the root (#50)
    assert blob == cache_mod.blob_path(entry.parent.parent, sums["refs.pt"])
    assert sums["refs.pt"] == cache_mod.sha256(blob.read_bytes())
    assert sums["meta.json"] == cache_mod.meta_digest(meta)


def _truncate(entry):
    data = (entry / "program.pte").read_bytes()
    (entry / "program.pte").write_bytes(data[:len(data) // 2])


def _flip(name):
    def flip(entry):
        path = cache_mod.named_blob(entry) if name == "refs.pt" else entry / name
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0x10
        path.write_bytes(bytes(data))
    return flip


def _tear_meta(entry):
    text = (entry / "meta.json").read_text()
    (entry / "meta.json").write_text(text[:len(text) // 3])


def _edit_meta(entry):  # valid JSON, one verdict field changed: its own digest catches it
    meta = json.loads((entry / "meta.json").read_text())
    meta["status"] = "NOT_DELEGATED" if meta.get("status") != "NOT_DELEGATED" else "PASS"
    (entry / "meta.json").write_text(json.dumps(meta))


def _lose_program(entry):
    (entry / "program.pte").unlink()


def _lose_references(entry):
    cache_mod.named_blob(entry).unlink()


CORRUPTIONS = {"truncated program": _truncate, "bit-flipped program": _flip("program.pte"),
               "bit-flipped references": _flip("refs.pt"), "torn meta.json": _tear_meta,
               "edited verdict": _edit_meta, "program missing": _lose_program,
               "references missing": _lose_references}


def _restore(template, store: cache_mod.Cache, entry: Path) -> None:
    """What the next lowering stores: the entry, and its references blob where it went."""
    shutil.copytree(template[1], entry)
    blob = cache_mod.named_blob(entry)
    if not blob.exists():
        blob.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(cache_mod.named_blob(template[1]), blob)


@pytest.mark.parametrize("corrupt", CORRUPTIONS.values(), ids=CORRUPTIONS.keys())
def test_a_corrupt_entry_is_a_miss_named_in_one_line_and_replaced(corrupt, template, tmp_path,
                                                                  capfd):
    store, entry = _copy_cache(template, tmp_path)
    good = (entry / "program.pte").read_bytes()
    corrupt(entry)
    assert store.load(CASE.case_id, XNN) is None
    lines = [x for x in capfd.readouterr().err.splitlines() if x.strip()]
    assert len(lines) == 1 and entry.name in lines[0] and "corrupt" in lines[0], lines
    assert CASE.case_id in lines[0]
    assert not entry.exists()  # set aside: the next store is not refused by a stale folder
    assert (store.hits, store.misses, store.replaced) == (0, 1, 1)
    assert len((store.root / cache_mod.REPLACED_LOG).read_text().splitlines()) == 1
    _restore(template, store, entry)  # what the next lowering stores: taken, never refused
    served = store.load(CASE.case_id, XNN)
    assert served is not None and served.pte == good and store.hits == 1


def test_a_corrupt_program_never_becomes_the_cells_verdict(template, tmp_path, capfd):
    """The cell with a bit-flipped program in the cache: lowered again, the clean verdict."""
    store, entry = _copy_cache(template, tmp_path)
    good = (entry / "program.pte").read_bytes()
    _flip("program.pte")(entry)
    again = run_cell(CASE, "xnnpack", [], store)
    cold = template[2]
    assert again.cached is False
    assert (again.status, again.max_abs_error) == (cold.status, cold.max_abs_error)
    assert "corrupt" in capfd.readouterr().err
    served = store.load(CASE.case_id, XNN)  # replaced by the real program
    assert served is not None and served.pte == good


def test_an_intact_entry_is_a_hit_and_becomes_the_most_recently_used(template, tmp_path):
    store, entry = _copy_cache(template, tmp_path)
    other = entry.parent / ("f" * 24)
    shutil.copytree(entry, other)  # a second entry (another key), same bytes
    os.utime(entry, (1_000_000, 1_000_000))
    os.utime(other, (2_000_000, 2_000_000))
    assert [e.path for e in cache_mod.entries(store.root)] == [entry, other]
    assert store.load(CASE.case_id, XNN) is not None and store.hits == 1
    assert [e.path for e in cache_mod.entries(store.root)] == [other, entry]  # served: newest


def _plugin(root: Path, name: str, paired: bool, when: float) -> Path:
    """The installed stock plug-in's real entry copied into ``root``; not ``paired``: its
    manifest names another wheel commit (a plug-in of another wheel, as a bisect leaves)."""
    src = vulkan.installed()
    dest = root / "runtimes" / name
    shutil.copytree(src.folder, dest, ignore=shutil.ignore_patterns(vulkan.SOURCE_COPY))
    if not paired:
        data = json.loads((dest / "manifest.json").read_text())
        data["executorch_git_version"] = "0" * 40
        (dest / "manifest.json").write_text(json.dumps(data))
    os.utime(dest, (when, when))
    return dest


@pytest.fixture()
def plugin_installed(request):
    if vulkan.installed() is None:
        request.getfixturevalue("vulkan_runtime")  # builds it (or says why not)
    return vulkan.installed()


def test_a_corrupt_plugin_is_never_served(plugin_installed, tmp_path, capfd):
    entry = _plugin(tmp_path, plugin_installed.folder.name, paired=True, when=1_000_000)
    assert vulkan.installed(str(tmp_path)).folder == entry
    lib = entry / vulkan.LIBRARY
    data = bytearray(lib.read_bytes())
    data[len(data) // 2] ^= 0x01
    lib.write_bytes(bytes(data))
    capfd.readouterr()
    assert vulkan.installed(str(tmp_path)) is None  # a miss: never loaded
    err = [x for x in capfd.readouterr().err.splitlines() if x.strip()]
    assert len(err) == 1 and entry.name in err[0] and "sha256" in err[0]


def _lowered(template, root: Path, n: int) -> list[Path]:
    """``n`` copies of the template's entry under other keys, used a day apart (oldest first),
    naming one references blob (copied into ``root``, as the lanes of one case do)."""
    _, entry, _ = template
    blob = cache_mod.named_blob(entry)
    dest = root / blob.relative_to(template[0])
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(blob, dest)
    made = []
    for i in range(n):
        key = f"{i:02x}" + "a" * 22
        dest = root / key[:2] / key
        shutil.copytree(entry, dest)
        t = 1_700_000_000 + i * DAY
        os.utime(dest, (t, t))
        made.append(dest)
    return made


def test_prune_removes_the_cheapest_to_remake_and_least_recently_used_first_never_the_paired_plugin(
        plugin_installed, template, tmp_path):
    root = tmp_path / "cache"
    paired = _plugin(root, plugin_installed.folder.name, paired=True, when=1_600_000_000)
    other = _plugin(root, "1.5.1-000000000000", paired=False, when=1_700_000_000 + 2.5 * DAY)
    lowered = _lowered(template, root, 5)
    items = cache_cli.inventory(root)
    kinds = {i.path: (i.kind, i.keep) for i in items}
    assert kinds[paired] == (cache_cli.PLUGINS, "the plug-in the installed wheel pairs with")
    assert kinds[other][0] == cache_cli.PLUGINS and not kinds[other][1]
    assert all(kinds[p] == (cache_cli.LOWERED, "") for p in lowered)
    entry_bytes = cache_mod.folder_bytes(lowered[0])
    # a bound the paired plug-in alone exceeds: everything else goes, the lowered programs
    # (seconds to make again) first, oldest first, then the other plug-in (minutes), although
    # two lowered programs were used after it
    blob = cache_mod.named_blob(lowered[0])  # shared: removed with the last program naming it
    done = cache_cli.prune(root, max_bytes=1)
    assert [i.path for i in done.removed] == [*lowered, blob, other]
    assert paired.exists() and vulkan.installed(str(root)).folder == paired
    assert done.after == cache_mod.folder_bytes(paired) and done.freed > 5 * entry_bytes
    # a bound that one lowered program's removal meets: the plug-in stays
    lowered = _lowered(template, root, 2)
    other = _plugin(root, "1.5.1-000000000000", paired=False, when=1_000_000)  # the oldest
    done = cache_cli.prune(root, max_bytes=cache_cli.prune(root).after - 1)
    assert [i.path for i in done.removed] == [lowered[0]] and other.exists()


def test_prune_older_than_and_a_bound_that_fits(template, tmp_path):
    root = tmp_path / "cache"
    lowered = _lowered(template, root, 6)
    for i, p in enumerate(lowered[3:]):  # the newest three were used just now
        os.utime(p)
    old = cache_cli.prune(root, older_than_days=1)
    assert [i.path for i in old.removed] == lowered[:3]
    size = cache_cli.prune(root).after  # no bound, nothing old: nothing removed
    blob = cache_mod.named_blob(lowered[3])  # still named: kept, counted once
    assert blob.exists()
    assert size == sum(cache_mod.folder_bytes(p) for p in lowered[3:]) + blob.stat().st_size
    one = cache_mod.folder_bytes(lowered[3])
    kept = cache_cli.prune(root, max_bytes=size - one)  # one entry over: one removed, the oldest
    assert [i.path for i in kept.removed] == [lowered[3]] and kept.after <= size - one


def test_after_a_run_the_counts_are_recorded_and_the_bound_enforced(template, tmp_path,
                                                                    monkeypatch, capsys):
    root = tmp_path / "cache"
    lowered = _lowered(template, root, 4)
    one = cache_mod.folder_bytes(lowered[0])
    blob = cache_mod.named_blob(lowered[0]).stat().st_size  # one blob, named by all four
    df = pd.DataFrame({"status": ["PASS", "PASS", "INVALID", "MISMATCH"],
                       "cached": [True, False, False, True]})
    monkeypatch.setenv(cache_cli.MAX_ENV, str(2 * one + blob + one // 2))
    done = cache_cli.after_run(str(root), df, tmp_path / "no-run-folder")
    assert [i.path for i in done.removed] == lowered[:2]
    out = " ".join(capsys.readouterr().out.split())  # one line, wrapped to the console
    assert out.startswith("cache: pruned 2 entries") and "$CONVCONF" in out and out.count("cache:") == 1
    last = cache_cli.LastRun.read(root)
    assert (last.cells, last.hits, last.misses, last.replaced) == (4, 2, 1, 0)
    info = "\n".join(cache_cli.info_lines(root))
    assert "lowered programs" in info and "2 hits, 1 misses" in info
    lines = cache_cli.info_lines(root)
    assert lines[1] == f"  in {root}"  # the folder on a line of its own, as long as it is
    assert all(len(line) <= 100 for line in lines[:1] + lines[2:])


def test_cache_commands_take_bad_input_in_one_line(tmp_path, capsys):
    assert main(["cache", "prune", "--cache", str(tmp_path), "--max-size", "lots"]) == 2
    assert main(["cache", "info", "--cache", str(tmp_path / "absent")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(x.startswith("convconf: error: cache") for x in err)
    with pytest.raises(UsageError):
        cache_cli.parse_size("12 parsecs")
    assert cache_cli.parse_size("2GB") == 2 * 10 ** 9 and cache_cli.parse_size("1.5MiB") == \
        int(1.5 * 2 ** 20) and cache_cli.parse_size("none") is None


def test_info_and_prune_on_the_command_line(template, tmp_path, capsys):
    root = tmp_path / "cache"
    _lowered(template, root, 3)
    assert main(["cache", "info", "--cache", str(root)]) == 0
    info = capsys.readouterr().out
    assert "lowered programs" in info and "3" in info and "last run: none recorded" in info
    assert main(["cache", "prune", "--cache", str(root), "--older-than", "0"]) == 0
    line = capsys.readouterr().out.strip()
    assert "removed 3 lowered programs" in line and cache_mod.entries(root) == []
