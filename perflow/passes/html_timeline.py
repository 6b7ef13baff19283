"""An interactive, offline HTML timeline of a trace (Bokeh), with level of detail from binned summaries.

Zoomed out, every process's row stacks the share of each category in each time bin (the binned
summaries of :mod:`perflow.passes._binned`, as in the static timeline), and a strip above shows how
many processes are in each category (Vampir's summary timeline). The summaries are precomputed in
numpy as a pyramid: level ``k`` cuts the trace into ``2**k`` tiles of ``tile_bins`` bins, so zooming
in swaps in finer tiles. Zoomed in, the instances themselves appear (hover: region, call path,
process, start, duration), with the wait states, the critical path and the messages in view.

The page embeds its data: at most ``max_instances`` instances (the longest first: the ones visible
when zoomed out the least; below them the finest summary level still shows every category), the
wait states, critical-path segments and messages up to their caps. A small ``CustomJS`` callback
picks the level and the instances in view after each pan or zoom; everything else is Bokeh.

>>> html = timeline_html(pag, waits, path["segments"], path="timeline.html")   # doctest: +SKIP
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pandas as pd

from perflow.sdk import PAG, PassError, pass_
from perflow.sdk.render import write_text

from ._binned import path_rows, path_runs, span_cover, timeline_data
from ._lod import IDLE, LOD_JS, SUB, TIME_JS, complete_instances, longest, pyramid
from .timeline import overlay_table

__all__ = ["timeline_html", "timeline_model", "BOKEH_JS"]

log = logging.getLogger(__name__)


def timeline_model(
    pag: PAG,
    wait_states: pd.DataFrame | None = None,
    critical_path: pd.DataFrame | None = None,
    *,
    processes: list[int] | None = None,
    color_by: str = "kind",
    top_regions: int = 10,
    levels: int = 4,
    tile_bins: int = 1024,
    max_instances: int = 1_000_000,
    max_overlays: int = 100_000,
    max_shown: int = 30_000,
    messages: bool = True,
    max_messages: int = 20_000,
    width: int = 1000,
    title: str = "timeline",
) -> Any:
    """The Bokeh document of an interactive timeline (see :func:`timeline_html`); imports Bokeh."""
    from bokeh.layouts import column
    from bokeh.models import (
        ColumnDataSource,
        CustomJS,
        CustomJSHover,
        CustomJSTransform,
        Div,
        HoverTool,
        LinearColorMapper,
        Range1d,
    )
    from bokeh.plotting import figure

    # instances whose subtree is not all embedded: an outline (for hover) over the summary, no fill
    outline = CustomJSTransform(v_func="return xs.map((f) => (f > 0 ? 0 : 0.9));")
    who = "timeline_html"
    if levels < 1 or tile_bins < 1:
        raise PassError(f"{who}: levels and tile_bins must be at least 1, not {levels} and {tile_bins}")
    ws = overlay_table(wait_states, who, "wait_states") if wait_states is not None else None
    cp = overlay_table(critical_path, who, "critical_path") if critical_path is not None else None
    td = timeline_data(pag, processes=processes, color_by=color_by, top_regions=top_regions, who=who)
    t0, t1 = td.span
    if not t1 > t0:
        t1 = t0 + 1e-9
    n_rows, n_cats = td.n_rows, len(td.names)
    from matplotlib.colors import to_hex

    colors = [to_hex(c) for c in td.colors]
    tiles, shares = pyramid(td, t0, t1, levels, tile_bins)
    mapper = LinearColorMapper(palette=[*colors, IDLE], low=-0.5, high=n_cats + 0.5)
    labels = td.labels()
    paths = pag.call_paths().astype(str).tolist()
    vnames = pag.vertex_table["name"].astype(str).tolist()
    time_fmt = CustomJSHover(code=TIME_JS)
    row_fmt = CustomJSHover(args={"labels": labels}, code="return labels[Math.round(value)] ?? '';")
    cat_fmt = CustomJSHover(args={"names": [*td.names, "idle"]}, code="return names[value] ?? '';")
    name_fmt = CustomJSHover(args={"names": vnames}, code="return names[value] ?? '';")
    path_fmt = CustomJSHover(args={"paths": paths}, code="return paths[value] ?? '';")

    height = int(np.clip(22 * n_rows + 20, 200, 820))
    xr = Range1d(t0, t1, bounds=(t0 - 0.02 * (t1 - t0), t1 + 0.02 * (t1 - t0)), name="pf-timeline-x")
    p = figure(
        frame_width=width,
        frame_height=height,
        x_range=xr,
        y_range=Range1d(n_rows - 0.5, -0.5),
        tools="xpan,xwheel_zoom,xbox_zoom,reset,save",
        active_scroll="xwheel_zoom",
        active_drag="xpan",
        x_axis_label="time (s)",
        y_axis_label="process",
        output_backend="canvas",
        name="pf-timeline",
    )
    p.yaxis.ticker = list(range(0, n_rows, max(1, int(np.ceil(n_rows / 40)))))
    p.yaxis.major_label_overrides = {i: labels[i] for i in range(n_rows)}
    p.ygrid.visible = False
    tile_store = ColumnDataSource(tiles)
    tile_view = ColumnDataSource({k: [v for v, lv in zip(tiles[k], tiles["level"]) if lv == 0] for k in tiles})
    img = p.image(image="image", x="x", y="y", dw="dw", dh="dh", source=tile_view, color_mapper=mapper)
    p.add_tools(
        HoverTool(
            renderers=[img],
            tooltips=[("time", "$x{time}"), ("process", "$y{row}"), ("category", "@image{cat}")],
            formatters={"$x": time_fmt, "$y": row_fmt, "@image": cat_fmt},
        )
    )
    # instances: the longest max_instances, children after parents so they paint over them
    keep = longest(td.enter, td.leave, max_instances)
    depth = pag.vertex_table["depth"].to_numpy()[td.vertex[keep]]
    keep = keep[np.argsort(depth, kind="stable")]
    store = ColumnDataSource(
        {
            "left": td.enter[keep],
            "right": td.leave[keep],
            "row": td.row[keep].astype(np.int32),
            "cat": td.cat[keep].astype(np.uint8),
            "vertex": td.vertex[keep].astype(np.int32),
            "dur": (td.leave[keep] - td.enter[keep]).astype(np.float64),
            "fill": np.where(complete_instances(pag, td.index[keep]), 1.0, 0.0).astype(np.float32),
        }
    )
    empty = {"left": [], "right": [], "row": [], "cat": [], "vertex": [], "vid": [], "dur": [], "fill": []}
    inst_view = ColumnDataSource(empty)
    bars = p.hbar(
        y="row",
        left="left",
        right="right",
        height=0.8,
        source=inst_view,
        fill_color={"field": "cat", "transform": mapper},
        fill_alpha="fill",
        line_color="#555555",
        line_alpha={"field": "fill", "transform": outline},
        line_width=0.5,
    )
    p.add_tools(
        HoverTool(
            renderers=[bars],
            tooltips=[
                ("region", "@vertex{name}"),
                ("call path", "@vid{path}"),
                ("process", "@row{row}"),
                ("start", "@left{time}"),
                ("duration", "@dur{time}"),
            ],
            formatters={"@vertex": name_fmt, "@vid": path_fmt, "@row": row_fmt, "@left": time_fmt, "@dur": time_fmt},
        )
    )
    finest = shares.shape[1]
    args: dict[str, Any] = {"waits": None, "path": None, "msgs": None}
    if ws is not None:
        wr = td.rows_of(ws["process"].to_numpy(), ws["thread"].to_numpy())
        ok = np.flatnonzero(wr >= 0)
        s_, e_ = ws["start"].to_numpy()[ok], ws["end"].to_numpy()[ok]
        cover = span_cover(wr[ok], s_, e_, n_rows=n_rows, t0=t0, t1=t1, bins=finest)
        alpha = np.zeros((n_rows, SUB, finest), np.uint8)
        alpha[:, -1, :] = np.round(cover * 255).astype(np.uint8)  # a strip along the bottom of each band
        wmap = LinearColorMapper(palette=[f"#d91a1a{a:02x}" for a in range(0, 256, 16)], low=0, high=255)
        wait_binned = p.image(
            image=[alpha.reshape(n_rows * SUB, finest)], x=t0, y=-0.5, dw=t1 - t0, dh=float(n_rows), color_mapper=wmap
        )
        k = longest(s_, e_, max_overlays)
        waits = ColumnDataSource({"left": s_[k], "right": e_[k], "row": wr[ok][k].astype(np.int32)})
        wait_view = ColumnDataSource({"left": [], "right": [], "row": []})
        p.hbar(
            y="row",
            left="left",
            right="right",
            height=0.8,
            source=wait_view,
            fill_color="#d91a1a",
            fill_alpha=0.25,
            line_color="#b00000",
            hatch_pattern="/",
            hatch_color="#b00000",
            legend_label="wait states",
        )
        args.update(waits=waits, wait_view=wait_view, wait_binned=wait_binned)
    if cp is not None:
        cr = td.rows_of(cp["process"].to_numpy(), cp["thread"].to_numpy()).astype(np.float64)
        s_, e_ = cp["start"].to_numpy(), cp["end"].to_numpy()
        seg = [np.c_[s_, cr, e_, cr]]
        if len(cp) > 1:
            jump = cr[1:] != cr[:-1]
            seg.append(np.c_[e_[:-1], cr[:-1], s_[1:], cr[1:]][jump])
        allseg = np.concatenate(seg)
        allseg = allseg[(allseg[:, 1] >= 0) & (allseg[:, 3] >= 0)]
        allseg = allseg[np.argsort(allseg[:, 0], kind="stable")][:max_overlays]
        path = ColumnDataSource({"x0": allseg[:, 0], "y0": allseg[:, 1], "x1": allseg[:, 2], "y1": allseg[:, 3]})
        path_view = ColumnDataSource({"x0": [], "y0": [], "x1": [], "y1": []})
        p.segment(
            x0="x0",
            y0="y0",
            x1="x1",
            y1="y1",
            source=path_view,
            line_color="black",
            line_width=3,
            legend_label="critical path",
        )
        ok = cr >= 0
        rows = path_rows(cr[ok], s_[ok], e_[ok], t0=t0, t1=t1, bins=finest)
        bx0, bx1, brow = path_runs(rows, t0, t1)
        path_binned = p.segment(x0=bx0, y0=brow, x1=bx1, y1=brow, line_color="black", line_width=2.5)
        args.update(path=path, path_view=path_view, path_binned=path_binned)
    if messages and pag.trace is not None and len(pag.trace.messages):
        m = pag.trace.messages
        sr = td.rows_of(m["send_process"].to_numpy(), m["send_thread"].to_numpy())
        rr = td.rows_of(m["recv_process"].to_numpy(), m["recv_thread"].to_numpy())
        ok = np.flatnonzero((sr >= 0) & (rr >= 0))
        if len(ok) > max_messages:
            ok = ok[np.unique(np.linspace(0, len(ok) - 1, max_messages).round().astype(np.int64))]
        st, rt = m["send_time"].to_numpy()[ok], m["recv_time"].to_numpy()[ok]
        o = np.argsort(st, kind="stable")
        msgs = ColumnDataSource(
            {"x0": st[o], "y0": sr[ok][o].astype(np.float64), "x1": rt[o], "y1": rr[ok][o].astype(np.float64)}
        )
        msg_view = ColumnDataSource({"x0": [], "y0": [], "x1": [], "y1": []})
        p.segment(
            x0="x0",
            y0="y0",
            x1="x1",
            y1="y1",
            source=msg_view,
            line_color="#333333",
            line_alpha=0.7,
            legend_label="messages",
        )
        args.update(msgs=msgs, msg_view=msg_view)
    if p.legend:
        p.legend.click_policy = "hide"
        p.add_layout(p.legend[0], "right")
    # the summary strip: processes per category over time (finest level)
    counts = shares.sum(axis=0)
    strip_src = {"t": t0 + (np.arange(finest) + 0.5) * (t1 - t0) / finest}
    strip_src.update({f"c{i}": counts[:, i] for i in range(n_cats)})
    strip = figure(
        frame_width=width,
        frame_height=110,
        x_range=xr,
        tools="",
        toolbar_location=None,
        title=title,
        y_axis_label="processes",
        name="pf-summary",
    )
    strip.varea_stack(
        stackers=[f"c{i}" for i in range(n_cats)],
        x="t",
        color=colors,
        legend_label=list(td.names),
        source=ColumnDataSource(strip_src),
    )
    leg = strip.legend[0]
    leg.ncols = int(np.ceil(n_cats / 5))
    leg.label_text_font_size, leg.glyph_height, leg.label_height, leg.spacing = "9pt", 12, 12, 0
    strip.add_layout(leg, "right")
    strip.xaxis.visible = False
    strip.y_range.start = 0
    status = Div(text="", name="pf-timeline-status", styles={"font-family": "monospace", "font-size": "12px"})
    meta = {"t0": t0, "t1": t1, "levels": levels, "width": width, "max_shown": max_shown, "max_overlay": 5000}
    cb = CustomJS(
        args={
            "xr": xr,
            "tiles": tile_store,
            "tile_view": tile_view,
            "store": store,
            "inst_view": inst_view,
            "status": status,
            "meta": meta,
            **args,
        },
        code=LOD_JS,
    )
    xr.js_on_change("start", cb)
    xr.js_on_change("end", cb)
    from bokeh.document import Document

    doc = Document()
    doc.add_root(column(strip, p, status, name="pf-timeline-layout"))
    doc.js_on_event("document_ready", cb)  # the first level of detail, once the page is shown
    doc.title = title
    return doc


#: Bokeh's JavaScript and CSS for a page holding several Bokeh models (inline: the page works offline).
def BOKEH_JS() -> str:  # noqa: N802 - a constant computed on demand
    from bokeh.resources import INLINE

    return INLINE.render()


@pass_(version="1", tags=("plot", "report"))
def timeline_html(
    pag: PAG,
    wait_states: pd.DataFrame | None = None,
    critical_path: pd.DataFrame | None = None,
    *,
    processes: list[int] | None = None,
    color_by: str = "kind",
    top_regions: int = 10,
    levels: int = 4,
    tile_bins: int = 1024,
    max_instances: int = 1_000_000,
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
        Processes to show (default: all).
    color_by, top_regions
        As in :func:`perflow.passes.timeline.plot_timeline`.
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
    from bokeh.embed import file_html
    from bokeh.resources import INLINE

    model = timeline_model(
        pag,
        wait_states,
        critical_path,
        processes=processes,
        color_by=color_by,
        top_regions=top_regions,
        levels=levels,
        tile_bins=tile_bins,
        max_instances=max_instances,
        max_overlays=max_overlays,
        max_shown=max_shown,
        messages=messages,
        max_messages=max_messages,
        title=title,
    )
    text = file_html(model, INLINE, title)
    write_text(text, path)
    return text
