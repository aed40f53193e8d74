"""Findings split by evidence and merged by evidence (issue 48): one finding per bug.

Hand-built cells (real CellResults and ConvCases, no runtime): each test gives find() exactly
the per-cell evidence a run would have (components, the same case's cell in a fix lane, error
patterns, case features) and checks the grouping it promises, the ids, a baseline's view and the
clustering measured against the shipped known-issue list."""

import json
from pathlib import Path

from harness.record import CellResult
from harness.results import findings
from harness.spec import ConvCase

ROOT = Path(__file__).resolve().parents[1]
PROPAGATE = ("Failed to execute method forward, error: 0x1 — runtime: [XNNExecutor.cpp:112] "
             "Internal Error: Propagating input shapes failed with code: xnn_status_invalid_parameter")
IVEC2 = ("Exception raised from make_ivec2 at executorch/backends/vulkan/runtime/utils/"
         "VecUtils.h:367: (ints.size() == 2) is false!")


def conv(i: int, **kw) -> ConvCase:
    """A distinct 2D conv per ``i`` (channels and size vary: the same bug at other sizes)."""
    base = dict(dim=2, in_channels=4 + 4 * (i % 3), out_channels=4 + 4 * (i % 2), kernel_size=3,
                padding=1, input_shape=(1, 4 + 4 * (i % 3), 8 + i, 8))
    base.update(kw)
    if "groups" in kw:
        base["input_shape"] = (base["input_shape"][0], base["in_channels"], *base["input_shape"][2:])
    return ConvCase(**base)


def mismatch(case, component, pattern="everything", fixes="", backend="vulkan"):
    msg = f"12/40 elements outside atol=0.0001 rtol=0.0001, max|d|=1.{case.input_shape[2]}"
    return CellResult(case=case, backend=backend, fixes=fixes, status="MISMATCH",
                      message=f"{msg} — culprit: {component}", error_pattern=pattern,
                      component=component)


def passed(case, fixes="", backend="vulkan"):
    return CellResult(case=case, backend=backend, fixes=fixes, status="PASS")


def test_a_generic_runtime_message_splits_by_the_component_that_failed():
    cells = [CellResult(case=conv(i), backend="xnnpack", status="RUNTIME_ERROR", message=PROPAGATE,
                        component="delegate:xnnpack:XNNConv2d" if i < 3 else
                        "delegate:xnnpack:XNNStaticConstantPad") for i in range(5)]
    key = findings.cell_finding_id(cells[0])
    assert {findings.cell_finding_id(c) for c in cells} == {key}  # one key, as before
    found = findings.find(cells)
    assert sorted(f.count for f in found) == [2, 3]
    big, small = found
    assert big.id == key and big.component == "delegate:xnnpack:XNNConv2d"  # largest keeps the id
    assert small.id.startswith(key + ".") and small.component.endswith("XNNStaticConstantPad")
    assert big.split_from == small.split_from == key
    assert "component delegate:xnnpack:XNNStaticConstantPad" in small.split_why
    # a baseline that knew the key knows both parts, and says the second is a split part
    assert findings.known_as(big, {key}) == key
    assert findings.known_as(small, {key}).startswith(f"{key} (this is a part of it")
    assert findings.known_as(small, {"F-00000000"}) == ""
    # the same split, found again: deterministic ids
    assert [f.id for f in findings.find(list(reversed(cells)))] == [big.id, small.id]


def _fix_cells(with_fix_lane: bool):
    """Six grouped fp32 conv2d cells wrong in one shader; vk-grouped-split turns three PASS and
    leaves three in the same finding."""
    cells = []
    for i in range(6):
        case = conv(i, groups=2, in_channels=8, out_channels=8)
        cells.append(mismatch(case, "delegate:vulkan:conv2d_float", "channels of group >= 1"))
        if with_fix_lane:
            cells.append(passed(case, "vk-grouped-split") if i % 2 else
                         mismatch(case, "delegate:vulkan:conv2d_float", "channels of group >= 1",
                                  fixes="vk-grouped-split"))
    return cells


def test_a_fix_that_clears_some_cells_and_not_others_splits_the_finding():
    found = findings.find(_fix_cells(True))
    assert len(found) == 2
    fixed = next(f for f in found if "PASS on vulkan+vk-grouped-split" in f.split_why)
    left = next(f for f in found if "still failing" in f.split_why)
    assert fixed.count == 3 and fixed.fixed_by == {"vk-grouped-split": "3/3"}
    assert left.count == 6 and left.fixed_by == {}  # 3 stock + their 3 cells in the fix lane
    assert left.id == findings.cell_finding_id(_fix_cells(True)[0])
    # a run without the fix lane has no such evidence: one finding, its id the key's
    alone = findings.find(_fix_cells(False))
    assert [(f.count, f.split_from) for f in alone] == [(6, "")]
    assert alone[0].id == left.id


def test_error_patterns_of_different_kinds_split_one_shader_and_sizes_do_not():
    edge = [mismatch(conv(i, groups=4, in_channels=4, out_channels=4, kernel_size=7, padding=3),
                     "delegate:vulkan:conv2d_float", f"right edge {1 + i} col{'s' if i else ''} · "
                     "all channels · all batches") for i in range(3)]
    grouped = [mismatch(conv(i, groups=2, in_channels=6, out_channels=6),
                        "delegate:vulkan:conv2d_float",
                        "channels of group >= 1 · everything spatial · all batches") for i in range(2)]
    width1 = [mismatch(conv(9, groups=2, in_channels=4, out_channels=4),
                       "delegate:vulkan:conv2d_float", "everything")]
    old = [mismatch(conv(12), "delegate:vulkan:conv2d_float", "")]  # no pattern: no kind
    found = findings.find(edge + grouped + width1 + old)
    assert sorted(f.count for f in found) == [1, 2, 4]  # the patternless cell: the largest part
    big = max(found, key=lambda f: f.count)
    assert "right edge N col" in big.split_why and big.id == findings.cell_finding_id(edge[0])
    assert {f.split_why for f in found} >= {"wrong at everything", "wrong at channel of group >= N"}
    assert findings.pattern_kind("right edge 1 col · all channels · all batches") == \
        findings.pattern_kind("right edge 5 cols · all channels · all batches")
    assert len(findings.find(edge)) == 1  # the same bug at three edge widths: one finding
    # on a width-1 output the edge is everything: no kind of its own, it joins the edge bug
    flat = mismatch(conv(10, input_shape=(1, 4, 6, 1), kernel_size=(4, 1), padding="same",
                         groups=4, in_channels=4, out_channels=4),
                    "delegate:vulkan:conv2d_float", "everything")
    flat.out_shape = [1, 4, 6, 1]
    assert [f.count for f in findings.find(edge + [flat])] == [4]


def test_cells_decided_by_two_different_parameters_split():
    grouped = [CellResult(case=conv(i, groups=2, in_channels=8, out_channels=8), backend="vulkan",
                          status="RUNTIME_ERROR", message=IVEC2) for i in range(3)]
    layout = [CellResult(case=conv(i, memory_format="channels_last", kernel_size=5, padding=2),
                         backend="vulkan", status="RUNTIME_ERROR", message=IVEC2) for i in range(3)]
    ok = [passed(conv(i, kernel_size=k)) for i in range(4) for k in (3, 5)]
    found = findings.find(grouped + layout + ok)
    assert sorted(f.split_why for f in found) == ["decided by grouped",
                                                  "decided by memory_format=channels_last"]
    assert {f.count for f in found} == {3}
    # the layout's part takes a derived id (sorted by size, then why), the other the key's
    assert sorted(f.id for f in found)[0] == findings.cell_finding_id(grouped[0])
    # without the passing cells nothing tells the two apart: one finding
    assert len(findings.find(grouped + layout)) == 1


def _q8_batch():
    """The int8 batch > 1 bug (known issue vulkan-q8ta-conv-batch): wrong in three q8ta shaders;
    vk-q8-batch-split turns every one PASS, vk-dw-edge-pad (another bug's fix) none."""
    cells = []
    shaders = {"q8ta_conv2d_float": {}, "q8ta_conv2d_pw_float": {"kernel_size": 1, "padding": 0},
               "q8ta_conv2d_dw_float": {"groups": 8, "in_channels": 8, "out_channels": 8}}
    for n, (shader, kw) in enumerate(shaders.items()):
        for i in range(2):
            case = conv(3 * n + i, quant="int8_per_channel", **kw)
            case = ConvCase(**{**case.to_dict(), "input_shape": (2, *case.input_shape[1:])})
            cells += [mismatch(case, f"delegate:vulkan:{shader}", "everything"),
                      passed(case, "vk-q8-batch-split"),
                      mismatch(case, f"delegate:vulkan:{shader}", "everything", "vk-dw-edge-pad")]
    return cells


def test_one_fix_across_three_shaders_is_one_finding():
    cells = _q8_batch()
    keys = sorted({findings.cell_finding_id(c) for c in cells} - {None})
    assert len(keys) == 3  # one key per shader, as before
    edge = mismatch(conv(20, groups=4, in_channels=4, out_channels=4, kernel_size=7, padding=3),
                    "delegate:vulkan:conv2d_dw_float", "right edge 3 cols · all channels · all batches")
    found = findings.find(cells + [edge, passed(edge.case, "vk-dw-edge-pad")])
    q8 = next(f for f in found if f.merged_from)
    assert q8.merged_from == keys and q8.id == keys[0] and q8.count == 12
    assert "vulkan+vk-q8-batch-split turns every stock cell PASS" in q8.merge_why
    assert q8.known_issues[0]["id"] == "vulkan-q8ta-conv-batch"
    other = [f for f in found if f is not q8]
    assert [(f.count, f.merged_from) for f in other] == [(1, [])]  # another fix: another bug
    # a baseline that knew any one shader's finding knows the merged one
    assert findings.known_as(q8, {keys[2]}).startswith(keys[2])
    # every cell is in exactly the finding that holds it
    holder = findings.finding_of(found)
    assert {holder[c.key] for c in cells if c.status != "PASS"} == {q8.id}


def test_clustering_against_the_known_issue_list_before_and_after():
    cells = _q8_batch()
    before, after = findings.quality(cells), findings.quality(cells, findings.find(cells))
    assert (before.purity, before.completeness) == (1.0, 0.0)  # one known issue, three findings
    assert list(before.spread) == ["vulkan-q8ta-conv-batch (MISMATCH, vulkan)"]
    assert (after.purity, after.completeness) == (1.0, 1.0) and after.issues == 1
    assert "completeness 1.0 (1/1" in after.line()


def test_an_unchanged_finding_keeps_the_id_the_nightly_baseline_knows():
    nightly = json.loads((ROOT / "cases/expectations/nightly.json").read_text())["findings"]
    ivec2 = [CellResult(case=conv(i, padding=(1,)), backend="vulkan", status="RUNTIME_ERROR",
                        message=IVEC2, component="delegate:vulkan:VecUtils.h:make_ivec2")
             for i in range(3)]
    dw = [mismatch(conv(i, groups=4, in_channels=4, out_channels=4, kernel_size=7, padding=3),
                   "delegate:vulkan:conv2d_dw_float", "right edge 3 cols · all channels · "
                   "all batches") for i in range(2)]
    found = {f.id: f for f in findings.find(ivec2 + dw)}
    assert set(found) == {"F-4e38da80", "F-2cc467fc"} and set(found) <= set(nightly)
    assert all(not f.split_from and not f.merged_from for f in found.values())


def test_a_baseline_knows_split_parts_and_merged_findings_by_any_of_their_ids(tmp_path):
    from harness.results import baseline, matrix

    cells = _q8_batch() + [CellResult(case=conv(i), backend="xnnpack", status="RUNTIME_ERROR",
                                      message=PROPAGATE, component="delegate:xnnpack:XNNConv2d"
                                      if i < 3 else "delegate:xnnpack:XNNStaticConstantPad")
                           for i in range(5)]
    df = matrix.frame([c.to_row() for c in cells])
    keys = sorted({findings.cell_finding_id(c) for c in cells[:18]} - {None})
    xnn = findings.cell_finding_id(cells[-1])
    # a baseline from before: one q8ta shader's finding and the xnnpack key
    verdict = baseline.classify(df, baseline.Baseline("old", {keys[2], xnn}))
    failing = verdict[verdict != ""]
    assert failing.str.startswith("known: ").all() and len(failing) == 12 + 5
    split = failing[failing.str.contains(r"\(this is a part of it")]
    assert len(split) == 2 and split.str.startswith(f"known: {xnn}.").all()
    assert failing[failing.str.contains("merged into")].str.startswith(f"known: {keys[0]}").any()
    # a baseline that knew none of them: all new, named by the finding that holds the cell
    fresh = baseline.classify(df, baseline.Baseline("none", set()))
    assert fresh[fresh != ""].str.startswith("new: ").all()
    assert set(fresh[fresh != ""].str.slice(5)) == {f.id for f in findings.find(df)}


def test_a_shrink_or_diagnosis_try_lands_in_a_merged_or_split_finding_by_its_key():
    cells = _q8_batch()
    (q8,) = findings.find(cells)
    keys = {findings.cell_finding_id(c) for c in cells} - {None}
    assert all(findings.lands_in(k, q8) for k in keys)  # any shader of the merged bug
    assert not findings.lands_in("F-00000000", q8) and not findings.lands_in("", q8)
    xnn = [CellResult(case=conv(i), backend="xnnpack", status="RUNTIME_ERROR", message=PROPAGATE,
                      component="delegate:xnnpack:XNNConv2d" if i < 3 else
                      "delegate:xnnpack:XNNStaticConstantPad") for i in range(5)]
    small = findings.find(xnn)[1]
    assert findings.lands_in(findings.cell_finding_id(xnn[4]), small) and small.id != small.split_from


def test_the_same_runtime_check_at_another_line_of_a_patched_runtime_is_one_finding():
    at = ("Exception raised from execute at executorch/backends/vulkan/runtime/VulkanBackend.cpp:"
          "{}: (args.size() == num_inputs + num_outputs) is false!")
    case = conv(1, padding_mode="circular")
    stock = CellResult(case=case, backend="vulkan", status="RUNTIME_ERROR", message=at.format(729))
    patched = CellResult(case=case, backend="vulkan", fixes="vk-io-dim-order",
                         status="RUNTIME_ERROR", message=at.format(781))
    other = CellResult(case=conv(2), backend="vulkan", status="RUNTIME_ERROR",
                       message=at.format(781).replace("args.size()", "inputs.size()"))
    keys = [findings.cell_finding_id(c) for c in (stock, patched, other)]
    assert len(set(keys)) == 3  # the line is in the key, as before
    found = findings.find([stock, patched, other])
    assert sorted(f.count for f in found) == [1, 2]  # another condition: another finding
    (merged,) = [f for f in found if f.merged_from]
    assert merged.merged_from == sorted(keys[:2]) and "another line" in merged.merge_why
