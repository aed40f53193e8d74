"""The delegate lanes against real executorch lowering and runtime."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import lowering_examples
from harness.backends import get
from harness.backends.base import registered_runtime_backends
from harness.pipeline import prepare, run_cell
from harness.spec import ConvCase
from harness.strategies import conv_cases


def seed(padding):
    return ConvCase(dim=2, in_channels=3, out_channels=8, kernel_size=3, padding=padding,
                    input_shape=(1, 3, 16, 16))


def test_runtime_detection_is_real():
    names = registered_runtime_backends()
    assert "XnnpackBackend" in names
    assert get("vulkan").runtime_available() == ("VulkanBackend" in names)


def test_vulkan_contract_flags_valid_and_passes_zero():
    bad = prepare(seed("valid"), "vulkan", [])
    good = prepare(seed(0), "vulkan", [])
    assert bad["status"] == "CONTRACT_VIOLATION"
    assert "padding IntList [0] has length 1" in bad["message"]
    assert "make_ivec2" in bad["message"]
    assert good["status"] is None and good["contract_violations"] == []


def test_vulkan_cell_without_runtime_is_no_runtime_never_pass():
    from harness.runtimes import load

    with load.use(None):  # --vulkan-runtime none, even where a plug-in is loaded
        row = run_cell(seed(0), "vulkan", [])
        flagged = run_cell(seed("valid"), "vulkan", [])
    assert row.status == "NO_RUNTIME" and "VulkanBackend" in row.message
    assert row.delegated_ops == {"aten.convolution": 1}
    assert flagged.status == "CONTRACT_VIOLATION"  # the prediction is all there is


def test_vulkan_cell_with_runtime_executes(vulkan_runtime):
    row = run_cell(seed(0), "vulkan", [])
    assert row.status == "PASS" and row.run_time_s > 0, row.message
    assert row.max_abs_error <= 1e-4


def test_vulkan_conv1d_length_one_lists_are_legal():
    case = ConvCase(dim=1, in_channels=2, out_channels=2, kernel_size=3, padding="valid",
                    input_shape=(1, 2, 12))
    entry = prepare(case, "vulkan", [])
    assert entry["status"] is None, entry["message"]


@settings(max_examples=lowering_examples())
@given(conv_cases(quant=st.just(None), dtypes=st.just("float32")))
def test_xnnpack_fp32_cells_pass_or_say_why(case):
    row = run_cell(case, "xnnpack", [])
    assert row.status in {"PASS", "NOT_DELEGATED", "LOWER_ERROR"}, row.message
    if row.status == "PASS":
        assert row.max_abs_error <= 1e-3
    else:
        assert row.message


@settings(max_examples=lowering_examples())
@given(conv_cases(quant=st.just(None), dims=(2,)))
def test_vulkan_contract_violation_iff_short_int_list(case):
    entry = prepare(case, "vulkan", [])
    if entry["status"] in ("LOWER_ERROR", "NOT_DELEGATED"):
        assert entry["message"]  # the partitioner or lowering said why
        return
    flagged = any("[ivec2]" in v for v in entry["contract_violations"])
    assert flagged == case.has_short_int_list(), entry["message"]


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
]


@pytest.mark.parametrize("fields,rule", RUNTIME_LEARNT,
                         ids=[r or f"legal{i}" for i, (_, r) in enumerate(RUNTIME_LEARNT)])
def test_contract_rules_learnt_from_the_runtime(fields, rule):
    entry = prepare(ConvCase.from_dict(fields), "vulkan", [])
    assert entry.get("delegated_ops"), entry["message"]  # the partitioner took it
    rules = {v.split("]")[0].lstrip("[") for v in entry["contract_violations"]}
    if rule:
        assert entry["status"] == "CONTRACT_VIOLATION" and rule in rules, entry["message"]
    else:
        assert not rules, entry["contract_violations"]
