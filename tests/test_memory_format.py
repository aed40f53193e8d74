"""Issue 39, memory format: the case fields, their build, and real XNNPACK / Vulkan cells.

Asserts what the harness guarantees (the fields round-trip, old ids stay, the inputs and module
are what the case says, a cell's status is what the runtime did), never that a delegate is right:
what the delegates do is in cases/memory_format_dynamic.json."""

from __future__ import annotations

import glob
import json

import pytest
import torch

from harness.generation.variants import one_step
from harness.record import CellResult
from harness.spec import CaseError, ConvCase, load_entries
from harness.stages.build import build_module, make_inputs
from harness.stages.cell import run_cell

BASE = dict(dim=2, in_channels=4, out_channels=8, kernel_size=3, input_shape=(1, 4, 8, 8))


def test_old_case_files_read_unchanged_and_keep_their_ids():
    for path in glob.glob("cases/*.json") + glob.glob("cases/models/*.json"):
        for case, entry in load_entries(path):
            new = {"memory_format", "module_channels_last", "dynamic", "dynamic_sizes"}
            if new & set(entry["case"]):
                continue
            # a case written before the fields: the defaults, and its id hashes what it had
            assert (case.memory_format, case.module_channels_last, case.dynamic,
                    case.dynamic_sizes) == ("contiguous", False, "none", ())
            assert not new & set(json.loads(case.to_json()))
    plain = ConvCase(**BASE)
    assert "memory_format" not in plain.to_json() and "dynamic" not in plain.to_json()
    # the id of a case from before the fields, pinned
    assert plain.case_id == ConvCase.from_dict(json.loads(plain.to_json())).case_id
    assert plain.case_id.startswith("conv2d_i4o8_k3_s1_p0_d1_g1_b1_x1x4x8x8_f32-")


def test_the_fields_round_trip_and_make_ids_of_their_own():
    cl = ConvCase(**BASE, memory_format="channels_last", module_channels_last=True)
    again = ConvCase.from_json(cl.to_json())
    assert again == cl and again.case_id == cl.case_id
    assert cl.case_id != ConvCase(**BASE).case_id and cl.label.endswith("_cl_mcl")
    row = CellResult(case=cl, backend="xnnpack").to_row()
    assert row["memory_format"] == "channels_last" and row["module_channels_last"] is True
    assert CellResult.from_row(row).case == cl


@pytest.mark.parametrize("bad", [dict(memory_format="channels_last_3d"),
                                 dict(memory_format="nhwc"),
                                 dict(dim=1, kernel_size=3, input_shape=(1, 4, 8),
                                      memory_format="channels_last"),
                                 dict(dim=1, kernel_size=3, input_shape=(1, 4, 8),
                                      module_channels_last=True),
                                 dict(weights="input", module_channels_last=True)])
def test_illegal_layouts_are_one_line(bad):
    with pytest.raises(CaseError):
        ConvCase(**{**BASE, **bad})


def test_inputs_and_module_are_in_the_case_s_format():
    case = ConvCase(**{**BASE, "dim": 3, "kernel_size": 2, "input_shape": (1, 4, 3, 3, 3)},
                    memory_format="channels_last_3d", module_channels_last=True)
    x, = make_inputs(case)
    assert x.is_contiguous(memory_format=torch.channels_last_3d) and not x.is_contiguous()
    w = build_module(case).weight
    assert w.is_contiguous(memory_format=torch.channels_last_3d) and not w.is_contiguous()
    # the same values as the contiguous case's draw: only the layout differs
    plain = ConvCase(**{**BASE, "dim": 3, "kernel_size": 2, "input_shape": (1, 4, 3, 3, 3)})
    assert make_inputs(plain)[0].shape == x.shape and plain.case_id != case.case_id


def test_channels_last_to_contiguous_is_a_one_step_variant():
    case = ConvCase(**BASE, memory_format="channels_last", module_channels_last=True)
    steps = {s.field: s.case for s in one_step(case)}
    assert steps["memory_format"].memory_format == "contiguous"
    assert not steps["module_channels_last"].module_channels_last


def test_a_channels_last_cell_on_xnnpack_is_what_the_runtime_did():
    """C=4 runs (its value judged); C=1 is refused at execution on 1.5.1 (#19153): either way the
    status is the runtime's own, with its message, never a harness error."""
    for fields in (dict(BASE), dict(BASE, in_channels=1, input_shape=(1, 1, 7, 5))):
        row = run_cell(ConvCase(**fields, memory_format="channels_last"), "xnnpack")
        assert row.status in ("PASS", "MISMATCH", "RUNTIME_ERROR"), (row.status, row.message)
        assert row.phase in ("execute", "compare")
        if row.status == "RUNTIME_ERROR":
            assert "forward" in row.message or "XNN" in row.message
        else:
            assert row.max_abs_error is not None


def test_the_reference_is_eager_on_the_same_tensors_whatever_their_strides():
    """compare judges by value: an output with other strides than the reference is the same."""
    from harness.stages.compare import compare

    ref = torch.randn(1, 8, 5, 5)
    assert compare(ref.to(memory_format=torch.channels_last), ref).ok


def test_vulkan_runs_a_channels_last_cell(vulkan_runtime):
    row = run_cell(ConvCase(**BASE, padding=(1, 1), stride=(1, 1), dilation=(1, 1),
                            memory_format="channels_last"), "vulkan")
    assert row.status in ("PASS", "MISMATCH", "RUNTIME_ERROR"), (row.status, row.message)
    assert row.reached  # it executed and dispatched
