"""A case's references are kept once in the cache, whatever its number of lanes (issue 50).

``refs.pt`` (a case's inputs, eager reference and error bound) is the same for every lane of a
case and 99.8% of an entry's bytes: stages/cache.py keeps it once under the root,
``refs/<2 hex>/<sha256>.pt``, named by the digest in each entry's meta.json. What these tests
hold it to: the lanes of a case store one blob and load equal references; a blob is never
written twice; a missing or corrupt blob is a corrupt entry (one warning line, the entry gone,
lowered again), never a crash; an entry of the old layout (refs.pt in its folder) still loads;
``harness cache`` counts a shared blob once, removes it with the last entry naming it, and
removes a blob no entry names (an orphan) only once it is older than STALE_TEMP_S.
Real lowerings (XNNPACK, fp32 conv1d, three lanes), real torch tensors, the real cache.
"""

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch

from harness.cli import cache as cache_cli
from harness.lane import Lane
from harness.spec import ConvCase
from harness.stages import cache as cache_mod
from harness.stages.prepare import References, prepare_case

CASE = ConvCase(dim=1, in_channels=2, out_channels=3, kernel_size=3, padding="valid",
                input_shape=(1, 2, 12))
LANES = (Lane("xnnpack"), Lane("xnnpack", ("xnnpack-conv1d-same-even",)),
         Lane("xnnpack", ("xnnpack-tconv-output-padding",)))
OLD = 2 * cache_cli.STALE_TEMP_S  # seconds: older than a live writer's


@pytest.fixture(scope="module")
def prepared():
    """The case's three lanes prepared once (they share one References object, as in a run)."""
    return prepare_case(CASE, list(LANES))


@pytest.fixture()
def stored(prepared, tmp_path):
    """The three lanes stored in a fresh cache: (root, their entry folders)."""
    store = cache_mod.Cache(tmp_path / "cache")
    for p in prepared.values():
        store.store(CASE.case_id, p)
    return store.root, [store.path(CASE.case_id, lane) for lane in LANES]


def _age(path: Path, seconds: float) -> None:
    t = path.stat().st_mtime - seconds
    os.utime(path, (t, t))


def _same(a: References, b: References) -> bool:
    return (len(a.inputs) == len(b.inputs)
            and all(torch.equal(x, y) for x, y in zip(a.inputs, b.inputs))
            and torch.equal(a.ref, b.ref) and (a.bound is None) == (b.bound is None))


def test_the_lanes_of_a_case_store_one_blob_and_load_equal_references(prepared, stored):
    root, folders = stored
    refs = prepared[LANES[0]].refs
    assert all(p.refs is refs for p in prepared.values())  # the premise: one object per case
    assert sum(saved[0] is refs for saved in cache_mod.SAVED) == 1  # serialized once, not 3x
    blobs = cache_mod.blobs(root)
    assert len(blobs) == 1 and [cache_mod.named_blob(f) for f in folders] == blobs * 3
    assert not any((f / "refs.pt").exists() for f in folders)
    digests = {json.loads((f / "meta.json").read_text())[cache_mod.CHECKS]["refs.pt"]
               for f in folders}
    assert digests == {cache_mod.sha256(blobs[0].read_bytes())}
    store = cache_mod.Cache(root)  # another run
    loaded = [store.load(CASE.case_id, lane) for lane in LANES]
    assert store.hits == 3 and all(p is not None for p in loaded)
    assert all(_same(p.refs, refs) for p in loaded)
    assert [p.pte for p in loaded] == [prepared[lane].pte for lane in LANES]
    # every lane loads through the checked blob: flip it and none is served
    data = bytearray(blobs[0].read_bytes())
    data[len(data) // 3] ^= 0x04
    blobs[0].write_bytes(bytes(data))
    assert store.load(CASE.case_id, LANES[1]) is None


def test_a_blob_already_there_is_not_written_again_only_refreshed(prepared, stored):
    root, _ = stored
    blob = cache_mod.blobs(root)[0]
    _age(blob, OLD)
    before = blob.stat()
    again = cache_mod.Cache(root)  # a later run storing the case again
    again.store(CASE.case_id, prepared[LANES[0]])
    after = blob.stat()
    assert after.st_ino == before.st_ino and after.st_mtime > before.st_mtime + OLD / 2
    cache_mod.remove_blob(blob)  # pruned meanwhile: the next store writes it again, whole
    again.store(CASE.case_id, prepared[LANES[2]])
    assert cache_mod.blobs(root) == [blob] and cache_mod.sha256(blob.read_bytes()) == \
        blob.name[:-3]
    assert not list(blob.parent.glob(".tmp-*"))
    assert _same(cache_mod.Cache(root).load(CASE.case_id, LANES[2]).refs,
                 prepared[LANES[2]].refs)


def _flip(blob: Path) -> None:
    data = bytearray(blob.read_bytes())
    data[len(data) // 2] ^= 0x10
    blob.write_bytes(bytes(data))


def _truncate(blob: Path) -> None:
    blob.write_bytes(blob.read_bytes()[:100])


BLOB_FAULTS = {"bit-flipped": _flip, "truncated": _truncate, "missing": Path.unlink}


@pytest.mark.parametrize("fault", BLOB_FAULTS.values(), ids=BLOB_FAULTS.keys())
def test_a_corrupt_or_missing_blob_is_a_corrupt_entry_never_a_crash(fault, prepared, stored,
                                                                    capfd):
    root, folders = stored
    blob = cache_mod.blobs(root)[0]
    fault(blob)
    capfd.readouterr()
    store = cache_mod.Cache(root)
    assert store.load(CASE.case_id, LANES[0]) is None
    lines = [x for x in capfd.readouterr().err.splitlines() if x.strip()]
    assert len(lines) == 1 and folders[0].name in lines[0] and "corrupt" in lines[0], lines
    assert not folders[0].exists() and not blob.exists()  # a wrong blob goes for every user
    assert (store.hits, store.misses, store.replaced) == (0, 1, 1)
    # the case's other lanes name the same blob: corrupt entries too, one line each
    assert store.load(CASE.case_id, LANES[1]) is None and not folders[1].exists()
    assert len([x for x in capfd.readouterr().err.splitlines() if x.strip()]) == 1
    # the lowering that follows stores them again: served, the references whole
    for lane in LANES[:2]:
        store.store(CASE.case_id, prepared[lane])
    served = [cache_mod.Cache(root).load(CASE.case_id, lane) for lane in LANES]
    assert all(p is not None and _same(p.refs, prepared[LANES[0]].refs) for p in served)


def test_a_digest_that_is_not_a_sha256_is_a_corrupt_entry_and_removes_nothing_else(stored,
                                                                                  capfd):
    """The digests sit outside meta.json's own: an edited one is refused, never followed."""
    root, folders = stored
    decoy = root / "decoy.pt"
    decoy.write_bytes(b"not the cache's")
    meta = json.loads((folders[0] / "meta.json").read_text())
    meta[cache_mod.CHECKS]["refs.pt"] = "../../decoy"
    (folders[0] / "meta.json").write_text(json.dumps(meta))
    capfd.readouterr()
    assert cache_mod.Cache(root).load(CASE.case_id, LANES[0]) is None
    assert "not a sha256" in capfd.readouterr().err
    assert decoy.exists() and not folders[0].exists() and len(cache_mod.blobs(root)) == 1


def test_an_entry_stored_the_old_way_still_loads(prepared, stored):
    """A cache restored from an older sweep: refs.pt inside the entry's folder, no blob."""
    root, folders = stored
    blob = cache_mod.blobs(root)[0]
    old = folders[0]
    shutil.copy2(blob, old / "refs.pt")
    blob.unlink()
    assert cache_mod.named_blob(old) is None
    store = cache_mod.Cache(root)
    served = store.load(CASE.case_id, LANES[0])
    assert served is not None and _same(served.refs, prepared[LANES[0]].refs)
    assert store.load(CASE.case_id, LANES[1]) is None  # its blob is gone: corrupt, not old
    entry = {e.path: e for e in cache_mod.entries(root)}[old]
    assert entry.refs is None and entry.bytes == cache_mod.folder_bytes(old)
    assert entry.bytes > (old / "refs.pt").stat().st_size


def test_prune_removes_an_old_orphan_and_keeps_a_named_blob_and_a_young_orphan(prepared, stored):
    root, folders = stored
    named = cache_mod.blobs(root)[0]
    refs = prepared[LANES[0]].refs
    store = cache_mod.Cache(root)
    other = References(inputs=refs.inputs, ref=refs.ref + 1, bound=refs.bound)
    young = cache_mod.blob_path(root, store.store_references(other))  # its entry is coming
    older = References(inputs=refs.inputs, ref=refs.ref + 2, bound=refs.bound)
    orphan = cache_mod.blob_path(root, store.store_references(older))
    for blob in (named, orphan):
        _age(blob, OLD)
    items = {i.path: i for i in cache_cli.inventory(root)}
    assert {items[b].kind for b in (named, young, orphan)} == {cache_cli.REFERENCES}
    assert items[young].keep and not items[orphan].keep and not items[named].keep
    done = cache_cli.prune(root)  # no bound: only what no one needs
    assert [i.path for i in done.removed] == [orphan]
    assert named.exists() and young.exists() and not orphan.exists()
    assert done.freed == items[orphan].bytes
    assert all(f.exists() for f in folders)
    tmp = named.parent / ".tmp-killedwriter"  # a writer killed while writing a blob
    tmp.write_bytes(b"half")
    _age(tmp, OLD)
    assert [i.path for i in cache_cli.prune(root).removed] == [tmp]


def test_a_shared_blob_counts_once_and_goes_with_its_last_entry(stored, tmp_path, monkeypatch,
                                                               capsys):
    root, folders = stored
    blob = cache_mod.blobs(root)[0]
    size = blob.stat().st_size
    entries = cache_mod.entries(root)
    assert sorted(e.path for e in entries) == sorted(folders)  # refs/ is no entry
    assert all(cache_mod.is_entry_folder(e.path) for e in entries)
    assert not cache_mod.is_entry_folder(blob.parent) and not cache_mod.is_blob(folders[0])
    assert not any(blob.is_relative_to(e.path) for e in entries)  # the blob is in none
    for i, f in enumerate(folders):  # used in LANES order, oldest first
        t = 1_700_000_000 + i * 86400
        os.utime(f, (t, t))
    items = cache_cli.inventory(root)
    total = sum(i.bytes for i in items)
    bytes_of = {i.path: i.bytes for i in items}
    assert total == sum(cache_mod.folder_bytes(f) for f in folders) + size
    info = "\n".join(cache_cli.info_lines(root))
    assert f"{cache_cli.REFERENCES}" in info and cache_cli.human(total) in info
    # one entry over the bound: that entry goes, its bytes freed, the blob (still named) stays
    one = cache_cli.prune(root, max_bytes=total - 1)
    assert [i.path for i in one.removed] == [folders[0]] and blob.exists()
    assert one.freed == bytes_of[folders[0]]
    # the run's own prune (after_run, $CONVCONF_CACHE_MAX): the same code; every entry over
    # the bound goes, and the blob with the last of them, its bytes freed once
    monkeypatch.setenv(cache_cli.MAX_ENV, "1")
    df = pd.DataFrame({"status": ["PASS"], "cached": [True]})
    done = cache_cli.after_run(str(root), df, tmp_path / "no-run-folder")
    gone = [i.path for i in done.removed]
    assert gone == [*folders[1:], blob] and not blob.exists()
    assert done.freed == bytes_of[folders[1]] + bytes_of[folders[2]] + size
    assert done.after == sum(i.bytes for i in cache_cli.inventory(root))
    assert "cache: pruned 3 entries" in " ".join(capsys.readouterr().out.split())
