"""A picture of a wrong output: ``|out - ref|`` drawn as a PNG (matplotlib, Agg, no display).

``render(out, ref, path, title)`` draws it from the tensors, ``render_evidence(ev, path, title)``
from what ``stages.fingerprint.evidence`` kept in a run folder's evidence/ file (the same
picture). 1d: one row per output channel; 2d: a grid of per-channel heatmaps (4 tiles per row,
channel numbers on the tiles) so a right-edge stripe shows in every tile and a wrong group as a
block of tiles; 3d the same with depth slices stacked into each tile's rows. Batches side by
side, separated by a gap. At most 16 channels and 4 batches are drawn and large spatial sizes are
max-pooled (``fingerprint.evidence`` cuts them; the title says so).

Drawing decides no cached outcome (the verdict, the fingerprint's text and the evidence do, in
stages/), so it lives here, outside the cache digest's scope: a picture's colour or layout can
change without invalidating a single cached lowering (tests/test_cache_scope.py).
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from harness.stages.fingerprint import drawn_diff

TILES_PER_ROW = 4


def render_evidence(ev: dict, path, title: str) -> Path:
    """The picture ``render`` draws, from what ``fingerprint.evidence`` kept (a run folder's .npz)."""
    out_shape, ref_shape = tuple(int(x) for x in ev["out_shape"]), tuple(int(x) for x in ev["ref_shape"])
    if "diff" not in ev:
        return _render_message(path, title, f"shape differs: got {out_shape}, expected {ref_shape}"
                               if out_shape != ref_shape else f"not N x C x spatial: {out_shape}")
    notes = [n for n in str(ev.get("notes", "")).split("; ") if n]
    return _render_diff(torch.from_numpy(ev["diff"]).double(), path, title, notes)


def _render_message(path, title: str, text: str) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = Figure(dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    fig.set_size_inches(6, 2.5)
    ax.axis("off")
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True)
    ax.set_title(title, fontsize=9, wrap=True)
    fig.savefig(path)
    return path


def render(out: torch.Tensor, ref: torch.Tensor, path, title: str) -> Path:
    """A PNG of |out - ref| at ``path`` (the module doc says the layout). -> the path."""
    if tuple(out.shape) != tuple(ref.shape) or out.dim() < 3:
        return _render_message(path, title, f"shape differs: got {tuple(out.shape)}, expected "
                               f"{tuple(ref.shape)}" if tuple(out.shape) != tuple(ref.shape)
                               else f"not N x C x spatial: {tuple(out.shape)}")
    d, notes, pooled = drawn_diff(out, ref)
    return _render_diff(d, path, title, notes + (["max-pooled"] if pooled else []))


def _render_diff(d: torch.Tensor, path, title: str, notes: list) -> Path:
    """Draw a drawn diff (B x C x spatial, already cut and pooled by ``drawn_diff``)."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = Figure(dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    nd = d.dim() - 2
    notes = list(notes)
    b, cc = d.shape[:2]
    cmap = matplotlib.colormaps["magma"].with_extremes(bad="white")
    vmax = float(d.max()) if d.numel() and float(d.max()) > 0 else 1.0
    if nd == 1:
        length = d.shape[-1]
        gap = max(1, length // 40)
        image = torch.full((cc, b * length + (b - 1) * gap), float("nan"), dtype=torch.float64)
        for bi in range(b):
            image[:, bi * (length + gap): bi * (length + gap) + length] = d[bi]
        ax.set_ylabel("output channel")
        ax.set_xlabel("length (position)" + ("; batches side by side" if b > 1 else ""))
        ax.set_yticks(range(cc))
        ax.set_yticklabels([str(i) for i in range(cc)], fontsize=6)
        if b > 1:
            ax.set_xticks([bi * (length + gap) + length // 2 for bi in range(b)])
            ax.set_xticklabels([f"batch {bi}" for bi in range(b)], fontsize=7)
        aspect, ratio = "auto", 2.0
    else:
        if nd == 3:
            depth, h, w = d.shape[2:]
            d = d.reshape(b, cc, depth * h, w)  # depth slices stacked into rows
        image, labels, lines = _mosaic(d)
        if nd == 3 and depth > 1:  # dotted lines between the stacked depth slices
            for r in range(math.ceil(cc / min(cc, TILES_PER_ROW))):
                for k in range(1, depth):
                    ax.axhline(r * depth * h + k * h - 0.5, color="#3a7bd5", linewidth=0.6,
                               linestyle=":")
        for x, y, label in labels:
            ax.text(x, y - 0.5, label, fontsize=6, color="#6ab4ff", va="top", ha="left",
                    clip_on=True, bbox={"facecolor": "black", "alpha": 0.6, "pad": 0.5,
                                        "linewidth": 0})
        for xs, ys in lines:  # blue: not a colour of the map, so never read as a value
            ax.plot(xs, ys, color="#3a7bd5", linewidth=1.0)
        ax.set_xlabel("width (one tile per output channel, channel numbers on the tiles"
                      + ("; batches side by side" if b > 1 else "") + ")", fontsize=8)
        ax.set_ylabel("height" + (" (depth slices stacked)" if nd == 3 else "")
                      + " / output channel tile rows", fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])
        aspect = "equal"
        ratio = image.shape[1] / max(image.shape[0], 1)
    im = ax.imshow(image.numpy(), cmap=cmap, vmin=0.0, vmax=vmax, interpolation="nearest",
                   aspect=aspect)
    ax.set_xlim(-0.5, image.shape[1] - 0.5)
    ax.set_ylim(image.shape[0] - 0.5, -0.5)
    cbar = fig.colorbar(im, ax=ax, fraction=0.04, pad=0.02)
    cbar.set_label("|out - ref|")
    # bounded: the figure follows the image's aspect within 5..12 x 3..9 inches
    width = min(12.0, max(5.0, 3.5 * ratio + 2))
    height = min(9.0, max(3.0, (width - 2) / max(ratio, 1e-3) + 1.2))
    fig.set_size_inches(width, height)
    ax.set_title(title + (f"  [{'; '.join(notes)}]" if notes else ""), fontsize=9, wrap=True)
    fig.savefig(path, dpi=100)
    return path


def _mosaic(diff: torch.Tensor) -> tuple[torch.Tensor, list, list]:
    """B x C x H x W -> one image: per batch a grid of channel tiles (TILES_PER_ROW a row, no
    gap: separator lines are drawn instead), batches side by side with a blank (NaN) gap.
    -> image, [(x, y, label)] per tile, separator segments [((x0, x1), (y0, y1))]."""
    b, c, h, w = diff.shape
    cols = min(c, TILES_PER_ROW)
    rows = math.ceil(c / cols)
    bgap = max(1, (cols * w) // 12)
    panel_w = cols * w
    image = torch.full((rows * h, b * panel_w + (b - 1) * bgap), float("nan"),
                       dtype=torch.float64)
    labels, lines = [], []
    for bi in range(b):
        x0 = bi * (panel_w + bgap)
        for ci in range(c):
            r, q = divmod(ci, cols)
            y, x = r * h, x0 + q * w
            image[y:y + h, x:x + w] = diff[bi, ci]
            labels.append((x, y, f"c{ci}" if b == 1 else f"b{bi} c{ci}"))
        for q in range(1, cols):
            lines.append(((x0 + q * w - 0.5,) * 2, (-0.5, rows * h - 0.5)))
        for r in range(1, rows):
            lines.append(((x0 - 0.5, x0 + panel_w - 0.5), (r * h - 0.5,) * 2))
    return image, labels, lines
