"""Fingerprints of wrong outputs: synthetic errors shaped like the known delegate bugs (pure torch,
no lowering). The same bug at another size gives the same signature; different bugs different
ones."""


import matplotlib.image as mpimg
import numpy as np
import pytest
import torch

from harness.stages import compare
from harness.stages.compare import tolerance_mask
from harness.results.pictures import render
from harness.stages.fingerprint import ErrorPattern, error_pattern


def _ref(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _perturbed(ref, index, amount=1.0):
    out = ref.clone()
    out[index] += amount
    return out


def _pattern(out, ref, groups=1) -> ErrorPattern:
    return error_pattern(out, ref, tolerance_mask(out, ref), groups)


RIGHT3 = (Ellipsis, slice(-3, None))  # the Vulkan depthwise k7 p3 bug: last 3 columns, every row


def test_right_edge_is_named_with_its_width_and_the_same_at_another_size():
    small_ref, big_ref = _ref(1, 4, 8, 8), _ref(2, 4, 16, 16, seed=1)
    small = _pattern(_perturbed(small_ref, RIGHT3), small_ref)
    big = _pattern(_perturbed(big_ref, RIGHT3), big_ref)
    assert "right edge 3 cols" in small.text
    assert small.text == big.text == "right edge 3 cols · all channels · all batches"
    assert small.signature == big.signature == "b:all|c:all|sp:w=right3"
    assert small.bad == 4 * 8 * 3 and small.total == 4 * 8 * 8
    assert small.channels == (0, 1, 2, 3) and big.batches == (0, 1)
    assert dict(small.bands) == {"height": "all rows", "width": "right edge 3 cols"}
    # another width is another token (a 1-column right-edge bug is not the 3-column one)
    one = _pattern(_perturbed(small_ref, (Ellipsis, slice(-1, None))), small_ref)
    assert one.signature == "b:all|c:all|sp:w=right1" and "right edge 1 col " in one.text


def test_holes_and_strays_do_not_change_the_fingerprint():
    """int8 (one step of tolerance): some elements of a wrong region land inside it by chance,
    and a few elements elsewhere are just outside it."""
    ref = _ref(1, 16, 12, 12)
    clean = _pattern(_perturbed(ref, RIGHT3), ref)
    mask = torch.zeros(ref.shape, dtype=torch.bool)
    mask[..., -3:] = torch.rand(1, 16, 12, 3, generator=torch.Generator().manual_seed(3)) > 0.3
    mask[0, 5, 4, 2] = mask[0, 11, 0, 7] = True  # strays
    noisy = error_pattern(ref, ref, mask)
    assert noisy.signature == clean.signature and noisy.text == clean.text
    assert noisy.bad == int(mask.sum())


def test_grouped_bug_is_group_ge_1_and_not_the_edge_bug():
    ref = _ref(1, 4, 8, 8)
    p = _pattern(_perturbed(ref, (slice(None), slice(2, 4))), ref, groups=2)
    assert "channels of group >= 1" in p.text and "everything spatial" in p.text
    assert p.channels == (2, 3) and p.groups == (1,)
    assert p.signature == "b:all|c:group>=1|sp:all"
    edge = _pattern(_perturbed(ref, RIGHT3), ref, groups=2)
    assert p.signature != edge.signature
    # the same bug with 4 groups of 2 channels on a bigger output: every group but the first
    ref8 = _ref(2, 8, 10, 10, seed=2)
    p8 = _pattern(_perturbed(ref8, (slice(None), slice(2, 8))), ref8, groups=4)
    assert p8.signature == p.signature and p8.groups == (1, 2, 3)
    # without groups the same channels are just a range of channels: another signature
    assert _pattern(_perturbed(ref, (slice(None), slice(2, 4))), ref).signature != p.signature


def test_one_channel_of_every_group():
    """The grouped bug with out_channels/groups = 2 ("half the outputs wrong") if the half is
    the second channel of each group."""
    ref = _ref(1, 8, 6, 6)
    p = _pattern(_perturbed(ref, (slice(None), [1, 3, 5, 7])), ref, groups=4)
    assert p.text.startswith("in-group channel >= 1 of every group")
    assert p.signature == "b:all|c:ingroup>=1|sp:all" and p.groups == (0, 1, 2, 3)


def test_batch_ge_1():
    ref = _ref(4, 3, 5, 5)
    p = _pattern(_perturbed(ref, slice(1, None)), ref)
    assert p.text.startswith("batch >= 1") and p.batches == (1, 2, 3)
    assert p.signature == "b:>=1|c:all|sp:all"
    first = _pattern(_perturbed(ref, slice(0, 1)), ref)
    assert first.text.startswith("batch 0 only") and first.signature == "b:0|c:all|sp:all"


def test_everything_and_nothing():
    ref = _ref(1, 3, 5, 5)
    p = _pattern(ref + 1, ref)
    assert p.text == "everything" and p.signature == "b:all|c:all|sp:all"
    assert p.bad == p.total == ref.numel()
    none = _pattern(ref.clone(), ref)
    assert none.text == "no error" and none.signature == "none" and none.bad == 0


def test_union_of_edges_box_and_stride_pattern():
    ref = _ref(1, 2, 8, 8)
    l_shape = ref.clone()
    l_shape[..., 0, :] += 1
    l_shape[..., -2:] += 1
    p = _pattern(l_shape, ref)
    assert p.text.startswith("top edge 1 row + right edge 2 cols ·")
    assert p.signature == "b:all|c:all|sp:h=top1+w=right2"
    corner = _pattern(_perturbed(ref, (Ellipsis, slice(0, 2), slice(-2, None))), ref)
    assert corner.text.startswith("top edge 2 rows × right edge 2 cols")
    assert corner.signature == "b:all|c:all|sp:h=top2*w=right2"
    both = _pattern(_perturbed(ref, (Ellipsis, [0, 6, 7])), ref)
    assert both.text.startswith("left edge 1 col & right edge 2 cols")
    odd = _pattern(_perturbed(ref, (Ellipsis, slice(1, None, 2))), ref)
    assert odd.signature == "b:all|c:all|sp:w=mod2:1"


def test_distinct_bugs_have_distinct_signatures():
    ref = _ref(2, 8, 8, 8)
    patterns = {
        "right edge": RIGHT3,
        "left edge": (Ellipsis, slice(0, 3)),
        "bottom edge": (Ellipsis, slice(-3, None), slice(None)),
        "group >= 1": (slice(None), slice(4, 8)),
        "batch >= 1": slice(1, 2),
        "channel 0": (slice(None), 0),
        "everything": Ellipsis,
    }
    sigs = {name: _pattern(_perturbed(ref, index), ref, groups=2).signature
            for name, index in patterns.items()}
    assert len(set(sigs.values())) == len(sigs), sigs


def test_1d_and_3d_outputs():
    ref1 = _ref(2, 6, 10)
    p1 = _pattern(_perturbed(ref1, (Ellipsis, 0)), ref1)
    assert p1.text == "left edge 1 pos · all channels · all batches"
    assert p1.signature == "b:all|c:all|sp:l=left1" and p1.bands == (("length", "left edge 1 pos"),)
    ref3 = _ref(1, 2, 4, 6, 6)
    p3 = _pattern(_perturbed(ref3, (Ellipsis, slice(-2, None))), ref3)
    assert p3.text.startswith("right edge 2 cols") and p3.signature.endswith("sp:w=right2")
    assert [name for name, _ in p3.bands] == ["depth", "height", "width"]
    front = _pattern(_perturbed(ref3, (slice(None), slice(None), 0)), ref3)
    assert front.signature == "b:all|c:all|sp:d=front1"


def test_shape_mismatch_and_bad_mask():
    ref = _ref(1, 4, 8, 8)
    p = error_pattern(ref[..., :7], ref, torch.zeros(0, dtype=torch.bool))
    assert p.signature == "shape"
    assert p.text == "shape differs: got (1, 4, 8, 7), expected (1, 4, 8, 8)"
    with pytest.raises(ValueError):
        error_pattern(ref, ref, torch.zeros(1, 4, 8, dtype=torch.bool))


def test_non_finite_output_is_named():
    ref = _ref(1, 2, 4, 4)
    out = ref.clone()
    out[0, 1] = float("nan")
    p = _pattern(out, ref)
    assert p.text.startswith("NaN/Inf · ") and p.signature.endswith("|nan")
    assert p.channels == (1,) and p.bad == 16


def test_tolerance_mask_counts_what_compare_counts():
    ref = _ref(1, 4, 8, 8)
    out = _perturbed(ref, RIGHT3, 3e-4)
    verdict = compare.compare(out, ref)
    n_bad = int(tolerance_mask(out, ref).sum())
    assert not verdict.ok and verdict.message.startswith(f"{n_bad}/{ref.numel()} elements")
    # int8: one output step is allowed, more is not
    scale = 0.05
    q = _perturbed(ref, (Ellipsis, 0), 0.9 * scale)
    q[..., -1] += 2 * scale
    mask = tolerance_mask(q, ref, out_scale=scale)
    assert mask[..., -1].all() and not mask[..., :-1].any()


def _png_checks(path):
    assert path.exists() and path.stat().st_size > 1000
    pixels = mpimg.imread(str(path))
    h, w = pixels.shape[:2]
    assert 100 < w <= 1300 and 100 < h <= 1000, (w, h)
    colours = np.unique(pixels[..., :3].reshape(-1, 3), axis=0)
    assert len(colours) > 10  # a heat map, not a blank canvas
    return pixels


def test_render_right_edge_png(tmp_path):
    ref = _ref(1, 4, 8, 8)
    out = _perturbed(ref, RIGHT3, 2.0)
    path = render(out, ref, tmp_path / "edge.png", "right edge example")
    assert path == tmp_path / "edge.png"
    pixels = _png_checks(path)
    # the stripe is drawn: magma's top (pale yellow) appears, and the error-free part is black
    rgb = pixels[..., :3]
    assert ((rgb[..., 0] > 0.95) & (rgb[..., 1] > 0.9) & (rgb[..., 2] > 0.6)).any()
    assert (rgb.sum(-1) < 0.05).sum() > 1000


def test_render_is_bounded_for_a_large_output(tmp_path):
    """A large output draws a bounded picture (_png_checks: at most 1300x1000). How fast it
    draws is not a test's to assert on shared cores: a benchmark's (none yet, see issue #36)."""
    ref = _ref(6, 64, 56, 56)
    out = _perturbed(ref, RIGHT3)
    path = render(out, ref, tmp_path / "big.png", "6x64x56x56: 16 channels, 4 batches drawn")
    _png_checks(path)


@pytest.mark.parametrize("shape", [(2, 3, 40), (1, 2, 3, 6, 7), (1, 1, 300, 300)])
def test_render_other_ranks(tmp_path, shape):
    ref = _ref(*shape)
    out = _perturbed(ref, (Ellipsis, slice(-2, None)))
    _png_checks(render(out, ref, tmp_path / "x.png", f"{shape}"))


def test_render_shape_mismatch(tmp_path):
    ref = _ref(1, 2, 4, 4)
    path = render(ref[..., :3], ref, tmp_path / "shape.png", "shape")
    assert path.exists() and path.stat().st_size > 0


# --- wired in: compare's verdict, the run folder's evidence, the picture from it -----------------

def test_a_mismatch_verdict_says_where_and_keeps_evidence_a_pass_neither():
    ref = _ref(1, 4, 8, 8)
    ok = compare.compare(ref.clone(), ref, groups=2)
    assert ok.ok and "error_pattern" not in ok.metrics and ok.evidence is None
    grouped = compare.compare(_perturbed(ref, (slice(None), slice(2, 4))), ref, groups=2)
    assert not grouped.ok
    assert grouped.metrics["error_pattern"] == "channels of group >= 1 · everything spatial · all batches"
    edge = compare.compare(_perturbed(ref, RIGHT3), ref, groups=4)
    assert edge.metrics["error_pattern"] == "right edge 3 cols · all channels · all batches"
    ev = edge.evidence
    assert ev["diff"].shape == (1, 4, 8, 8) and ev["diff"].dtype == np.float32
    assert (ev["diff"][..., -3:] > 0.5).all() and (ev["diff"][..., :-3] == 0).all()
    assert tuple(ev["out_shape"]) == (1, 4, 8, 8) and ev["out"].shape == (1, 4, 8, 8)
    # int8: the pattern is of the elements more than the allowed output steps off
    scale = 0.05
    q = _perturbed(ref, (Ellipsis, 0), 0.5 * scale)  # within one step: not part of the pattern
    q[:, 1] += 3 * scale
    v = compare.compare(q, ref, out_scale=scale)
    assert not v.ok and v.metrics["error_pattern"] == "channel 1 only · everything spatial · all batches"
    # another shape: said so, evidence without a diff
    s = compare.compare(ref[..., :7], ref)
    assert s.metrics["error_pattern"] == "shape differs: got (1, 4, 8, 7), expected (1, 4, 8, 8)"
    assert "diff" not in s.evidence


def test_evidence_is_small_whatever_the_output():
    from harness.stages.fingerprint import MAX_BATCHES_DRAWN, MAX_CHANNELS_DRAWN, evidence

    ref = _ref(6, 64, 200, 300)
    ev = evidence(_perturbed(ref, RIGHT3), ref)
    assert ev["diff"].shape[:2] == (MAX_BATCHES_DRAWN, MAX_CHANNELS_DRAWN)
    assert ev["diff"].size <= MAX_BATCHES_DRAWN * MAX_CHANNELS_DRAWN * 96 * 128
    assert "out" not in ev and "first 16 of 64 channels" in str(ev["notes"])
    assert "max-pooled" in str(ev["notes"]) and tuple(ev["out_shape"]) == (6, 64, 200, 300)


def test_evidence_in_a_run_folder_draws_the_picture_after_the_folder_moved(tmp_path):
    import shutil

    from harness.runfolder import RunFolder
    from harness.results.pictures import render_evidence

    ref = _ref(1, 4, 8, 8)
    verdict = compare.compare(_perturbed(ref, RIGHT3, 2.0), ref)
    folder = RunFolder(tmp_path / "run")
    folder.path.mkdir()
    path = folder.write_evidence("conv2d_x-0000abcd", "vulkan", "fix-a,fix-b", verdict.evidence)
    assert path.parent == folder.evidence_dir and path.suffix == ".npz"
    moved = RunFolder(tmp_path / "moved")
    shutil.move(folder.path, moved.path)  # nothing absolute is kept: the copy has it
    ev = moved.evidence("conv2d_x-0000abcd", "vulkan", "fix-a,fix-b")
    assert ev is not None and np.array_equal(ev["diff"], verdict.evidence["diff"])
    assert moved.evidence("conv2d_x-0000abcd", "vulkan", "") is None  # none for that cell
    pixels = _png_checks(render_evidence(ev, moved.picture_path("F-1"), "from the folder"))
    rgb = pixels[..., :3]  # the stripe, as render draws it from the tensors
    assert ((rgb[..., 0] > 0.95) & (rgb[..., 1] > 0.9) & (rgb[..., 2] > 0.6)).any()
    shape = compare.compare(ref[..., :7], ref).evidence
    assert render_evidence(shape, tmp_path / "s.png", "shape").stat().st_size > 0
