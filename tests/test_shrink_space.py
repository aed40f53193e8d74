"""The shrinker's search space (harness/run/shrink.py ``neighbours``) keeps every field a finding
can hinge on: a channels-last or dynamic finding must be able to shrink to a smaller case that is
still channels-last or dynamic (issue 39: 23 of 36 such findings did not shrink while the space
dropped the layout fields), and everything shrinks towards contiguous and static."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, find, settings

from harness.run.shrink import neighbours
from harness.spec import ConvCase
from harness.stages.build import eager_check

CASES = [ConvCase.from_dict(c["case"])
         for c in json.loads((Path(__file__).parent.parent / "cases"
                              / "memory_format_dynamic.json").read_text())]
LAYOUT = [c for c in CASES if c.memory_format != "contiguous" or c.module_channels_last
          or c.dynamic != "none"]
SETTINGS = settings(database=None, deadline=None, max_examples=2000,
                    phases=[Phase.generate, Phase.shrink], suppress_health_check=list(HealthCheck))


def _layout(c: ConvCase) -> tuple:
    return (c.memory_format, c.module_channels_last, c.dynamic, c.dynamic_axes())


def test_the_corpus_has_layout_cases():
    assert len(LAYOUT) >= 5, [c.case_id for c in CASES]


@pytest.mark.parametrize("case", LAYOUT, ids=lambda c: c.case_id)
def test_a_layout_finding_shrinks_to_a_smaller_case_with_the_same_layout(case):
    # the predicate a finding hinging on the layout alone would give: the shrinker's answer
    # keeps the layout, and each size the program runs at is a size of the neighbour's conv
    found = find(neighbours(case).filter(lambda c: not eager_check(c)),
                 lambda c: _layout(c) == _layout(case), settings=SETTINGS)
    assert _layout(found) == _layout(case)
    assert len(found.dynamic_sizes) == len(case.dynamic_sizes)
    for size in found.dynamic_sizes:
        assert size[1] == found.in_channels and len(size) == found.dim + 2


@pytest.mark.parametrize("case", LAYOUT, ids=lambda c: c.case_id)
def test_the_layout_itself_shrinks_towards_contiguous_and_static(case):
    found = find(neighbours(case), lambda c: True, settings=SETTINGS)
    assert (found.memory_format, found.module_channels_last, found.dynamic,
            found.dynamic_sizes) == ("contiguous", False, "none", ())
