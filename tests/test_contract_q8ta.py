"""Contract rules of the quantized Vulkan conv path, each against what really happens: the
runtime (executing the cell) for the VkGraph rules, the lowering for the lowering rules."""

import pytest

from harness.lane import Lane
from harness.spec import ConvCase
from harness.stages import backends
from harness.stages.cell import prepare, run_cell
from honest import assert_executed


def q8(**fields):
    return ConvCase.from_dict({"dim": 2, "quant": "int8_per_channel", **fields})


BATCH = [  # (case, rule expected): batch > 1 on each q8ta op; batch 1 clean
    (q8(in_channels=3, out_channels=6, kernel_size=3, input_shape=(4, 3, 16, 16)), True),
    (q8(in_channels=8, out_channels=8, kernel_size=1, input_shape=(2, 8, 6, 6)), True),
    (q8(in_channels=8, out_channels=8, kernel_size=3, groups=8, padding=1,
        input_shape=(2, 8, 8, 8)), True),
    (q8(in_channels=3, out_channels=6, kernel_size=3, input_shape=(1, 3, 16, 16)), False),
    (q8(in_channels=8, out_channels=8, kernel_size=3, groups=8, padding=1,
        input_shape=(1, 8, 8, 8)), False),  # depthwise: no group-channel rule either
]


@pytest.mark.slow
@pytest.mark.parametrize("case,flagged", BATCH, ids=[c.case_id for c, _ in BATCH])
def test_q8ta_batch_rule_agrees_with_the_runtime(case, flagged, vulkan_runtime):
    row = run_cell(case, "vulkan", [])
    rules = {v.split("]")[0].lstrip("[") for v in row.contract_violations}
    assert ("q8ta-batch" in rules) == flagged, row.contract_violations
    assert (row.predicted == "CONTRACT_VIOLATION") == flagged
    # a prediction never stands in for the runtime: the cell executed and its row is honest
    # (what the runtime does with batch > 1 on 1.5.1: cases/vulkan_graph_fixes.json,
    # cases/from_tests.json)
    status = assert_executed(row)
    assert status not in ("LOWER_ERROR", "INVALID", "CONTRACT_VIOLATION"), row.message


LOWERING = [  # (case, lowering rule the model predicts, what the 1.5.1 lowering asserts)
    (q8(in_channels=4, out_channels=8, kernel_size=3, input_shape=(1, 4, 8, 8),
        quant="int8_per_tensor"), "q8ta-per-tensor-weight", "weight_scales_node is not None"),
    (q8(in_channels=6, out_channels=6, kernel_size=3, groups=6, input_shape=(1, 6, 8, 8)),
     "q8ta-dw-oc4", "depthwise conv requires that OC is divisible by 4"),
    (q8(in_channels=8, out_channels=8, kernel_size=3, groups=8, input_shape=(1, 8, 8, 8)),
     None, None),
    (q8(in_channels=4, out_channels=8, kernel_size=3, input_shape=(1, 4, 8, 8)), None, None),
]


@pytest.mark.slow
@pytest.mark.parametrize("case,rule,asserts", LOWERING, ids=[c.case_id for c, _, _ in LOWERING])
def test_lowering_rules_predict_and_ride_on_the_lowering_error(case, rule, asserts):
    entry = prepare(case, Lane("vulkan"))
    predicted = backends.get("vulkan").lowering_predictions
    # the model's verdict on the case (harness code), then what the lowering did with it: a
    # raise carries the prediction as a note, whatever it was (which cases raise on which
    # release: cases/from_tests.json)
    assert [p.split("]")[0] + "]" for p in predicted] == ([f"[{rule}]"] if rule else []), predicted
    raised = entry.status == "LOWER_ERROR"
    assert raised == (entry.pte is None) and (not raised or entry.message), entry
    if raised:
        assert "convconf contract model (lowering rules): " in entry.traceback
        assert (f"[{rule}]" if rule else "no rule predicted this") in entry.traceback
