"""The size axis (issue 46): long reductions, wide channels and tensors past a texture limit,
drawn under a per-case compute budget by construction. Properties of the drawn cases (no
lowering): every case within the budget, each kind reaching its size on any seed, the size
strata reaching theirs, the nightly profile drawing large cases at about its rate, the ci
profile's cases what they were."""

import dataclasses

import pytest
from hypothesis import find, given, settings, strategies as st

from harness.cli import main
from harness.generation import strategies as S
from harness.generation.generate import LARGE_RATE, PROFILES, generate
from harness.generation.strata import SIZE_STRATA, STRATA, stratum
from harness.results.known_issues import features as known_features, load as load_issues
from harness.spec import ConvCase
from harness.stages.build import eager_check


def assert_within_budget(case):
    assert S.macs(case) <= S.MAX_MACS, (S.macs(case), case.label)
    assert S.footprint(case) <= S.MAX_BYTES, (S.footprint(case), case.label)


@pytest.mark.parametrize("kind", S.SIZE_KINDS)
@given(data=st.data())
def test_each_kind_reaches_its_size_within_the_budget(kind, data):
    case = data.draw(S.large_cases(kinds=(kind,), quant=st.sampled_from(S.LARGE_QUANT)))
    assert_within_budget(case)
    reached = {"reduction": case.reduction_length() > S.LONG_REDUCTION,
               "texture": bool(S.crossed_limits(case)),
               "channels": max(case.in_channels, case.out_channels) >= 64}
    assert reached[kind], (kind, case.label)
    assert max(case.in_channels, case.out_channels) <= S.LARGE_CHANNELS
    assert max(case.spatial("kernel_size")) <= S.LARGE_KERNEL
    assert S.size_class(case) != "small"
    assert not (case.quant and case.transposed)  # as quant_cases: no quantizer annotates one


@given(S.mixed_cases(large_rate=LARGE_RATE["nightly"]))
def test_every_case_the_nightly_draws_is_within_the_budget(case):
    assert_within_budget(case)  # small ones too, at their largest dynamic size


@given(S.mixed_cases())
def test_the_small_draws_stay_small(case):
    # what tells a size-axis case from the others (the rate test below counts by it)
    assert S.size_class(case) == "small", case.label


@settings(max_examples=5)
@given(S.large_cases(quant=st.sampled_from(S.LARGE_QUANT)))
def test_large_cases_are_legal_in_eager(case):
    assert eager_check(case) is None


@given(data=st.data())
def test_the_size_strata_reach_their_sizes_on_any_seed(data):
    row = data.draw(st.sampled_from(SIZE_STRATA))
    case = data.draw(stratum(row))
    assert (case.padding_spelling, case.dim, case.quant) == row.axes
    assert_within_budget(case)
    if row.size == "reduction":
        assert case.reduction_length() > S.LONG_REDUCTION, case.label
    else:
        assert S.crossed_limits(case), case.label
    for family in row.families:  # the families only a size shows (strata.SIZE_FAMILIES)
        issue = next(i for i in load_issues() if i.id == family)  # its case, not its words:
        issue = dataclasses.replace(issue, message=None, error_pattern=None, component=None)
        assert issue.matches(issue.backend, known_features(case), issue.statuses[0], ""), family
    # what would hide the size stays pinned: batch 1, float32, zeros, not transposed, contiguous
    assert case.input_shape[0] == 1 and case.dtype == "float32" and not case.transposed
    assert case.padding_mode == "zeros" and case.memory_format == "contiguous"


def test_shrinking_goes_to_the_smallest_case_that_still_reaches_the_size():
    # the budget and the size are built in, not filtered: Hypothesis' minimal reduction case is
    # the smallest conv past 100k terms (a 7x7 kernel on ceil(100001 / 49) channels, one output)
    case = find(S.large_cases(kinds=("reduction",)), lambda c: True,
                settings=settings(database=None))
    assert case.reduction_length() == 49 * 2041 > S.LONG_REDUCTION
    assert (case.dim, case.out_channels, case.input_shape) == (2, 1, (1, 2041, 7, 7))
    assert case.quant is None and case.dtype == "float32" and not case.transposed


def test_the_nightly_profile_draws_large_cases_at_about_its_rate():
    n = 160
    cases = generate(n, 0, large_rate=LARGE_RATE["nightly"])
    assert len(cases) == n
    first = len(STRATA) + len(SIZE_STRATA)
    # the run starts with the strata, then the size strata, each reaching its size
    assert cases[len(STRATA)].reduction_length() > S.LONG_REDUCTION
    assert S.crossed_limits(cases[len(STRATA) + 1])
    free = cases[first:]
    share = sum(S.size_class(c) != "small" for c in free) / len(free)
    assert 0.4 * LARGE_RATE["nightly"] <= share <= 1.8 * LARGE_RATE["nightly"], share


def test_the_ci_profile_is_unchanged():
    assert LARGE_RATE["ci"] == 0
    quick = generate(PROFILES["ci"], 0, large_rate=LARGE_RATE["ci"])
    assert [c.case_id for c in quick] == [c.case_id for c in generate(PROFILES["ci"], 0)]
    assert all(S.size_class(c) == "small" for c in quick)
    # the nightly starts with the same strata: the size axis comes after them
    nightly = generate(len(STRATA) + len(SIZE_STRATA), 0, large_rate=LARGE_RATE["nightly"])
    assert [c.case_id for c in nightly[:len(STRATA)]] == [c.case_id for c in quick][:len(STRATA)]


def test_budget_and_texture_arithmetic_on_known_convs():
    # Conv2d(2048 -> 128, 6x6) on 6x6: K = 73728 terms, one output position per channel; the
    # im2col route's packed weight is ceil(6*6*2048/4) = 18432 texels high (> 16384)
    gemm = ConvCase(dim=2, in_channels=2048, out_channels=128, kernel_size=6,
                    input_shape=(1, 2048, 6, 6))
    assert gemm.reduction_length() == 73728
    assert S.macs(gemm) == 128 * 73728
    assert S.footprint(gemm) == 4 * (2048 * 36 + 128 + 128 * 73728 + 128)
    assert S.texture_extents(gemm)["gemm weight"] == (128, 18432, 1)
    assert S.crossed_limits(gemm) == (2048, 4096, 16384)
    # its im2col scratch: one tile; Conv2d(512 -> 128, 3x3, p1) on 32x33 needs two (32 output
    # rows of 33 x 4608 fp32 terms are 19.5 MB, past the 16 MiB scratch budget: 27 rows a tile)
    assert S.im2col_tiles(gemm) == 1
    tiled = ConvCase(dim=2, in_channels=512, out_channels=128, kernel_size=3, padding=1,
                     input_shape=(1, 512, 32, 33))
    assert S.texture_extents(tiled)["im2col scratch"] == (1152, 27 * 33, 1)
    assert S.im2col_tiles(tiled) == 2
    # a 2-D input 4100 wide is past lavapipe's 3D limit (x extent = width, channels-packed)
    wide = ConvCase(dim=2, in_channels=3, out_channels=4, kernel_size=3,
                    input_shape=(1, 3, 4, 4100))
    assert S.texture_extents(wide)["input"] == (4100, 4, 1)
    assert S.crossed_limits(wide) == (2048, 4096)
    assert S.size_class(wide) == "texture"
    # a transposed conv counts its scatter: every input element times C_out/groups x kernel
    tconv = ConvCase(dim=1, in_channels=4, out_channels=6, kernel_size=3, stride=2,
                     transposed=True, groups=2, input_shape=(1, 4, 10))
    assert S.macs(tconv) == 4 * 10 * 3 * 3


def test_a_bad_large_rate_is_one_line(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", "--out", str(out), "--large-rate", "1.5", "--backends", "xnnpack",
                 "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["convconf: error: run: --large-rate must be between 0 and 1, not 1.5"]
    assert not (out / "run.json").exists()
