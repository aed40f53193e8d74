"""Where in the output a wrong-value delegate bug puts its errors: a fingerprint, and the
evidence a picture of it is drawn from.

``error_pattern(out, ref, bad_mask, groups)`` reads the mask of elements outside tolerance
(``bad_mask``, computed by the caller with the harness's rule, e.g. ``compare.tolerance_mask``) of an
``N x C x spatial...`` output (1d, 2d or 3d conv) and says which batches, which output channels
and which spatial positions are wrong, so that two bugs with the same element count ("N/N
elements outside atol ...") but different places become two findings: the Vulkan depthwise
right-edge bug reads "right edge 3 cols · all channels · all batches", the grouped-conv bug
"channels of group >= 1 · everything spatial · all batches".

How it decides (deterministic, no randomness, no fitting):

1. Axes N and C. An index counts as wrong when its share of bad elements is at least half the
   largest share along that axis (batches first over all channels, then channels over the wrong
   batches, then batches again over the wrong channels). So a few elements of a wrong region that
   happen to land inside the tolerance (int8, one step), or a few strays outside it, do not change
   the description. ``bad`` still counts every element of the mask.
2. Space. The wrong batches x channels give a spatial density map; positions at least half its
   peak are "hot". The hot map is then explained, best explanation first:
   - all hot: "everything spatial";
   - a union of full slabs (whole columns / rows / depth slices, picked greedily while the
     uncovered part of the best slab is more than half hot): "top edge 1 row + right edge 2 cols";
   - a box (the product of the per-dimension projections): "top edge 2 rows × right edge 2 cols";
   - otherwise "scattered (≤1/4 of positions)", with the box it lies in when that is not all.
3. ``text`` = the restricted parts first, then the unrestricted ones, in the order space, channels,
   batches; "everything" when nothing is restricted. "sparse (≤1/4 wrong)" is added when fewer
   than half the elements of the described region are bad, "NaN/Inf" when ``out`` has any.

Vocabulary (text -> signature token). A set of indices along one axis is classified as
all / first k / last k / both ends / an interior range / a residue class (mod 2, 3 or 4) /
scattered; counts that grow with the size are bucketed in the signature (q1: <= 1/4, q2: <= 1/2,
q3: <= 3/4, q4: more).

  space (dims named length for 1d; height, width for 2d; depth, height, width for 3d)
    "everything spatial"                          sp:all
    "right edge 3 cols", "left edge 1 col"        sp:w=right3, sp:w=left1
    "top edge 1 row", "bottom edge 2 rows"        sp:h=top1, sp:h=bottom2
    "front edge 1 slice", "back edge 1 slice"     sp:d=front1, sp:d=back1
    "left edge 1 pos" (1d: length)                sp:l=left1
    "left edge 1 col & right edge 2 cols"         sp:w=left1&right2     (both ends of one dim)
    "interior cols", "cols ≡ 1 (mod 2)"           sp:w=interior~q2, sp:w=mod2:1
    "scattered cols (≤1/4)"                       sp:w=scattered~q1
    "A + B"  (union of slabs of different dims)   sp:h=top1+w=right2
    "A × B"  (box: both at once)                  sp:h=top2*w=right2
    "scattered (≤1/4 of positions)[ within A × B]" sp:scattered~q1[@h=top2*w=right2]
  channels (``groups`` > 1 with several channels per group uses group terms)
    "all channels"                                c:all
    "channels of group >= 1"                      c:group>=1
    "channels of group 0 only"                    c:group0
    "channels of the last group"                  c:grouplast
    "channels of 2 of 4 groups"                   c:groups~q2
    "in-group channel >= 1 of every group"        c:ingroup>=1   (also ingroup0, ingrouplast,
                                                                  ingroup-first~q, ingroup-last~q)
    "channel 0 only", "channels >= 1", "last channel"   c:0, c:>=1, c:last
    "first 3 of 8 channels", "last 3 of 8 channels"     c:first~q2, c:last~q2
    "channels 2..4 of 8", "channel 2 only"              c:interior~q2, c:interior~q1
    "channels ≡ 3 (mod 4)"                              c:mod4:3
    "5 of 64 channels, scattered"                       c:scattered~q1
  batches
    "all batches" (also for N = 1)                b:all
    "batch >= 1", "batch 0 only", "last batch only"     b:>=1, b:0, b:last
    "2 of 5 batches"                              b:some~q2
  other
    "everything"                                  b:all|c:all|sp:all
    "sparse (≤1/4 wrong)"                         |d:q1
    "NaN/Inf"                                     |nan
    "no error"                                    none
    "shape differs: got (..), expected (..)"      shape

``signature`` is ``b:..|c:..|sp:..`` (+ ``|d:..`` + ``|nan``). Edge widths are kept (they tell a
right-padding bug of 3 columns from one of 1), other counts are bucketed.

Wired in: ``compare.compare`` puts a MISMATCH's ``text`` into the cell's ``error_pattern``
column and ``evidence`` (below) into the run folder. A finding keys on the text with every digit
replaced by N (``findings.signature``), so "right edge 3 cols" and "right edge 4 cols" (the same
depthwise bug at kernels 7 and 9) are one finding, and bucket words (≤1/4, ≤1/2) do not split
one either; the exact text stays in the column and the finding.

``evidence(out, ref)`` keeps what a picture of the cell draws (numpy, small whatever the output:
at most 16 channels and 4 batches, large spatial sizes max-pooled) for a run folder's evidence/
file. The picture itself is drawn in results/pictures.py: drawing decides no cached outcome, so
it stays out of this folder (the cache digest's scope, versions.digested_sources).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

MAX_CHANNELS_DRAWN = 16
MAX_BATCHES_DRAWN = 4
MAX_TILE = (16, 96, 128)  # depth, height, width drawn per tile (2d/3d); 1d: MAX_LENGTH
MAX_LENGTH = 512
HOT = 0.5  # share of the peak density (N, C, space) at which an index counts as wrong


@dataclass(frozen=True)
class ErrorPattern:
    bad: int  # elements outside tolerance (all of the mask)
    total: int  # elements of the output
    batches: tuple  # batch indices found wrong
    channels: tuple  # output channel indices found wrong
    groups: tuple  # group indices (of the case's groups) with a wrong channel
    bands: tuple  # ((dim name, where along it), ...) per spatial dim: the projection of the errors
    text: str
    signature: str


# --- classifying a set of indices -----------------------------------------------------------

def _bucket(fraction: float) -> tuple[str, str]:
    for limit, word, token in ((0.25, "≤1/4", "q1"), (0.5, "≤1/2", "q2"), (0.75, "≤3/4", "q3")):
        if fraction <= limit:
            return word, token
    return ">3/4", "q4"


def _classify(idx: list[int], size: int) -> tuple:
    """One of ("all",) ("first", k) ("last", k) ("ends", a, b) ("range", lo, hi)
    ("mod", p, residues) ("scattered", k) ("none",)."""
    k = len(idx)
    if k == 0:
        return ("none",)
    if k == size:
        return ("all",)
    if idx == list(range(k)):
        return ("first", k)
    if idx == list(range(size - k, size)):
        return ("last", k)
    head = next(i for i in range(k + 1) if i == k or idx[i] != i)  # run from index 0
    tail = next(j for j in range(k + 1)  # run up to the last index
                if j == k or idx[k - 1 - j] != size - 1 - j)
    if head and tail and head + tail == k:
        return ("ends", head, tail)
    if idx[-1] - idx[0] + 1 == k:
        return ("range", idx[0], idx[-1])
    chosen = set(idx)
    for p in (2, 3, 4):
        if size >= 2 * p:
            residues = tuple(sorted({i % p for i in idx}))
            if len(residues) < p and chosen == {i for i in range(size) if i % p in residues}:
                return ("mod", p, residues)
    return ("scattered", k)


# spatial dims: key, name, (low edge, high edge), (unit, units)
_DIMS = {
    "length": ("l", ("left", "right"), ("pos", "pos")),
    "depth": ("d", ("front", "back"), ("slice", "slices")),
    "height": ("h", ("top", "bottom"), ("row", "rows")),
    "width": ("w", ("left", "right"), ("col", "cols")),
}


def _dim_names(nd: int) -> tuple:
    return {1: ("length",), 2: ("height", "width"), 3: ("depth", "height", "width")}[nd]


def _spatial_part(name: str, cls: tuple, size: int) -> tuple[str, str]:
    key, (low, high), (unit, units) = _DIMS[name]

    def n(k: int) -> str:
        return f"{k} {unit if k == 1 else units}"

    kind = cls[0]
    if kind == "all":
        return f"all {units}", f"{key}=all"
    if kind == "first":
        return f"{low} edge {n(cls[1])}", f"{key}={low}{cls[1]}"
    if kind == "last":
        return f"{high} edge {n(cls[1])}", f"{key}={high}{cls[1]}"
    if kind == "ends":
        return (f"{low} edge {n(cls[1])} & {high} edge {n(cls[2])}",
                f"{key}={low}{cls[1]}&{high}{cls[2]}")
    if kind == "range":
        _, q = _bucket((cls[2] - cls[1] + 1) / size)
        return f"interior {units}", f"{key}=interior~{q}"
    if kind == "mod":
        res = ",".join(map(str, cls[2]))
        return f"{units} ≡ {res} (mod {cls[1]})", f"{key}=mod{cls[1]}:{res}"
    word, q = _bucket(cls[1] / size)
    return f"scattered {units} ({word})", f"{key}=scattered~{q}"


def _channel_part(idx: list[int], size: int, groups: int) -> tuple[str, str]:
    cls = _classify(idx, size)
    if cls[0] == "all":
        return "all channels", "c:all"
    per = size // groups if groups > 1 and size % groups == 0 else 0
    if per > 1:  # grouped, not depthwise: say it in groups when the errors follow them
        hit = sorted({c // per for c in idx})
        if set(idx) == {c for c in range(size) if c // per in hit}:
            g = _classify(hit, groups)
            if g == ("last", groups - 1):
                return "channels of group >= 1", "c:group>=1"
            if g == ("first", 1):
                return "channels of group 0 only", "c:group0"
            if g == ("last", 1):
                return "channels of the last group", "c:grouplast"
            _, q = _bucket(len(hit) / groups)
            return f"channels of {len(hit)} of {groups} groups", f"c:groups~{q}"
        positions = [sorted(c % per for c in idx if c // per == g) for g in range(groups)]
        if all(p == positions[0] for p in positions):
            p = _classify(positions[0], per)
            if p == ("last", per - 1):
                return "in-group channel >= 1 of every group", "c:ingroup>=1"
            if p == ("first", 1):
                return "in-group channel 0 of every group", "c:ingroup0"
            if p == ("last", 1):
                return "last channel of every group", "c:ingrouplast"
            _, q = _bucket(len(positions[0]) / per)
            if p[0] in ("first", "last"):
                return (f"{p[0]} {p[1]} of {per} channels of every group",
                        f"c:ingroup-{p[0]}~{q}")
            return f"{len(positions[0])} of {per} channels of every group", f"c:ingroup~{q}"
    word, q = _bucket(len(idx) / size)
    if cls == ("first", 1):
        return "channel 0 only", "c:0"
    if cls == ("last", size - 1):
        return "channels >= 1", "c:>=1"
    if cls == ("last", 1):
        return "last channel", "c:last"
    if cls[0] in ("first", "last"):
        return f"{cls[0]} {cls[1]} of {size} channels", f"c:{cls[0]}~{q}"
    if cls[0] == "range" and cls[1] == cls[2]:
        return f"channel {cls[1]} only", f"c:interior~{q}"
    if cls[0] == "range":
        return f"channels {cls[1]}..{cls[2]} of {size}", f"c:interior~{q}"
    if cls[0] == "mod":
        res = ",".join(map(str, cls[2]))
        return f"channels ≡ {res} (mod {cls[1]})", f"c:mod{cls[1]}:{res}"
    return f"{len(idx)} of {size} channels, scattered", f"c:scattered~{q}"


def _batch_part(idx: list[int], size: int) -> tuple[str, str]:
    cls = _classify(idx, size)
    if cls[0] == "all":
        return "all batches", "b:all"
    if cls == ("last", size - 1):
        return "batch >= 1", "b:>=1"
    if cls == ("first", 1):
        return "batch 0 only", "b:0"
    if cls == ("last", 1):
        return "last batch only", "b:last"
    _, q = _bucket(len(idx) / size)
    return f"{len(idx)} of {size} batches", f"b:some~{q}"


# --- space ---------------------------------------------------------------------------------

def _hot(profile: torch.Tensor) -> torch.Tensor:
    peak = float(profile.max()) if profile.numel() else 0.0
    return profile >= HOT * peak if peak > 0 else torch.zeros_like(profile, dtype=torch.bool)


def _slabs(hot: torch.Tensor) -> tuple[list[list[int]], torch.Tensor]:
    """Greedy union of full slabs: while the best slab's uncovered part is more than half hot,
    take every slab tied with it. -> chosen indices per dim, covered mask."""
    nd = hot.dim()
    covered = torch.zeros_like(hot)
    chosen: list[set] = [set() for _ in range(nd)]
    while True:
        open_ = ~covered
        dens = []
        for d in range(nd):
            other = [i for i in range(nd) if i != d]
            n_open = open_.sum(other) if other else open_.long()
            n_hot = (hot & open_).sum(other) if other else (hot & open_).long()
            dens.append(torch.where(n_hot > 0, n_hot / n_open.clamp_min(1),
                                    torch.zeros((), dtype=torch.float64)))
        best = max(float(x.max()) for x in dens)
        if best <= 0.5:
            break
        for d, x in enumerate(dens):
            for i in torch.nonzero(x >= best - 1e-12).flatten().tolist():
                chosen[d].add(i)
                covered.select(d, i).fill_(True)
    return [sorted(c) for c in chosen], covered


def _f1(explained: torch.Tensor, hot: torch.Tensor) -> float:
    tp = int((explained & hot).sum())
    if not tp:
        return 0.0
    precision, recall = tp / int(explained.sum()), tp / int(hot.sum())
    return 2 * precision * recall / (precision + recall)


def _space(hot: torch.Tensor) -> tuple[str, str, torch.Tensor, tuple]:
    """-> text, signature token, the region described (mask), bands."""
    names = _dim_names(hot.dim())
    sizes = list(hot.shape)
    proj = []
    for d in range(hot.dim()):
        other = [i for i in range(hot.dim()) if i != d]
        proj.append(torch.nonzero(hot.any(other) if other else hot).flatten().tolist())
    bands = tuple((name, _spatial_part(name, _classify(p, s), s)[0])
                  for name, p, s in zip(names, proj, sizes))
    if bool(hot.all()):
        return "everything spatial", "sp:all", hot, bands
    chosen, covered = _slabs(hot)
    box = torch.ones_like(hot)
    for d, p in enumerate(proj):
        keep = torch.zeros(sizes[d], dtype=torch.bool)
        keep[p] = True
        box &= keep.view([-1 if i == d else 1 for i in range(hot.dim())])
    box_parts = [_spatial_part(n, _classify(p, s), s) for n, p, s in zip(names, proj, sizes)
                 if len(p) < s]
    slab_f1, box_f1 = _f1(covered, hot), _f1(box, hot)
    if slab_f1 >= 0.8 and slab_f1 >= box_f1:
        parts = [_spatial_part(n, _classify(c, s), s) for n, c, s in zip(names, chosen, sizes) if c]
        return (" + ".join(t for t, _ in parts), "sp:" + "+".join(k for _, k in parts),
                covered, bands)
    if box_f1 >= 0.8:
        return (" × ".join(t for t, _ in box_parts), "sp:" + "*".join(k for _, k in box_parts),
                box, bands)
    word, q = _bucket(int(hot.sum()) / hot.numel())
    text, sig = f"scattered ({word} of positions)", f"sp:scattered~{q}"
    if box_parts:
        text += " within " + " × ".join(t for t, _ in box_parts)
        sig += "@" + "*".join(k for _, k in box_parts)
    return text, sig, hot, bands


# --- the fingerprint -----------------------------------------------------------------------

def error_pattern(out: torch.Tensor, ref: torch.Tensor, bad_mask: torch.Tensor,
                  groups: int = 1) -> ErrorPattern:
    """Where the elements of ``bad_mask`` (N x C x spatial, 1d/2d/3d) lie; see the module doc."""
    if tuple(out.shape) != tuple(ref.shape):
        return ErrorPattern(bad=ref.numel(), total=ref.numel(), batches=(), channels=(),
                            groups=(), bands=(), signature="shape",
                            text=f"shape differs: got {tuple(out.shape)}, "
                                 f"expected {tuple(ref.shape)}")
    if tuple(bad_mask.shape) != tuple(out.shape) or out.dim() < 3:
        raise ValueError(f"error_pattern needs N x C x spatial tensors and a mask of the same "
                         f"shape, got out {tuple(out.shape)}, mask {tuple(bad_mask.shape)}")
    mask = bad_mask.bool()
    nonfinite = bool((~torch.isfinite(out.double())).any())
    if nonfinite:
        mask = mask | ~torch.isfinite(out.double())
    n_bad, total = int(mask.sum()), mask.numel()
    if n_bad == 0:
        return ErrorPattern(0, total, (), (), (), (), "no error", "none")
    n, c = mask.shape[:2]
    spatial_dims = tuple(range(2, mask.dim()))
    per_bc = mask.double().mean(spatial_dims)  # N x C share of bad elements
    hot_b = _hot(per_bc.mean(1))
    hot_c = _hot(per_bc[hot_b].mean(0))
    hot_b = _hot(per_bc[:, hot_c].mean(1))
    batches = torch.nonzero(hot_b).flatten().tolist()
    channels = torch.nonzero(hot_c).flatten().tolist()
    inside = mask[hot_b][:, hot_c]  # the wrong batches x channels
    hot_space = _hot(inside.double().mean((0, 1)))
    sp_text, sp_sig, region, bands = _space(hot_space)
    b_text, b_sig = _batch_part(batches, n)
    c_text, c_sig = _channel_part(channels, c, groups)
    per = c // groups if groups > 1 and c % groups == 0 else c
    group_ids = tuple(sorted({ch // per for ch in channels}))

    parts = [(sp_text, sp_sig != "sp:all"), (c_text, c_sig != "c:all"),
             (b_text, b_sig != "b:all")]
    restricted = [t for t, r in parts if r]
    text = " · ".join(restricted + [t for t, r in parts if not r]) if restricted else "everything"
    signature = f"{b_sig}|{c_sig}|{sp_sig}"
    density = float(inside[(slice(None), slice(None)) + (region,)].double().mean()) \
        if bool(region.any()) else 1.0
    if density < 0.5:
        word, q = _bucket(density)
        text += f" · sparse ({word} wrong)"
        signature += f"|d:{q}"
    if nonfinite:
        text = "NaN/Inf · " + text
        signature += "|nan"
    return ErrorPattern(bad=n_bad, total=total, batches=tuple(batches), channels=tuple(channels),
                        groups=group_ids, bands=bands, text=text, signature=signature)


# --- the evidence: what a picture of the cell draws (results/pictures.py draws it) ----------

def _pool(x: torch.Tensor, limits: tuple) -> tuple[torch.Tensor, bool]:
    """Max-pool the trailing dims of x (B x C x spatial) down to at most ``limits`` each."""
    sizes = x.shape[2:]
    target = tuple(min(s, m) for s, m in zip(sizes, limits))
    if target == tuple(sizes):
        return x, False
    pool = {1: torch.nn.functional.adaptive_max_pool1d, 2: torch.nn.functional.adaptive_max_pool2d,
            3: torch.nn.functional.adaptive_max_pool3d}[len(sizes)]
    return pool(x, target), True


def drawn_diff(out: torch.Tensor, ref: torch.Tensor) -> tuple[torch.Tensor, list, bool]:
    """|out - ref| of what is drawn (MAX_BATCHES_DRAWN x MAX_CHANNELS_DRAWN, spatial max-pooled
    to the drawn size), NaN/Inf at the top of the scale. -> (diff, notes, pooled)."""
    n, c = out.shape[:2]
    notes = []
    if c > MAX_CHANNELS_DRAWN:
        notes.append(f"first {MAX_CHANNELS_DRAWN} of {c} channels")
    if n > MAX_BATCHES_DRAWN:
        notes.append(f"first {MAX_BATCHES_DRAWN} of {n} batches")
    keep = (slice(0, MAX_BATCHES_DRAWN), slice(0, MAX_CHANNELS_DRAWN))
    d = (out[keep].double() - ref[keep].double()).abs()
    finite = torch.isfinite(d)
    if not bool(finite.all()):  # NaN/Inf drawn at the top of the scale
        top = float(d[finite].max()) if bool(finite.any()) else 1.0
        d = torch.where(finite, d, torch.full_like(d, top))
        notes.append("NaN/Inf drawn as the max")
    d, pooled = _pool(d, (MAX_LENGTH,) if d.dim() == 3 else MAX_TILE[-(d.dim() - 2):])
    return d, notes, pooled


SAMPLE_ELEMENTS = 4096  # out/ref values kept beside the picture's data (for a bug report)


def evidence(out: torch.Tensor, ref: torch.Tensor) -> dict:
    """What a MISMATCH cell keeps for its picture (and a bug report), small whatever the output:
    the drawn |out - ref| (``diff``, float32, already cut and pooled to what ``results.pictures.render`` draws),
    the notes saying what was cut, both shapes, and out/ref themselves when the output has at
    most SAMPLE_ELEMENTS elements. Numpy arrays and strings only (an .npz, see runfolder.py)."""
    import numpy as np

    ev = {"out_shape": np.array(tuple(out.shape), dtype=np.int64),
          "ref_shape": np.array(tuple(ref.shape), dtype=np.int64)}
    if tuple(out.shape) == tuple(ref.shape) and out.dim() >= 3:
        d, notes, pooled = drawn_diff(out, ref)
        ev["diff"] = d.float().numpy()
        ev["notes"] = np.array("; ".join(notes + (["max-pooled"] if pooled else [])))
        if out.numel() <= SAMPLE_ELEMENTS:
            ev["out"], ev["ref"] = out.float().numpy(), ref.float().numpy()
    return ev
