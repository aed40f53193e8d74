"""The cache digest (versions.digest_of: the modules harness/stages/ imports inside the package,
walked transitively, issue #49) covers what decides a cached outcome and nothing else: drawing a picture decides none, so editing
the drawing code leaves every cached lowering valid."""

import shutil
from pathlib import Path

from harness import versions
from harness.results import pictures
from harness.stages import fingerprint

PACKAGE = Path(versions.__file__).resolve().parent


def _copy(tmp_path) -> Path:
    copy = tmp_path / "harness"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def test_the_drawing_module_is_not_among_the_digested_files():
    digested = set(versions.digested_sources())
    assert Path(pictures.__file__).resolve() not in digested
    assert Path(fingerprint.__file__).resolve() in digested  # the classifier decides a verdict


def test_no_digested_module_draws():
    """matplotlib is the drawing: no module in the digest's scope may use it."""
    drawing = [p for p in versions.digested_sources() if "matplotlib" in p.read_text()]
    assert drawing == []


def test_editing_the_drawing_code_leaves_the_digest_unchanged(tmp_path):
    copy = _copy(tmp_path)
    before = versions.digest_of(copy)
    drawing = copy / Path(pictures.__file__).resolve().relative_to(PACKAGE)
    text = drawing.read_text()
    assert '"magma"' in text  # the colour map, the kind of edit meant here
    drawing.write_text(text.replace('"magma"', '"viridis"') + "\n# a new layout\n")
    assert versions.digest_of(copy) == before


def test_editing_the_classifier_changes_the_digest(tmp_path):
    """The counterpart: the fingerprint's rules (its text keys findings) are in the digest."""
    copy = _copy(tmp_path)
    before = versions.digest_of(copy)
    with open(copy / "stages" / "fingerprint.py", "a") as fh:
        fh.write("\nHOT = 0.4\n")
    assert versions.digest_of(copy) != before
