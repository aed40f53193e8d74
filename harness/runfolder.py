"""A run folder and everything in it, in one place: what each file is, how it is read and
written, and the run's identity.

    run.json        the header (header.RunHeader, with its schema_version): run_id, versions,
                    configuration, runtime, devices, times
    cases.json      the run's cases (ConvCase dicts), in order
    journal.jsonl   one CellResult row per finished cell (run/journal.py), for --resume
    matrix.csv/json the matrix (results/matrix.py writes it from the CellResults)
    findings.json/md, junit.xml, report.html, repro/, logs/
    evidence/       one .npz per MISMATCH cell (fingerprint.evidence: the drawn |out - ref|),
                    written when the cell is recorded, named like its repro script
    pictures/       one PNG of |out - ref| per MISMATCH finding (F-....png), from evidence/

A run is known by ``run_id`` (written once into run.json when the run starts), never by its
path: a folder copied or moved (a CI artifact downloaded by the next job) is the same run, and
bundles, ingest, merge, diff, resume and repro work on it there. Every read of a file that is
not there or not readable is one ``RunFolderError`` line naming the file.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path

from harness.header import HeaderError, RunHeader
from harness.spec import ConvCase


class RunFolderError(ValueError):
    """One line: which file of which folder is missing or unreadable."""


def atomic_write(path: Path, text: str) -> None:
    """Write via a temporary file and a rename: a killed process never leaves half a file."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


REPRO_NAME_MAX = 160  # bytes; file systems refuse names over 255, and a run folder must copy anywhere


def repro_name(case_id: str, lane_backend: str, fixes: str) -> str:
    """The repro script's file name for a cell (backend column incl. @device, fixes column).
    A lane with many fixes is named by their count and a digest of the fixes column, so the
    name stays within what every file system accepts (the script itself names every fix)."""
    name = f"{case_id}__{lane_backend}{'+' + fixes.replace(',', '+') if fixes else ''}.py"
    if len(name.encode()) <= REPRO_NAME_MAX:
        return name
    digest = hashlib.sha256(fixes.encode()).hexdigest()[:10]
    return f"{case_id}__{lane_backend}+{len(fixes.split(','))}-fixes-{digest}.py"


class RunFolder:
    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def __truediv__(self, name: str) -> Path:
        return self.path / name

    def __str__(self) -> str:
        return str(self.path)

    # --- files --------------------------------------------------------------------------------
    @property
    def header_path(self) -> Path:
        return self.path / "run.json"

    @property
    def cases_path(self) -> Path:
        return self.path / "cases.json"

    @property
    def journal_path(self) -> Path:
        return self.path / "journal.jsonl"

    @property
    def repro_dir(self) -> Path:
        return self.path / "repro"

    def repro_path(self, case_id: str, backend: str, fixes: str) -> Path:
        return self.repro_dir / repro_name(case_id, backend, fixes)

    # --- a MISMATCH cell's evidence, a finding's picture -----------------------------------------
    # Paths are the folder's own: a run folder copied or moved keeps them (nothing absolute is
    # stored anywhere); a folder without them (older runs) simply has no pictures.
    @property
    def evidence_dir(self) -> Path:
        return self.path / "evidence"

    def evidence_path(self, case_id: str, backend: str, fixes: str) -> Path:
        return self.evidence_dir / (repro_name(case_id, backend, fixes)[:-len(".py")] + ".npz")

    def write_evidence(self, case_id: str, backend: str, fixes: str, evidence: dict) -> Path:
        """fingerprint.evidence -> evidence/NAME.npz (via a temporary file and a rename)."""
        import numpy as np

        path = self.evidence_path(case_id, backend, fixes)
        path.parent.mkdir(exist_ok=True)
        tmp = path.with_name(path.name + ".tmp.npz")
        np.savez_compressed(tmp, **evidence)
        os.replace(tmp, path)
        return path

    def evidence(self, case_id: str, backend: str, fixes: str) -> dict | None:
        """A cell's evidence, or None when the folder has none for it (or it is unreadable)."""
        import numpy as np

        path = self.evidence_path(case_id, backend, fixes)
        try:
            with np.load(path, allow_pickle=False) as data:
                return {k: data[k] for k in data.files}
        except (OSError, ValueError):
            return None

    def copy_evidence_from(self, other: RunFolder) -> int:
        """Another folder's evidence files into this one (merge of shards); -> files copied."""
        import shutil

        if not other.evidence_dir.is_dir():
            return 0
        self.evidence_dir.mkdir(exist_ok=True)
        n = 0
        for f in other.evidence_dir.glob("*.npz"):
            shutil.copyfile(f, self.evidence_dir / f.name)
            n += 1
        return n

    @property
    def pictures_dir(self) -> Path:
        return self.path / "pictures"

    def picture_path(self, finding_id: str) -> Path:
        return self.pictures_dir / f"{finding_id}.png"

    def relative(self, path: Path) -> str:
        """A path inside the folder as the folder's files name it (POSIX, relative)."""
        return Path(path).relative_to(self.path).as_posix()

    def _json(self, path: Path):
        try:
            return json.loads(path.read_text())
        except FileNotFoundError:
            raise RunFolderError(f"{self.path}: not a convconf run folder (no {path.name})") from None
        except (OSError, ValueError) as e:
            raise RunFolderError(f"{path}: unreadable ({str(e).splitlines()[0]})") from None

    # --- header: the one reader and writer of run.json (harness/header.py) ---------------------
    def header(self) -> RunHeader:
        try:
            return RunHeader.from_dict(self._json(self.header_path))
        except HeaderError as e:
            raise RunFolderError(f"{self.header_path}: {e}") from None

    def header_or_empty(self) -> RunHeader:
        """For outputs that can do without (a bare matrix folder): an empty header when there
        is none (a header that is there but unreadable or too new still raises)."""
        if not self.header_path.exists():
            return RunHeader()
        return self.header()

    def write_header(self, header: RunHeader | dict) -> RunHeader:
        header = RunHeader.coerce(header)
        header.run_id = header.run_id or new_run_id()
        atomic_write(self.header_path, json.dumps(header.to_dict(), indent=1))
        return header

    def update_header(self, **values) -> RunHeader:
        return self.write_header(self.header().update(**values))

    @property
    def run_id(self) -> str:
        return self.header().identity

    # --- cases --------------------------------------------------------------------------------
    def cases(self) -> list[ConvCase]:
        data = self._json(self.cases_path)
        try:
            return [ConvCase.from_dict(c) for c in data]
        except (TypeError, ValueError) as e:
            raise RunFolderError(f"{self.cases_path}: {str(e).splitlines()[0]}") from None

    def write_cases(self, cases: list[ConvCase]) -> None:
        atomic_write(self.cases_path, json.dumps([c.to_dict() for c in cases], indent=1))

    # --- cells --------------------------------------------------------------------------------
    def cells(self) -> list:
        """The run's CellResults, from matrix.json (in matrix order)."""
        from harness.record import CellResult

        path = self.path / "matrix.json"
        rows = self._json(path)
        if not isinstance(rows, list) or (rows and not {"case_id", "backend", "fixes", "status"}
                                          <= set(rows[0])):
            raise RunFolderError(f"{path}: not a convconf matrix")
        return [CellResult.from_row(r) for r in rows]


def new_run_id() -> str:
    return uuid.uuid4().hex[:16]
