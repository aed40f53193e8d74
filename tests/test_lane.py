"""Lane names: the short name people read and type back, the full name the data keeps."""

import pytest

from harness.lane import Lane
from harness.results import lanes
from harness.stages import fixes as fix_registry

EVERY = {"vulkan": ("vk-b", "vk-a"), "xnnpack": ("xnn-a",)}


def test_short_names_stock_all_fixes_one_fix_and_other_sets():
    assert Lane("vulkan").short(EVERY) == "vulkan"
    assert Lane("vulkan", ("vk-a", "vk-b")).short(EVERY) == "vulkan+fixes"
    assert Lane("vulkan", ("vk-a",)).short(EVERY) == "vulkan+vk-a"
    assert Lane("xnnpack", ("xnn-a",)).short(EVERY) == "xnnpack+fixes"
    assert Lane("vulkan", ("vk-a", "other")).short(EVERY) == "vulkan+other,vk-a"
    assert Lane("vulkan", ("vk-a", "vk-b"), "h200").short(EVERY) == "vulkan@h200+fixes"
    assert Lane("vulkan", ("vk-a", "vk-b")).short(None) == "vulkan+vk-a,vk-b"  # nobody said


@pytest.mark.parametrize("lane", [Lane("vulkan"), Lane("vulkan", ("vk-a", "vk-b")),
                                  Lane("vulkan", ("vk-b",)), Lane("xnnpack", ("xnn-a",), "gpu")])
def test_every_short_and_full_name_parses_back(lane):
    assert Lane.parse(lane.short(EVERY), EVERY) == lane
    assert Lane.parse(lane.name, EVERY) == lane
    assert Lane.parse(lane.short(lambda b: EVERY[b]), lambda b: EVERY[b]) == lane


def test_the_registry_decides_what_plus_fixes_means():
    every = fix_registry.for_backend(fix_registry.parse("all"), "vulkan")
    assert lanes.parse("vulkan+fixes") == Lane("vulkan", tuple(every))
    assert Lane.parse("vulkan+fixes", fix_registry.all_for) == Lane("vulkan", tuple(every))
    assert lanes.short(Lane("vulkan", tuple(every))) == "vulkan+fixes"
    assert lanes.short(Lane("vulkan", ("vk-dw-edge-pad",))) == "vulkan+vk-dw-edge-pad"
    # case files' expectations keep their long keys
    assert lanes.parse("vulkan+vulkan-conv-padding") == Lane("vulkan", ("vulkan-conv-padding",))
    assert lanes.legend_lines([Lane("vulkan"), Lane("vulkan", tuple(every))]) == [
        "vulkan+fixes = " + ", ".join(sorted(every))]


def test_plus_fixes_without_the_registry_is_one_line():
    """No global resolver: Lane.parse reads '+fixes' only with the registry's word passed in,
    whatever modules were imported before."""
    with pytest.raises(ValueError, match="which fixes"):
        Lane.parse("vulkan+fixes")
