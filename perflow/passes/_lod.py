"""Level of detail for the interactive timeline: the summary pyramid and the instances kept.

The interactive timeline (:mod:`perflow.passes.html_timeline`) embeds binned summaries at several
zoom levels and the longest instances; its script (``_web/timeline.js``) picks the level and the
instances in view after each pan or zoom.
"""

from __future__ import annotations

import numpy as np

from perflow.sdk import PAG

from ._binned import TimelineData, share_pixels

__all__ = ["SUB", "IDLE", "IDLE_CODE", "pyramid", "finest_bins", "complete_instances", "longest"]

#: Band height of a row in summary pixels (the top one a gap between rows).
SUB = 6
IDLE = "#ffffff00"
#: The pixel value of idle time (and of the gap between rows) in a summary tile.
IDLE_CODE = 255


def finest_bins(levels: int, tile_bins: int) -> int:
    """Bins across the whole span at the finest level of a :func:`pyramid`."""
    return tile_bins * 2 ** (levels - 1)


def pyramid(
    td: TimelineData, t0: float, t1: float, levels: int, tile_bins: int, shares: np.ndarray | None = None
) -> tuple[list[tuple[int, int, np.ndarray]], np.ndarray]:
    """Summary tiles of every level and the finest level's shares.

    Each tile is ``(level, i, pixels)``: ``(rows * SUB, tile_bins)`` uint8, a category index per
    pixel (:data:`IDLE_CODE` where idle, and on the top pixel line of each row: the gap between
    rows); tiles where nothing happens are left out. ``shares``: ``td.shares(t0, t1,
    finest_bins(levels, tile_bins))`` when already computed (with another colouring, say).
    """
    if len(td.names) >= IDLE_CODE:
        raise ValueError(f"at most {IDLE_CODE - 1} timeline categories, not {len(td.names)}")
    finest = finest_bins(levels, tile_bins)
    if shares is None:  # (rows, finest, categories): computed once; coarser levels are means
        shares = td.shares(t0, t1, finest)
    n_rows, n_cats = td.n_rows, len(td.names)
    tiles: list[tuple[int, int, np.ndarray]] = []
    for k in range(levels):
        s_k = shares.reshape(n_rows, tile_bins * 2**k, 2 ** (levels - 1 - k), n_cats).mean(axis=2)
        px = share_pixels(s_k, SUB - 1).reshape(n_rows, SUB - 1, -1)
        px = np.concatenate([np.full((n_rows, 1, px.shape[2]), n_cats, np.int16), px], axis=1)
        px = np.where(px >= n_cats, IDLE_CODE, px).reshape(n_rows * SUB, -1).astype(np.uint8)
        for i in range(2**k):
            tile = np.ascontiguousarray(px[:, i * tile_bins : (i + 1) * tile_bins])
            if not (tile != IDLE_CODE).any():
                continue  # nothing happens in this tile
            tiles.append((k, i, tile))
    return tiles, shares


def complete_instances(pag: PAG, kept: np.ndarray) -> np.ndarray:
    """Whether each kept instance's whole subtree is kept too (then drawing it hides nothing).

    An instance whose subtree is incomplete is drawn as an outline only (it still answers hover);
    the summary beneath shows what its missing descendants do.
    """
    iv = pag.trace.intervals  # type: ignore[union-attr]
    parent = iv["parent"].to_numpy()
    ok = np.zeros(len(iv), dtype=bool)
    ok[kept] = True
    # the parents of the instances not kept are incomplete; then their ancestors, a few at a time
    out = ok.copy()
    out[parent[~ok & (parent >= 0)]] = False
    cur = kept[~out[kept]]  # kept instances just found incomplete
    while len(cur):
        up = parent[cur]
        up = up[up >= 0]
        cur = np.unique(up[out[up]])
        out[cur] = False
    return out[kept]


def longest(start: np.ndarray, end: np.ndarray, cap: int) -> np.ndarray:
    """Positions of at most ``cap`` spans, the longest first, returned in start order."""
    if len(start) <= cap:
        return np.argsort(start, kind="stable")
    keep = np.argpartition(-(end - start), cap - 1)[:cap]
    return keep[np.argsort(start[keep], kind="stable")]
