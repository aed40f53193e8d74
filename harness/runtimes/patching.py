"""Source patches for a runtime plug-in: fixes for runtime bugs the harness found, kept as plain
unified diffs in ``patches/`` and applied to the extracted ExecuTorch source before a build.

``patches/NAME.diff``
    One fix. Paths are relative to the ExecuTorch source root (``a/backends/vulkan/...``,
    ``git apply`` / ``patch -p1`` style). The lines before the first ``--- `` are its header:
    the first reads ``NAME: one-line summary``; a line starting ``Trees:`` names the source
    trees (commits, at least 7 hex digits) it is meant to apply to; a paragraph starting
    ``Needs:`` names the patches that must be applied with it (``Needs: a, b`` then why):
    asking for it brings them in (``resolve``).
``patches/NAME@COMMIT12.diff``
    A variant of NAME for the source tree at that commit (its first 12 hex digits), used there
    instead of ``NAME.diff`` (e.g. a file the patch touches does not exist in an older tree).

Patches are applied in name order, strictly: every hunk must match its context exactly
(it may have moved, never fuzzed); otherwise nothing is written and the build stops with one
line naming the patch, the source tree and the first hunk that did not match.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from harness.runtimes import RuntimeBuildError

PATCH_DIR = Path(__file__).resolve().parent / "patches"
SUFFIX = ".diff"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_COMMIT = re.compile(r"\b(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b")
_NEEDS = re.compile(r"^Needs:\s*([A-Za-z0-9][A-Za-z0-9._-]*(?:\s*,\s*[A-Za-z0-9][A-Za-z0-9._-]*)*)")


@dataclass(frozen=True)
class Patch:
    name: str
    path: Path                      # NAME.diff
    summary: str                    # the header's first line, without "NAME: "
    header: str                     # every line before the first "--- "
    trees: tuple = ()               # commit prefixes the header's "Trees:" line claims
    needs: tuple = ()               # patch names its "Needs:" line says must come with it
    variants: dict = field(default_factory=dict)  # commit[:12] -> NAME@COMMIT12.diff

    def file_for(self, commit: str) -> Path:
        """The diff to apply to the source at ``commit`` (its variant, if it has one)."""
        return self.variants.get(commit[:12], self.path)

    def claims(self, commit: str) -> bool:
        return any(commit.startswith(t) for t in self.trees)

    def applied(self, commit: str) -> dict:
        """What a manifest records about this patch applied to ``commit``."""
        f = self.file_for(commit)
        return {"name": self.name, "file": f.name,
                "sha256": hashlib.sha256(f.read_bytes()).hexdigest()}


def _header(text: str) -> str:
    lines = []
    for line in text.splitlines():
        if line.startswith(("--- ", "diff --git ")):
            break
        lines.append(line)
    return "\n".join(lines).strip()


def _read(path: Path, variants: dict) -> Patch:
    name = path.name[: -len(SUFFIX)]
    header = _header(path.read_text(errors="replace"))
    first = header.splitlines()[0] if header else ""
    summary = first[len(name) + 1:].strip() if first.startswith(f"{name}:") else first
    trees: list[str] = []
    in_trees = False
    for line in header.splitlines():
        if line.startswith("Trees:"):
            in_trees = True
        elif not line.strip():
            in_trees = False
        if in_trees:
            trees += _COMMIT.findall(line)
    needs = [n.strip().rstrip(".") for line in header.splitlines() if (m := _NEEDS.match(line))
             for n in m.group(1).split(",")]
    return Patch(name, path, summary, header, tuple(dict.fromkeys(trees)),
                 needs=tuple(dict.fromkeys(needs)), variants=variants)


def list_patches(directory: Path | None = None) -> list[Patch]:
    """The available patches (name, one-line summary, claimed trees, per-tree variants),
    by name."""
    directory = Path(directory) if directory else PATCH_DIR
    files = sorted(directory.glob(f"*{SUFFIX}")) if directory.is_dir() else []
    variants: dict[str, dict] = {}
    for f in files:
        stem = f.name[: -len(SUFFIX)]
        if "@" in stem:
            name, commit = stem.split("@", 1)
            variants.setdefault(name, {})[commit[:12]] = f
    return [_read(f, variants.get(f.name[: -len(SUFFIX)], {}))
            for f in files if "@" not in f.name]


def resolve(names, directory: Path | None = None) -> tuple[Patch, ...]:
    """Patch names -> patches with every patch they need (their ``Needs:``, transitively),
    deduplicated, in name order (the order they are applied in, so one set has one cache key
    whatever order it was asked in). RuntimeBuildError (one line) naming an unknown name and
    the available ones, an unknown needed name and who needs it, or a cycle of needs."""
    known = {p.name: p for p in list_patches(directory)}
    have = ", ".join(known) or "none"
    for name in names or ():
        if name not in known:
            raise RuntimeBuildError(f"unknown patch {name!r} (available: {have})")
    chosen: dict[str, Patch] = {}

    def add(name: str, path: tuple) -> None:
        if name in path:
            cycle = " -> ".join(path[path.index(name):] + (name,))
            raise RuntimeBuildError(f"patch {path[-1]!r} needs {name!r}: a cycle of needs "
                                    f"({cycle})")
        if name in chosen:
            return
        if name not in known:
            raise RuntimeBuildError(f"patch {path[-1]!r} needs unknown patch {name!r} "
                                    f"(available: {have})")
        for needed in known[name].needs:
            add(needed, path + (name,))
        chosen[name] = known[name]

    for name in names or ():
        add(name, ())
    return tuple(sorted(chosen.values(), key=lambda p: p.name))


def digest(applied: list[dict]) -> str:
    """sha256 over the applied patches' names and contents: a patch set's identity."""
    material = json.dumps([[a["name"], a["sha256"]] for a in applied])
    return hashlib.sha256(material.encode()).hexdigest()


# --- applying -----------------------------------------------------------------------------

@dataclass
class _Hunk:
    header: str
    old_start: int
    old: list           # lines (with their line ends) the hunk expects
    new: list           # lines it leaves


@dataclass
class _FilePatch:
    old_path: str | None  # None: the patch creates the file
    new_path: str | None  # None: the patch deletes it
    hunks: list


class PatchError(RuntimeBuildError):
    """A patch is malformed or does not apply; the message is one line."""


def _strip(path: str) -> str | None:
    path = path.split("\t")[0].strip()
    if path == "/dev/null":
        return None
    parts = path.split("/", 1)  # -p1
    if len(parts) != 2 or not parts[1] or ".." in parts[1].split("/") or parts[1].startswith("/"):
        raise PatchError(f"bad path {path!r}")
    return parts[1]


def parse(text: str) -> list[_FilePatch]:
    """A unified diff -> its file patches. PatchError (one line) when it is malformed."""
    lines = text.splitlines(keepends=True)
    files: list[_FilePatch] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            fp = _FilePatch(_strip(line[4:]), _strip(lines[i + 1][4:]), [])
            if fp.old_path is None and fp.new_path is None:
                raise PatchError(f"line {i + 1}: both sides are /dev/null")
            files.append(fp)
            i += 2
            continue
        if line.startswith("@@"):
            if not files:
                raise PatchError(f"line {i + 1}: a hunk before any '---'/'+++' file header")
            m = _HUNK.match(line)
            if not m:
                raise PatchError(f"line {i + 1}: malformed hunk header {line.strip()!r}")
            old_n = int(m.group(2)) if m.group(2) is not None else 1
            new_n = int(m.group(4)) if m.group(4) is not None else 1
            hunk = _Hunk(line.strip(), int(m.group(1)), [], [])
            i += 1
            seen_old = seen_new = 0
            while seen_old < old_n or seen_new < new_n:
                if i >= len(lines):
                    raise PatchError(f"hunk {hunk.header!r} of {files[-1].new_path or files[-1].old_path}: "
                                     f"ends early (expected {old_n} old / {new_n} new lines)")
                body = lines[i]
                tag, rest = body[:1], body[1:]
                if body in ("\n", "\r\n"):  # an empty context line whose space was stripped
                    tag, rest = " ", body
                if tag == " ":
                    hunk.old.append(rest)
                    hunk.new.append(rest)
                    seen_old += 1
                    seen_new += 1
                elif tag == "-":
                    hunk.old.append(rest)
                    seen_old += 1
                elif tag == "+":
                    hunk.new.append(rest)
                    seen_new += 1
                elif tag == "\\":
                    pass
                else:
                    raise PatchError(f"line {i + 1}: unexpected {body.rstrip()[:40]!r} inside hunk "
                                     f"{hunk.header!r} (counts do not match its header)")
                i += 1
                if i < len(lines) and lines[i].startswith("\\"):  # "\ No newline at end of file"
                    if tag in (" ", "-") and hunk.old:
                        hunk.old[-1] = hunk.old[-1].rstrip("\r\n")
                    if tag in (" ", "+") and hunk.new:
                        hunk.new[-1] = hunk.new[-1].rstrip("\r\n")
                    i += 1
            if seen_old != old_n or seen_new != new_n:
                raise PatchError(f"hunk {hunk.header!r}: counts do not match its header")
            files[-1].hunks.append(hunk)
            continue
        i += 1  # header text, "diff --git", "index ..." lines
    if not files:
        raise PatchError("no '---'/'+++' file header: not a unified diff")
    for fp in files:
        if not fp.hunks:
            raise PatchError(f"{fp.new_path or fp.old_path}: a file header without hunks")
    return files


def _find(lines: list, want: list, expected: int, lowest: int) -> int:
    """Where ``want`` occurs in ``lines``, at ``expected`` or nearest to it, not before
    ``lowest``; -1 when nowhere."""
    n = len(want)
    last = len(lines) - n
    if last < lowest:
        return -1
    expected = min(max(expected, lowest), last)
    for d in range(0, max(expected - lowest, last - expected) + 1):
        for pos in (expected - d, expected + d) if d else (expected,):
            if lowest <= pos <= last and lines[pos:pos + n] == want:
                return pos
    return -1


def apply_text(text: str, root: Path, label: str = "") -> list[str]:
    """Apply the unified diff ``text`` to the tree at ``root``: all files or none. -> the paths
    it changed. PatchError (one line, naming ``label``, the file and the first hunk that does
    not match) when it does not apply."""
    where = f"{label}: " if label else ""
    try:
        files = parse(text)
    except PatchError as e:
        raise PatchError(f"{where}malformed patch: {e}") from None
    results: dict[str, str | None] = {}
    for fp in files:
        target = fp.old_path or fp.new_path
        path = root / target
        if fp.old_path is None:
            if path.exists() or target in results:
                raise PatchError(f"{where}{target}: the patch creates it, but it already exists")
            lines: list = []
        else:
            if target in results:
                current = results[target]
                if current is None:
                    raise PatchError(f"{where}{target}: patched after the patch deleted it")
            elif not path.is_file():
                raise PatchError(f"{where}{target}: no such file in this source tree "
                                 f"(first hunk {fp.hunks[0].header})")
            else:
                current = path.read_bytes().decode("utf-8", errors="surrogateescape")
            lines = current.splitlines(keepends=True)
        offset = 0
        lowest = 0
        for k, hunk in enumerate(fp.hunks, 1):
            # A hunk that only adds lines (old count 0) is anchored after line old_start.
            expected = (hunk.old_start - 1 if hunk.old else hunk.old_start) + offset
            pos = _find(lines, hunk.old, expected, lowest) if hunk.old else \
                (expected if lowest <= expected <= len(lines) else -1)
            if pos < 0:
                first = next((ln.strip() for ln in hunk.old if ln.strip()), "")
                raise PatchError(f"{where}{target}: hunk #{k} {hunk.header} does not match "
                                 f"(context from {first[:60]!r} not found)")
            lines[pos:pos + len(hunk.old)] = hunk.new
            offset += len(hunk.new) - len(hunk.old)
            lowest = pos + len(hunk.new)
        results[target] = None if fp.new_path is None else "".join(lines)
    for target, content in results.items():
        path = root / target
        if content is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode("utf-8", errors="surrogateescape"))
    return list(results)


def apply(patch: Patch, root: Path, commit: str, source_label: str) -> dict:
    """Apply ``patch`` (its variant for ``commit``) to the source tree at ``root``.
    -> the manifest record (name, file, sha256, changed files)."""
    f = patch.file_for(commit)
    label = f"patch {patch.name} ({f.name}) does not apply to {source_label}"
    record = patch.applied(commit)
    record["files"] = apply_text(f.read_text(errors="surrogateescape"), root, label)
    return record
