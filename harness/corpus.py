"""The regression corpus in cases/: case files grown from runs (``--save-failures``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from .spec import ConvCase, load_cases
from .status import OK


def save_failures(df, cases: list[ConvCase], path: str | os.PathLike) -> int:
    """Add the case of every cell outside OK to a case file; -> number of new cases."""
    path = Path(path)
    existing = load_cases(str(path)) if path.exists() else []
    known = {c.case_id for c in existing}
    by_id = {c.case_id: c for c in cases}
    failing = df[~df["status"].isin([s.value for s in OK])]["case_id"].unique()
    new = [by_id[i] for i in failing if i in by_id and i not in known]
    if new:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps([c.to_dict() for c in existing + new], indent=1) + "\n")
        os.replace(tmp, path)
    return len(new)
