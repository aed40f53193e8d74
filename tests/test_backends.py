"""The delegate lanes against real executorch lowering and runtime."""

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from conftest import lowering_examples
from harness.stages.backends import get
from harness.runtimes.load import registered_backends
from harness.lane import Lane
from harness.stages.cell import prepare, run_cell
from harness.spec import ConvCase
from harness.status import Status
from harness.generation.strategies import conv_cases
from honest import assert_executed, assert_honest
from witness import execute_and_judge, vulkan_short_ivec2_lists


def seed(padding):
    return ConvCase(dim=2, in_channels=3, out_channels=8, kernel_size=3, padding=padding,
                    input_shape=(1, 3, 16, 16))


def test_runtime_detection_is_real():
    names = registered_backends()
    assert "XnnpackBackend" in names
    assert get("vulkan").runtime_available() == ("VulkanBackend" in names)


def test_vulkan_contract_flags_exactly_the_short_lists_of_the_payload():
    """The static check on the seed's two spellings: a violation iff the serialized payload
    (read back here without the checker) has a short 2D int list, each one named with the
    runtime check it breaks. Which spelling serializes a short list is the corpus's
    (cases/short_int_lists_2d.json, cases/vulkan_runtime_patches.json)."""
    for padding in ("valid", 0):
        entry = prepare(seed(padding), Lane("vulkan"))
        assert entry.pte is not None, entry.message
        short = vulkan_short_ivec2_lists(entry.pte)
        flagged = [v for v in entry.contract_violations if v.startswith("[ivec2]")]
        assert len(flagged) == len(short), (flagged, short)
        assert (entry.status == "CONTRACT_VIOLATION") == bool(entry.contract_violations)
        assert all("make_ivec2" in v and "has length" in v for v in flagged), flagged
        if not entry.contract_violations:
            assert entry.status in (None, "NOT_DELEGATED"), entry.message


def test_vulkan_cell_without_runtime_is_no_runtime_never_pass():
    """Without a runtime nothing executes: each cell is what lowering and the static check
    saw, says it did not run, and is never PASS."""
    from harness.runtimes import load

    cases = [seed(0), seed("valid"),  # a partly delegated program without a runtime too
             ConvCase(dim=2, in_channels=3, out_channels=6, kernel_size=3, padding=1,
                      padding_mode="reflect", input_shape=(4, 3, 16, 16))]
    with load.use(None):  # --vulkan-runtime none, even where a plug-in is loaded
        rows = [run_cell(case, "vulkan", []) for case in cases]
    assert len(rows) == len(cases)
    for row in rows:
        assert row.run_time_s is None and row.status != "PASS", row
        assert_honest(row, runtime=False)
        if row.status == "LOWER_ERROR":
            continue
        assert row.delegation == ("full" if not row.undelegated_ops else
                                  "partial" if row.delegated_ops else "none")
        conv_inside = not row.undelegated_ops and any("convolution" in op
                                                      for op in row.delegated_ops)
        want = ("NOT_DELEGATED" if not conv_inside else
                "CONTRACT_VIOLATION" if row.contract_violations else "NO_RUNTIME")
        assert row.status == want, row
        if want != "CONTRACT_VIOLATION":  # it says why it did not execute
            assert "VulkanBackend" in row.message, row.message
        if want == "NOT_DELEGATED":
            assert "(not executed: VulkanBackend" in row.message


def test_vulkan_cell_with_runtime_executes(vulkan_runtime):
    row = run_cell(seed(0), "vulkan", [])
    status = assert_executed(row)
    assert status not in ("LOWER_ERROR", "INVALID"), row.message  # lowered and ran
    assert row.run_time_s is not None and row.run_time_s > 0 or status == "CRASH", row


def test_vulkan_conv1d_length_one_lists_are_legal():
    case = ConvCase(dim=1, in_channels=2, out_channels=2, kernel_size=3, padding="valid",
                    input_shape=(1, 2, 12))
    entry = prepare(case, Lane("vulkan"))
    assert entry.status is None, entry.message


@settings(max_examples=lowering_examples())
@given(conv_cases(quant=st.just(None), dtypes=st.just("float32")))
@example(ConvCase(dim=1, transposed=True, in_channels=1, out_channels=1, kernel_size=1,  # a bug
                  dilation=3, output_padding=1, bias=False, input_shape=(1, 1, 1)))
@example(ConvCase(dim=2, in_channels=3, out_channels=6, kernel_size=3, padding=1,  # partly
                  padding_mode="reflect", input_shape=(4, 3, 16, 16)))        # delegated
@example(ConvCase(dim=1, in_channels=1, out_channels=1, kernel_size=1,  # dynamic: every size
                  input_shape=(2, 1, 1), padding_mode="circular", bias=False,  # (a CI find)
                  dynamic="batch", dynamic_sizes=((1, 1, 1), (3, 1, 1), (2, 1, 1))))
def test_xnnpack_fp32_status_is_what_really_happened(case):
    """Whatever XNNPACK does with the case (bugs included: those are corpus entries), the row
    says what happened: a lowering that raised is LOWER_ERROR with its message; every lowered
    program executes, fully or partly delegated: one that raised at run time is RUNTIME_ERROR
    carrying the runtime's own message; one that ran is within the README's fp32 tolerance of
    eager (then PASS, or NOT_DELEGATED when the conv stayed outside the delegate) or MISMATCH.
    The delegation column is what the lowered program's op counts say."""
    row = run_cell(case, "xnnpack", [])
    assert row.status in {s.value for s in Status} - {"NO_RUNTIME", "CONTRACT_VIOLATION", "CRASH"}
    if row.status != "PASS":
        assert row.message, row
    entry = prepare(case, Lane("xnnpack"))
    if entry.pte is None:  # nothing was lowered: the stage that raised is the status
        assert row.status == entry.status == "LOWER_ERROR" and row.message == entry.message
        return
    assert row.delegation == ("full" if not entry.undelegated_ops else
                              "partial" if entry.delegated_ops else "none")
    seen = execute_and_judge(entry.pte, case)
    if seen.raised:
        assert row.status == "RUNTIME_ERROR" and seen.raised in row.message, (seen, row.message)
        return
    assert row.run_time_s is not None  # it executed, whatever its delegation
    ran_right = "NOT_DELEGATED" if entry.status == "NOT_DELEGATED" else "PASS"
    assert row.status == (ran_right if seen.within else "MISMATCH"), (seen, row.message)


@settings(max_examples=lowering_examples())
@given(conv_cases(quant=st.just(None), dims=(2,)))
def test_vulkan_ivec2_violation_iff_the_payload_has_a_short_list(case):
    """The static check reports [ivec2] exactly when the serialized Vulkan payload holds a 2D
    conv int list of length != 2, read here from the .pte without the checker. Whether a case's
    spelling *produces* such a list is the delegate's business: the corpus pins it
    (cases/short_int_lists_2d.json)."""
    entry = prepare(case, Lane("vulkan"))
    if entry.pte is None:
        assert entry.status == "LOWER_ERROR" and entry.message  # lowering said why
        return
    flagged = [v for v in entry.contract_violations if v.startswith("[ivec2]")]
    short = vulkan_short_ivec2_lists(entry.pte)
    assert bool(flagged) == bool(short), (flagged, short)
    assert len(flagged) == len(short), (flagged, short)
    if flagged and entry.status != "NOT_DELEGATED":
        assert entry.status == "CONTRACT_VIOLATION" and "[ivec2]" in entry.message


RUNTIME_LEARNT = [  # (case, rule the runtime proved, or None where the same family is legal)
    (dict(dim=1, in_channels=4, out_channels=4, kernel_size=1, groups=2, input_shape=(1, 4, 7)),
     "conv1d-pw-groups"),
    (dict(dim=1, in_channels=4, out_channels=4, kernel_size=1, input_shape=(1, 4, 7)), None),
    (dict(dim=2, in_channels=4, out_channels=4, kernel_size=2, groups=4, dilation=2,
          input_shape=(1, 4, 8, 8)), "dw-shader"),
    (dict(dim=2, in_channels=4, out_channels=4, kernel_size=3, groups=4, stride=2,
          input_shape=(1, 4, 8, 8)), None),  # 3x3 has a stride != dilation shader
    (dict(dim=2, in_channels=12, out_channels=8, kernel_size=3, groups=2,
          input_shape=(1, 12, 8, 8), quant="int8_per_channel"), "q8ta-group-channels"),
    (dict(dim=2, in_channels=8, out_channels=8, kernel_size=3, groups=2,
          input_shape=(1, 8, 8, 8), quant="int8_per_channel"), None),
    # a 1x1 conv, grouped too, goes to Conv2dPW.cpp, which never reads dilation: a length-1
    # dilation is legal there (it ran, conv2d_pw_tiled_float); a length-1 stride is not
    (dict(dim=2, in_channels=4, out_channels=8, kernel_size=1, groups=4, padding="same",
          dilation=[3], input_shape=(1, 4, 2, 4)), None),
    (dict(dim=2, in_channels=4, out_channels=8, kernel_size=1, stride=[2],
          input_shape=(1, 4, 4, 4)), "ivec2"),
]


@pytest.mark.parametrize("fields,rule", RUNTIME_LEARNT,
                         ids=[r or f"legal{i}" for i, (_, r) in enumerate(RUNTIME_LEARNT)])
def test_contract_rules_learnt_from_the_runtime(fields, rule):
    entry = prepare(ConvCase.from_dict(fields), Lane("vulkan"))
    assert entry.delegated_ops, entry.message  # the partitioner took it
    rules = {v.split("]")[0].lstrip("[") for v in entry.contract_violations}
    if rule:
        assert entry.status == "CONTRACT_VIOLATION" and rule in rules, entry.message
    else:
        assert not rules, entry.contract_violations
