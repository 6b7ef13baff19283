"""An interactive, offline HTML timeline of a trace (Bokeh), with level of detail from binned summaries.

Zoomed out, every process's row stacks the share of each category in each time bin (the binned
summaries of :mod:`perflow.passes._binned`, as in the static timeline), and a strip above shows how
many processes are in each category (Vampir's summary timeline). The summaries are precomputed in
numpy as a pyramid: level ``k`` cuts the trace into ``2**k`` tiles of ``tile_bins`` bins, so zooming
in swaps in finer tiles. Zoomed in, the instances themselves appear, with the wait states, the
critical path and the messages in view.

Above the timeline: the colour choice (per category, or per function: the ``top_regions``
functions with the most exclusive time, the others grouped), a process filter (``0-3, 7``), and
the overlays (wait states, critical path, messages) as check boxes; a legend shows every colour
and the overlays' symbols. One tooltip follows the mouse (the innermost instance, or what the
summary shows there); the axis reads in s, ms, us or ns.

The page embeds its data compressed (zlib, decoded in the browser): at most ``max_instances``
instances (the longest first: the ones visible when zoomed out the least; below them the finest
summary level still shows every category), the wait states, critical-path segments and messages
up to their caps, times as integer ticks (deltas, ``tick`` = 1 ns or coarser for very long runs).
``_web/timeline.js`` fills Bokeh's views for the window after each pan or zoom.

>>> html = timeline_html(pag, waits, path["segments"], path="timeline.html")   # doctest: +SKIP
"""

from __future__ import annotations

import base64
import html as _html
import json
import logging
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from perflow.sdk import PAG, PassError, pass_
from perflow.sdk.render import write_text

from ._binned import (
    TimelineData,
    data_key,
    instance_categories,
    interval_categories,
    path_rows,
    path_runs,
    span_cover,
    take_shared,
    timeline_data,
)
from ._lod import IDLE, IDLE_CODE, SUB, complete_instances, finest_bins, longest, pyramid
from ._tlview import TOOLTIP, bokeh_js, controls_html, timeline_views
from .html_tree import web_asset
from .timeline import overlay_table

__all__ = ["timeline_html", "timeline_section", "TimelineSection"]

log = logging.getLogger(__name__)


@dataclass
class TimelineSection:
    """A timeline for a page: the Bokeh root model, the controls and legend above it, and its sizes."""

    model: Any
    controls: str
    embedded: dict[str, int]
    blob: str = ""
    region_blob: str = ""
    meta: str = "{}"

    def data_script(self) -> str:
        """The data: its layout (JSON) and the compressed arrays, in script elements the page's script decodes."""
        return (
            f'<script type="application/json" id="pf-timeline-meta">{self.meta}</script>'
            f'<script type="application/octet-stream" id="pf-timeline-blob">{self.blob}</script>'
            f'<script type="application/octet-stream" id="pf-timeline-blob-region">{self.region_blob}</script>'
        )

    def html(self, bokeh_div: str) -> str:
        """The controls, Bokeh's element, the status line, the tooltip and the data."""
        return (
            f'<div id="pf-timeline">{self.controls}\n{bokeh_div}\n<div id="pf-timeline-status"></div>{TOOLTIP}</div>\n'
            f"{self.data_script()}"
        )


class _Pack:
    """Arrays appended to one buffer (little-endian), with their layout for the script."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.size = 0
        self.layout: dict[str, tuple[int, int, str]] = {}

    def add(self, name: str | None, arr: np.ndarray, code: str) -> int:
        dt = {"u8": "<u1", "u16": "<u2", "u32": "<u4", "i32": "<i4", "f32": "<f4", "f64": "<f8"}[code]
        b = np.ascontiguousarray(arr, dtype=dt).tobytes()
        pad = (-self.size) % 8  # every array starts 8-aligned
        if pad:
            self.parts.append(b"\0" * pad)
            self.size += pad
        off = self.size
        self.parts.append(b)
        self.size += len(b)
        if name is not None:
            self.layout[name] = (off, int(np.asarray(arr).size), code)
        return off

    def encoded(self) -> str:
        # level 1: a fifth of level 6's time for ~15% more bytes (20 M events: 0.17 vs 1.15 s, 4.5 vs 3.9 MB)
        return base64.b64encode(zlib.compress(b"".join(self.parts), 1)).decode()


def _ticks(t0: float, starts: np.ndarray, durs: np.ndarray, tick: float) -> tuple[np.ndarray, np.ndarray]:
    """Start deltas (from the previous start; the first from ``t0``) and durations, in integer ticks."""
    s = np.round((starts - t0) / tick).astype(np.int64)
    d = np.diff(s, prepend=0)
    return d.clip(0, 2**32 - 1).astype(np.uint32), np.round(durs / tick).clip(0, 2**32 - 1).astype(np.uint32)


def _recolor(pag: PAG, td: TimelineData, top_regions: int) -> TimelineData:
    """The same instances coloured per function (the ``top_regions`` with the most exclusive time, then other)."""
    vcode, names, colors = interval_categories(pag, "region", top_regions)
    cat, parent_cat = instance_categories(pag, vcode, td.index)
    return replace(td, cat=cat, parent_cat=parent_cat, names=list(names), colors=list(colors))


def _palette(colors: list[str]) -> list[str]:

    return [*colors, *(["#dddddd"] * (IDLE_CODE - len(colors))), IDLE]


def timeline_section(
    pag: PAG,
    wait_states: pd.DataFrame | None = None,
    critical_path: pd.DataFrame | None = None,
    *,
    processes: list[int] | None = None,
    top_regions: int = 10,
    levels: int = 4,
    tile_bins: int = 1024,
    max_instances: int = 200_000,
    max_overlays: int = 100_000,
    max_shown: int = 30_000,
    messages: bool = True,
    max_messages: int = 20_000,
    width: int = 1000,
    title: str = "summary timeline: processes per category",
    reuse: Sequence[Any] = (),
) -> TimelineSection:
    """The Bokeh model and the controls of an interactive timeline (see the module docstring); imports Bokeh.

    ``reuse``: objects that may keep the timeline columns of ``pag`` (a flow run's static timeline
    figure, :func:`perflow.passes._binned.share_data`), taken instead of building them again.
    """
    from matplotlib.colors import to_hex

    who = "timeline_html"
    if levels < 1 or tile_bins < 1:
        raise PassError(f"{who}: levels and tile_bins must be at least 1, not {levels} and {tile_bins}")
    if levels > 8:
        raise PassError(f"{who}: at most 8 summary levels, not {levels}")
    ws = overlay_table(wait_states, who, "wait_states") if wait_states is not None else None
    cp = overlay_table(critical_path, who, "critical_path") if critical_path is not None else None
    td = take_shared(reuse, pag, data_key(processes, "kind", top_regions)) or timeline_data(
        pag, processes=processes, color_by="kind", top_regions=top_regions, who=who
    )
    tf = _recolor(pag, td, top_regions)
    t0, t1 = td.span
    if not t1 > t0:
        t1 = t0 + 1e-9
    n_rows = td.n_rows
    if n_rows > 65535:
        raise PassError(f"{who}: at most 65535 timeline rows (locations), not {n_rows}; choose some with processes=")
    tick = max(1e-9, (t1 - t0) / 2**31)
    pack = _Pack()
    meta: dict[str, Any] = {"t0": t0, "t1": t1, "levels": levels, "tile_bins": tile_bins, "sub": SUB, "tick": tick}
    # summary pyramids, per category and per function
    both = td.shares_with([tf], t0, t1, finest_bins(levels, tile_bins))  # one pass over the instances
    tiles_k, shares = pyramid(td, t0, t1, levels, tile_bins, both[0])
    tiles_r, shares_r = pyramid(tf, t0, t1, levels, tile_bins, both[1])
    meta["tiles_kind"] = [[lv, i, pack.add(None, img, "u8")] for lv, i, img in tiles_k]
    region = _Pack()  # the summary per function: its own data, decoded when asked for
    meta["tiles_region"] = [[lv, i, region.add(None, img, "u8")] for lv, i, img in tiles_r]
    meta["tile_rows"] = n_rows * SUB
    finest = shares.shape[1]
    meta["finest"] = finest
    # instances: the longest max_instances, children after parents (they paint over them), deltas per depth
    keep = longest(td.enter, td.leave, max_instances)
    depth = pag.vertex_table["depth"].to_numpy()[td.vertex[keep]]
    order = np.lexsort((td.enter[keep], depth))
    keep, depth = keep[order], depth[order]
    cuts = np.flatnonzero(np.diff(depth)) + 1 if len(keep) else np.zeros(0, np.int64)
    groups = np.diff(np.r_[0, cuts, len(keep)]).astype(int).tolist() if len(keep) else []
    starts = td.enter[keep]
    s_ticks = np.round((starts - t0) / tick).astype(np.int64)
    ds = np.diff(s_ticks, prepend=0)
    ds[np.r_[0, cuts].astype(np.int64)[: len(groups)]] = s_ticks[np.r_[0, cuts].astype(np.int64)[: len(groups)]]
    ds = ds.clip(0, 2**32 - 1).astype(np.uint32)  # within a depth, starts only grow: deltas from the previous
    dd = np.round((td.leave[keep] - starts) / tick).clip(0, 2**32 - 1).astype(np.uint32)
    nv = pag.n_vertices
    pack.add("inst_start", ds, "u32")
    pack.add("inst_dur", dd, "u32")
    pack.add("inst_row", td.row[keep], "u16")
    pack.add("inst_cat", td.cat[keep], "u8")
    pack.add("inst_fn", tf.cat[keep], "u8")
    pack.add("inst_vertex", td.vertex[keep], "u32" if nv > 65535 else "u16")
    pack.add("inst_fill", np.where(complete_instances(pag, td.index[keep]), 255, 0), "u8")
    meta["inst_groups"] = groups
    embedded = {"instances": int(len(keep)), "of_instances": int(len(td.enter))}

    def overlay(prefix: str, s: np.ndarray, e: np.ndarray, y0: np.ndarray, y1: np.ndarray | None) -> None:
        o = np.argsort(s, kind="stable")
        a, b = _ticks(t0, s[o], (e - s)[o], tick)
        pack.add(f"{prefix}_start", a, "u32")
        pack.add(f"{prefix}_dur", b, "u32")
        pack.add(f"{prefix}_y0", y0[o], "u16")
        if y1 is not None:
            pack.add(f"{prefix}_y1", y1[o], "u16")

    if ws is not None:
        wr = td.rows_of(ws["process"].to_numpy(), ws["thread"].to_numpy())
        ok = np.flatnonzero(wr >= 0)
        s_, e_ = ws["start"].to_numpy()[ok], ws["end"].to_numpy()[ok]
        wbins = min(finest, 2048)  # shown zoomed out only: a pixel per bin is plenty
        cover = span_cover(wr[ok], s_, e_, n_rows=n_rows, t0=t0, t1=t1, bins=wbins)
        alpha = np.zeros((n_rows, SUB, wbins), np.uint8)
        alpha[:, -1, :] = np.round(cover * 255).astype(np.uint8)  # a strip along the bottom of each band
        meta["wait_bins"] = wbins
        pack.add("wait_alpha", alpha.reshape(-1), "u8")
        k = longest(s_, e_, max_overlays)
        overlay("wait", s_[k], e_[k], wr[ok][k], None)
        embedded["wait_states"] = int(len(k))
    path_binned = {"x0": [], "x1": [], "row": []}
    if cp is not None:
        cr = td.rows_of(cp["process"].to_numpy(), cp["thread"].to_numpy())
        s_, e_ = cp["start"].to_numpy(), cp["end"].to_numpy()
        seg = [np.c_[s_, cr, e_, cr]]
        if len(cp) > 1:
            jump = cr[1:] != cr[:-1]
            seg.append(np.c_[e_[:-1], cr[:-1], s_[1:], cr[1:]][jump])
        allseg = np.concatenate(seg)
        allseg = allseg[(allseg[:, 1] >= 0) & (allseg[:, 3] >= 0)]
        allseg = allseg[np.argsort(allseg[:, 0], kind="stable")][:max_overlays]
        overlay("path", allseg[:, 0], allseg[:, 2], allseg[:, 1].astype(np.int64), allseg[:, 3].astype(np.int64))
        ok = cr >= 0
        rows = path_rows(cr[ok].astype(np.float64), s_[ok], e_[ok], t0=t0, t1=t1, bins=finest)
        bx0, bx1, brow = path_runs(rows, t0, t1)
        path_binned = {
            "x0": np.asarray(bx0).tolist(),
            "x1": np.asarray(bx1).tolist(),
            "row": np.asarray(brow).astype(int).tolist(),
        }
        embedded["path_segments"] = int(len(allseg))
    meta["path_binned"] = path_binned
    if messages and pag.trace is not None and len(pag.trace.messages):
        m = pag.trace.messages
        sr = td.rows_of(m["send_process"].to_numpy(), m["send_thread"].to_numpy())
        rr = td.rows_of(m["recv_process"].to_numpy(), m["recv_thread"].to_numpy())
        ok = np.flatnonzero((sr >= 0) & (rr >= 0))
        if len(ok) > max_messages:
            ok = ok[np.unique(np.linspace(0, len(ok) - 1, max_messages).round().astype(np.int64))]
        st, rt = m["send_time"].to_numpy()[ok], m["recv_time"].to_numpy()[ok]
        overlay("msg", st, np.maximum(rt, st), sr[ok], rr[ok])
        embedded["messages"] = int(len(ok))
    meta.update(
        layout=pack.layout,
        n_rows=n_rows,
        labels=td.labels(),
        row_process=td.locs["process"].astype(int).tolist(),
        kind_names=list(td.names),
        region_names=list(tf.names),
        kind_palette=_palette([to_hex(c) for c in td.colors]),
        region_palette=_palette([to_hex(c) for c in tf.colors]),
        vertex_names=pag.vertex_table["name"].astype(str).tolist(),
        call_paths=pag.call_paths().astype(str).tolist(),
        max_shown=max_shown,
        max_overlay=5000,
    )
    blob, region_blob = pack.encoded(), region.encoded()
    embedded["bytes"] = len(blob) + len(region_blob)
    layout = timeline_views(meta, td, tf, shares, shares_r, width=width, title=title)
    controls = controls_html(td, tf, meta, ws is not None, cp is not None, "msg_start" in pack.layout)
    # the layout and labels as the page's own JSON, not as Bokeh properties (validating and serialising
    # them property by property cost more than the rest of the document); "</" cannot end the script
    meta_json = json.dumps(meta, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    return TimelineSection(layout, controls, embedded, blob, region_blob, meta_json)


@pass_(version="2", tags=("plot", "report"))
def timeline_html(
    pag: PAG,
    wait_states: pd.DataFrame | None = None,
    critical_path: pd.DataFrame | None = None,
    *,
    processes: list[int] | None = None,
    top_regions: int = 10,
    levels: int = 4,
    tile_bins: int = 1024,
    max_instances: int = 200_000,
    max_overlays: int = 100_000,
    max_shown: int = 30_000,
    messages: bool = True,
    max_messages: int = 20_000,
    title: str = "perflow timeline",
    path: str | None = None,
) -> str:
    """An interactive timeline as one self-contained HTML page (Bokeh, offline): zoom, pan, hover.

    Parameters
    ----------
    pag : PAG
        A trace-backed PAG.
    wait_states : DataFrame, optional
        Wait states (``process``, ``start``, ``end``; ``thread`` optional): hatched boxes
        when zoomed in, the share of each bin spent waiting (a red strip) when zoomed out.
    critical_path : DataFrame, optional
        Critical-path segments (``process``, ``start``, ``end``): the path with its jumps
        when zoomed in, a dash per bin on the row it is on when zoomed out.
    processes : list of int, optional
        Processes to embed (default: all; the page's filter then picks among them).
    top_regions : int
        Functions with their own colour when colouring per function.
    levels : int
        Summary levels: level ``k`` holds ``2**k`` tiles of ``tile_bins`` bins.
    tile_bins : int
        Bins per summary tile.
    max_instances : int
        Instances embedded in the page, the longest first.
    max_overlays : int
        Wait states and path segments embedded, each.
    max_shown : int
        Instances are drawn one by one when at most this many are in view; else the summary shows.
    messages : bool
        Embed point-to-point messages (drawn when few are in view).
    max_messages : int
        At most this many messages (evenly subsampled).
    title : str
        Page title.
    path : str, optional
        Also write the page there.

    Returns
    -------
    str
        The HTML document.
    """
    from bokeh.embed import components

    sec = timeline_section(
        pag, wait_states, critical_path, processes=processes, top_regions=top_regions, levels=levels,
        tile_bins=tile_bins, max_instances=max_instances, max_overlays=max_overlays, max_shown=max_shown,
        messages=messages, max_messages=max_messages,
    )  # fmt: skip
    script, div = components(sec.model)
    esc = _html.escape
    text = (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>\n'
        f"{bokeh_js([sec.model])}\n<style>{web_asset('page.css')}</style></head>\n<body>\n<h1>{esc(title)}</h1>\n"
        f"{sec.html(div)}\n<script>{web_asset('timeline.js')}</script>\n{script}\n</body></html>\n"
    )
    write_text(text, path)
    return text
