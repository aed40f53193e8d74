"""The jinja2 environment of every page and script the results write (reports/templates/):
the run report, the releases page, a bisect page, repro scripts."""

from __future__ import annotations

from pathlib import Path

import jinja2

TEMPLATES = Path(__file__).resolve().parents[2] / "reports" / "templates"


def environment() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)),
                              autoescape=lambda name: bool(name) and name.endswith(".html.j2"),
                              undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
