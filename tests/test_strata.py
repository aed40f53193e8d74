"""The quick default is a fair first look: its cases reach every known finding family and every
axis a newcomer reads the matrix by, drawn by Hypothesis and reproducible by --seed. A property
of the generated cases (no execution): which family a cell then shows is the delegate's."""

import dataclasses

import pytest
from hypothesis import given, strategies as st

from harness.generation.generate import PROFILES, generate
from harness.generation.strata import SIZE_FAMILIES, STRATA, stratum
from harness.results import known_issues
from harness.stages.build import eager_check

ISSUES = known_issues.load(known_issues.KNOWN_ISSUES_FILE)
BY_ID = {issue.id: issue for issue in ISSUES}
QUICK = PROFILES["ci"]  # README command 1's run


# Axes the strata do not draw (the nightly profile does, issue 39; strata.BY_SHAPE): a ``when``
# on them is read as met here, so a family defined by them is reached by its row's shape.
UNDRAWN = ("memory_format", "module_channels_last", "dynamic")


def in_family(issue, case) -> bool:
    """The case meets the issue's ``when`` on the axes the strata draw (its message and status
    are the delegate's to show)."""
    loose = dataclasses.replace(issue, message=None, error_pattern=None, component=None,
                                when=tuple(c for c in issue.when if c[0] not in UNDRAWN))
    return loose.matches(issue.backend, known_issues.features(case), issue.statuses[0], "")


def families_reached(cases) -> set:
    return {issue.id for issue in ISSUES if any(in_family(issue, c) for c in cases)}


def check_quick_default(seed: int) -> None:
    cases = generate(QUICK, seed)
    assert len(cases) == QUICK
    assert families_reached(cases) == set(BY_ID) - SIZE_FAMILIES, seed  # sizes: SIZE_STRATA
    # the axes: every spelling in 1d and 2d (a full-rank tuple in 1d is a length-1 list),
    # float and int8 in both dimensions, both int8 schemes
    axes = {(c.padding_spelling, c.dim) for c in cases}
    assert axes >= {(s, d) for s in ("int", "list1", "valid", "same") for d in (1, 2)} | {("tuple", 2)}
    assert {(c.quant is None, c.dim) for c in cases if c.dim < 3} == {(q, d) for q in (True, False)
                                                                      for d in (1, 2)}
    assert any(c.dim == 3 for c in cases)  # the Conv3d the portable kernel refuses
    assert {c.quant for c in cases} == {None, "int8_per_tensor", "int8_per_channel"}
    # the families the brief names, by their shape (not only by the known-issues file's words)
    assert any(c.quant and c.dim == 1 and c.padding == "same" and c.kernel_parity == "even"
               for c in cases)  # XNNPACK int8 conv1d "same", even kernel
    assert any(c.padding_mode == "replicate" for c in cases)
    assert any(c.transposed and max(c.spatial("dilation")) > 1 and c.output_padding != 0
               for c in cases)  # XNNPACK transposed with dilation and output_padding


@pytest.mark.parametrize("seed", [0, 1, 2, 7, 12345])
def test_the_quick_default_reaches_every_known_finding_family(seed):
    check_quick_default(seed)


def test_many_seeds_reach_every_family():
    # generate() runs Hypothesis itself (no nested @given): seeds as data, a wide spread of them
    for seed in [*range(20), 2**31 - 1, 987654321]:
        check_quick_default(seed)


def test_every_row_names_known_families_and_the_rows_cover_them_all():
    named = {f for row in STRATA for f in row.families}
    assert named <= set(BY_ID), named - set(BY_ID)  # a renamed known issue fails here
    # a new known issue needs a row (or a row's family) here, a size-only one a size row
    assert named | SIZE_FAMILIES == set(BY_ID) and not named & SIZE_FAMILIES
    assert len(STRATA) <= QUICK  # the quick default is the strata, nothing dropped


@given(st.data())
def test_each_row_draws_only_cases_of_its_families(data):
    row = data.draw(st.sampled_from(STRATA))
    case = data.draw(stratum(row))
    assert (case.padding_spelling, case.dim, case.quant) == row.axes
    for family in row.families:
        assert in_family(BY_ID[family], case), (family, case.label)
    # what would hide the family stays pinned: no bf16 (Vulkan leaves it out), constant
    # weights, padding_mode and batch only where the family asks for them
    assert case.dtype in row.dtypes and case.weights == "constant" and case.prologue is None
    assert case.padding_mode == row.padding_mode
    assert case.input_shape[0] in row.batch
    assert eager_check(case) is None


def test_strata_are_reproducible_by_seed():
    first = [c.case_id for c in generate(QUICK, 3)]
    assert [c.case_id for c in generate(QUICK, 3)] == first
    assert [c.case_id for c in generate(QUICK, 4)] != first
    # a larger run starts with the same strata, then draws freely
    assert [c.case_id for c in generate(QUICK + 8, 3)][:QUICK] == first
