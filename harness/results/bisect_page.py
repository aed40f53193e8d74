"""A finished bisect (``bisect.json``) -> ``bisect.html``: the ends, the direction, the first
commit with its PR and files (or the range skips leave), and every step with its verdict,
outcome, seconds, what it rests on and why it was skipped. Reads the JSON only (no run
machinery)."""

from __future__ import annotations

import json
from pathlib import Path

from harness.results.report import environment

PR_URL = "https://github.com/pytorch/executorch/pull/{}"
COMMIT_URL = "https://github.com/pytorch/executorch/commit/{}"


def write(out: Path, result: dict | None = None) -> Path:
    result = result if result is not None else json.loads((out / "bisect.json").read_text())
    terms = result["terms"]
    steps = []
    for s in result["steps"]:
        steps.append({**s, "term": terms.get(s.get("verdict"), s.get("verdict") or "skip"),
                      "short": s["commit"][:12]})
    page = environment().get_template("bisect.html.j2").render(
        r=result, steps=steps, terms=terms, pr_url=PR_URL, commit_url=COMMIT_URL)
    path = out / "bisect.html"
    path.write_text(page)
    return path
