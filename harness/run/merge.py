"""``harness merge SHARD_DIR... --out DIR``: shard folders -> one run folder, as if unsharded.

Refuses, with one line naming the shard and the difference, shards that are not one run: other
versions (executorch, torch, the pipeline's own code), another configuration (backends, fixes,
profile, examples, seed, case files), another Vulkan runtime or device, another ExecuTorch tree
(a run at a commit or tree: its commit, dirty or not, its Python and Vulkan digests), other
cases, a shard missing or given twice, or a shard whose cells are not all there (resume it
first).
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
from pathlib import Path

from harness.run import journal
from harness.results import matrix
from harness.results.findings import per_minute
from harness.run import runner
from harness.record import CellResult
from harness.header import RunHeader
from harness.runfolder import RunFolder, RunFolderError, new_run_id
from harness.spec import CaseError, ConvCase

# What must agree for shards to be parts of one run. Paths, times, jobs and the cache folder
# may differ from machine to machine; the runtime is compared by its source and device, not path.
SAME = ("versions", "registered_backends", "backends", "fixes", "profile", "max_examples",
        "seed", "case_files", "timeout")
SAME_VULKAN = ("source_commit", "executorch_version", "devices")
# A run at an ExecuTorch tree (run.json's executorch_tree): the tree by what it is, not where it
# lies (its path and plug-in path may differ from machine to machine).
SAME_TREE = ("commit", "dirty", "python_digest", "vulkan_digest")


class MergeError(Exception):
    """One line: why these folders are not the shards of one run."""


def _header(d: Path) -> RunHeader:
    try:
        return RunFolder(d).header()
    except RunFolderError as e:
        raise MergeError(str(e)) from None


def _identity(h: RunHeader) -> dict:
    vulkan, tree = h.vulkan or {}, h.executorch_tree or {}
    return {**{k: getattr(h, k) for k in SAME}, **{f"vulkan.{k}": vulkan.get(k) for k in SAME_VULKAN},
            **{f"executorch_tree.{k}": tree.get(k) for k in SAME_TREE}}


def check(dirs: list[Path]) -> list[RunHeader]:
    headers = [_header(d) for d in dirs]
    for d, h in zip(dirs, headers, strict=True):
        if not h.shard:
            raise MergeError(f"{d}: not a shard (its run has no --shard)")
    n = {int(h.shard.split("/")[1]) for h in headers}
    if len(n) != 1:
        raise MergeError(f"shards of different splits: {sorted(h.shard for h in headers)}")
    n = n.pop()
    ks = sorted(int(h.shard.split("/")[0]) for h in headers)
    if ks != list(range(1, n + 1)):
        missing = sorted(set(range(1, n + 1)) - set(ks))
        twice = sorted({k for k in ks if ks.count(k) > 1})
        raise MergeError(f"need shards 1..{n} once each: missing {missing}, repeated {twice}")
    first, base = dirs[0], _identity(headers[0])
    cases = (first / "cases.json").read_text()
    for d, h in zip(dirs[1:], headers[1:], strict=True):
        other = _identity(h)
        for k in base:
            if other[k] != base[k]:
                raise MergeError(f"{d} differs from {first} in {k}: {other[k]!r} vs {base[k]!r}")
        if (d / "cases.json").read_text() != cases:
            raise MergeError(f"{d} has other cases than {first} (cases.json differs)")
    return headers


def merge(dirs: list[Path], out: Path) -> int:
    """Write the merged run into ``out`` (which must not hold a run); -> number of cells."""
    headers = check(dirs)
    if (out / "run.json").exists() or (out / "journal.jsonl").exists():
        raise MergeError(f"{out} already holds a run; merge into a new folder")
    config, cases = runner.load_run(dirs[0])
    rows: dict[tuple, CellResult] = {}
    for d, h in zip(dirs, headers, strict=True):
        read = journal.read(d / "journal.jsonl")
        if read.problems:
            raise MergeError(f"{d}/journal.jsonl: {read.problems[0]}")
        config.shard = h.shard
        expected = {runner.cell_key(c, lane) for c, lane in runner.cells(cases, config)}
        got = {CellResult.from_row(r).key: CellResult.from_row(r) for r in read.rows}
        if set(got) != expected:
            raise MergeError(f"{d} (shard {h.shard}) is incomplete: {len(expected & set(got))}"
                             f" of {len(expected)} cells; finish it with --resume {d}")
        rows.update(got)
    config.shard = None
    ordered = [rows[runner.cell_key(c, lane)] for c, lane in runner.cells(cases, config)]
    out.mkdir(parents=True, exist_ok=True)
    (out / "cases.json").write_text((dirs[0] / "cases.json").read_text())
    merged = dataclasses.replace(
        headers[0], run_id=new_run_id(), shard=None, merged_from=[h.run_id for h in headers],
        shards={h.shard: {"duration_s": h.duration_s, "cells": h.cells, "started": h.started}
                for h in headers},
        duration_s=max(h.duration_s or 0 for h in headers), cells=len(ordered))
    j = journal.Journal(out / "journal.jsonl")
    for r in ordered:
        j.append(r.to_row())
    matrix.write(matrix.frame([r.to_row() for r in ordered]), out)
    RunFolder(out).write_header(merged)
    for d in dirs:  # the MISMATCH cells' evidence (their pictures)
        RunFolder(out).copy_evidence_from(RunFolder(d))
    _merge_shrunk(dirs, out)
    return len(ordered)


def _size(entry: dict) -> tuple:
    """How big a shrunk case is (elements in, channel pairs, rank): the smaller is kept."""
    try:
        c = ConvCase.from_dict(entry["case"])
    except (CaseError, KeyError, TypeError):
        return (math.inf,)
    return (math.prod(c.input_shape), c.in_channels * c.out_channels, c.dim, c.case_id)


def shrunk_of_shards(per_shard: list[dict]) -> tuple[dict, list[int]]:
    """The shards' shrunk.json contents -> (one entry per finding, which shard gave it). A finding
    in several shards was shrunk in each (a shard cannot know the others): its smallest minimal
    case is kept, and its tries and seconds are the sum over the shards that shrank it."""
    out: dict = {}
    source: dict = {}
    for k, entries in enumerate(per_shard):
        for fid, entry in entries.items():
            if fid not in out:
                out[fid], source[fid] = dict(entry), k
                continue
            kept = out[fid]
            tries = (kept.get("tries") or 0) + (entry.get("tries") or 0)
            seconds = round((kept.get("seconds") or 0) + (entry.get("seconds") or 0), 1)
            if _size(entry) < _size(kept):
                out[fid], source[fid] = dict(entry), k
            out[fid].update(tries=tries, seconds=seconds, tries_per_min=per_minute(tries, seconds))
    return out, [source[fid] for fid in out]


def _merge_shrunk(dirs: list[Path], out: Path) -> None:
    """shrunk.json (--shrink in the shards) of the merged run, each kept case's repro script
    copied from the shard that found it."""
    per_shard = [json.loads((d / "shrunk.json").read_text()) if (d / "shrunk.json").exists()
                 else {} for d in dirs]
    if not any(per_shard):
        return
    merged, sources = shrunk_of_shards(per_shard)
    for (fid, entry), k in zip(merged.items(), sources, strict=True):
        if entry.get("repro") and (dirs[k] / entry["repro"]).exists():
            (out / "repro").mkdir(exist_ok=True)
            shutil.copy2(dirs[k] / entry["repro"], out / entry["repro"])
    (out / "shrunk.json").write_text(json.dumps(merged, indent=1))
