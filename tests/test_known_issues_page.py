"""docs/known-issues.md shows each entry's root cause (``source``: the file and line linked at the
runtime commit, and why) and its tracker searches (``searched``), compactly; an entry without
them renders as before."""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMIT = "cff6f4dd32e630945b7188512c1f2b4f102b05ad"


def generator():
    spec = importlib.util.spec_from_file_location("gen_known_issues",
                                                  ROOT / "docs" / "gen_known_issues.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_source_and_searches_show_in_the_entry_section():
    gen = generator()
    page = gen.render([
        {"id": "a-bug", "backend": "vulkan", "title": "t", "statuses": ["MISMATCH"],
         "upstream": None, "fixed_in": None,
         "source": {"path": "backends/vulkan/x.glsl", "line": 57, "anchor": "a", "commit": COMMIT,
                    "why": "the  index\\n advances"},
         "searched": [{"date": "2026-12-07", "query": "vulkan x wrong", "result": "none"},
                      {"date": "2026-12-07", "query": "x tracker",
                       "result": "https://github.com/pytorch/executorch/issues/19854"}]},
        {"id": "b-bug", "backend": "xnnpack", "title": "u", "statuses": ["LOWER_ERROR"],
         "upstream": None, "fixed_in": None},
    ])
    a = page.split("\n## a-bug\n")[1].split("\n## ")[0]
    assert (f"- root cause: [`backends/vulkan/x.glsl:57`](https://github.com/pytorch/executorch/"
            f"blob/{COMMIT}/backends/vulkan/x.glsl#L57) at {COMMIT[:10]}: the index\\n advances"
            in a)
    assert ("- tracker searched: 2026-12-07: `vulkan x wrong` -> none; `x tracker` -> "
            "[#19854](https://github.com/pytorch/executorch/issues/19854)") in a
    b = page.split("\n## b-bug\n")[1]
    assert "root cause" not in b and "tracker searched" not in b
    assert "2 entries; 2 not reported upstream; 1 with the tracker searches" in page


def test_the_shipped_page_shows_every_source_and_search():
    gen = generator()
    entries = json.loads(gen.SOURCE.read_text())
    page = gen.TARGET.read_text()
    with_source = [e for e in entries if e.get("source")]
    with_search = [e for e in entries if e.get("searched")]
    assert with_source and with_search
    assert page.count("\n- root cause: ") == len(with_source)
    assert page.count("\n- tracker searched: ") == len(with_search)
    for e in with_source:
        assert f"/blob/{e['source']['commit']}/{e['source']['path']}#L{e['source']['line']}" in page
