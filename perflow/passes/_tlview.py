"""The Bokeh side of the interactive timeline: its empty views, the controls above it and the tooltip.

:func:`perflow.passes.html_timeline.timeline_section` packs the data (the summary pyramid, the
instances, the overlays: see its module); :func:`timeline_views` builds the Bokeh document whose views
``_web/timeline.js`` fills from that data after each pan or zoom (the document holds no data of its
own, only the summary strip), and :func:`controls_html` the colour choice, process filter, overlay
check boxes and legend. Bokeh is imported when a timeline is drawn.
"""

from __future__ import annotations

import html as _html
from typing import Any

import numpy as np

from ._binned import TimelineData
from ._lod import IDLE_CODE

__all__ = ["timeline_views", "controls_html", "TOOLTIP", "bokeh_js"]


def timeline_views(
    meta: dict[str, Any], td: TimelineData, tf: TimelineData, shares: np.ndarray, shares_r: np.ndarray,
    *, width: int, title: str,
) -> Any:  # fmt: skip
    """The Bokeh layout (summary strip above the timeline), its init callback reading the page's data."""
    from bokeh.layouts import column
    from bokeh.models import (
        ColumnDataSource,
        CustomJS,
        CustomJSTickFormatter,
        CustomJSTransform,
        FixedTicker,
        LinearColorMapper,
        Range1d,
    )
    from bokeh.plotting import figure

    t0, t1, n_rows, finest = meta["t0"], meta["t1"], meta["n_rows"], meta["finest"]
    mapper = LinearColorMapper(palette=meta["kind_palette"], low=-0.5, high=IDLE_CODE + 0.5)
    height = int(np.clip(22 * n_rows + 20, 160, 820))
    xr = Range1d(t0, t1, bounds=(t0 - 0.02 * (t1 - t0), t1 + 0.02 * (t1 - t0)), name="pf-timeline-x")
    yr = Range1d(n_rows - 0.5, -0.5, name="pf-timeline-y")
    tickfmt = CustomJSTickFormatter(code="return window.pfTickFormat ? window.pfTickFormat(tick, index, ticks) : tick;")
    p = figure(
        frame_width=width,
        frame_height=height,
        x_range=xr,
        y_range=yr,
        tools="xpan,xwheel_zoom,box_zoom,reset,save",
        active_scroll="xwheel_zoom",
        active_drag="xpan",
        x_axis_label="time",
        y_axis_label="process",
        output_backend="canvas",
        name="pf-timeline",
    )
    p.xaxis.formatter = tickfmt
    p.yaxis.ticker = FixedTicker(ticks=list(range(0, n_rows, max(1, int(np.ceil(n_rows / 40))))))
    p.yaxis.major_label_overrides = {i: lab for i, lab in enumerate(meta["labels"])}
    p.ygrid.visible = False
    p.toolbar.logo = None
    tile_view = ColumnDataSource({"image": [], "x": [], "y": [], "dw": [], "dh": []})
    p.image(image="image", x="x", y="y", dw="dw", dh="dh", source=tile_view, color_mapper=mapper)
    outline = CustomJSTransform(v_func="return xs.map((f) => (f > 0 ? 0 : 0.9));")
    inst_view = ColumnDataSource({"left": [], "right": [], "row": [], "c": [], "vertex": [], "dur": [], "fill": []})
    p.hbar(
        y="row", left="left", right="right", height=0.8, source=inst_view,
        fill_color={"field": "c", "transform": mapper}, fill_alpha="fill",
        line_color="#555555", line_alpha={"field": "fill", "transform": outline}, line_width=0.5,
    )  # fmt: skip
    args: dict[str, Any] = {"xr": xr, "yr": yr, "plot": p, "yaxis": p.yaxis[0], "mapper": mapper}
    args.update(tile_view=tile_view, inst_view=inst_view)
    wmap = LinearColorMapper(palette=[f"#d91a1a{a:02x}" for a in range(0, 256, 16)], low=0, high=255)
    wait_binned = p.image(image="image", x="x", y="y", dw="dw", dh="dh", color_mapper=wmap,
                          source=ColumnDataSource({"image": [], "x": [], "y": [], "dw": [], "dh": []}))  # fmt: skip
    wait_view = ColumnDataSource({"left": [], "right": [], "row": []})
    wait_glyph = p.hbar(
        y="row", left="left", right="right", height=0.8, source=wait_view, fill_color="#d91a1a", fill_alpha=0.25,
        line_color="#b00000", hatch_pattern="/", hatch_color="#b00000",
    )  # fmt: skip
    path_view = ColumnDataSource({"x0": [], "y0": [], "x1": [], "y1": []})
    path_glyph = p.segment(x0="x0", y0="y0", x1="x1", y1="y1", source=path_view, line_color="black", line_width=3)
    path_binned_r = p.segment(x0="x0", y0="y0", x1="x1", y1="y1", line_color="black", line_width=2.5,
                              source=ColumnDataSource({"x0": [], "y0": [], "x1": [], "y1": []}))  # fmt: skip
    msg_view = ColumnDataSource({"x0": [], "y0": [], "x1": [], "y1": []})
    msg_glyph = p.segment(x0="x0", y0="y0", x1="x1", y1="y1", source=msg_view, line_color="#333333", line_alpha=0.7)
    args.update(
        wait_view=wait_view, wait_glyph=wait_glyph, wait_binned=wait_binned, path_view=path_view,
        path_glyph=path_glyph, path_binned=path_binned_r, msg_view=msg_view, msg_glyph=msg_glyph,
    )  # fmt: skip
    # the summary strip: processes per category (or function) over time, at the finest level
    strip = figure(frame_width=width, frame_height=90, x_range=xr, tools="", toolbar_location=None, title=title,
                   y_axis_label="processes", name="pf-summary")  # fmt: skip
    n_strip = min(finest, 2048)  # the strip is a thousand pixels wide: 2048 points are plenty
    t_mid = (t0 + (np.arange(n_strip) + 0.5) * (t1 - t0) / n_strip).astype(np.float64)
    strips = {}
    for key, data_, cols in (("kind", td, meta["kind_palette"]), ("region", tf, meta["region_palette"])):
        sh = shares if key == "kind" else shares_r
        counts = sh.sum(axis=0).reshape(n_strip, finest // n_strip, -1).mean(axis=1).astype(np.float32)
        src = {"t": t_mid, **{f"c{i}": counts[:, i] for i in range(len(data_.names))}}
        rs = strip.varea_stack(stackers=[f"c{i}" for i in range(len(data_.names))], x="t", color=cols[: len(data_.names)],
                               source=ColumnDataSource(src))  # fmt: skip
        for r in rs:
            r.visible = key == "kind"
        strips[key] = rs
    strip.xaxis.visible = False
    strip.y_range.start = 0
    args.update(strip_kind=strips["kind"], strip_region=strips["region"])
    lod = CustomJS(code="if (window.pfTimeline && window.pfTimeline.lod) window.pfTimeline.lod();")
    xr.js_on_change("start", lod)
    xr.js_on_change("end", lod)
    from bokeh.document import Document
    from bokeh.events import MouseLeave, MouseMove

    init = CustomJS(
        args=args,
        code="window.pfTimelineInit({xr, yr, plot, yaxis, mapper, tile_view, inst_view, wait_view, wait_glyph, "
        "wait_binned, path_view, path_glyph, path_binned, msg_view, msg_glyph, strip_kind, strip_region, "
        "meta: JSON.parse(document.getElementById('pf-timeline-meta').textContent)});",
    )
    p.js_on_event(
        MouseMove,
        CustomJS(code="if (window.pfTimeline && window.pfTimeline.hover) window.pfTimeline.hover(cb_obj.x, cb_obj.y);"),
    )
    p.js_on_event(
        MouseLeave, CustomJS(code="if (window.pfTimeline && window.pfTimeline.leave) window.pfTimeline.leave();")
    )
    layout = column(strip, p, name="pf-timeline-layout")
    doc = Document()
    doc.add_root(layout)
    doc.js_on_event("document_ready", init)  # the data is decoded once the page is shown
    return layout


def controls_html(td: TimelineData, tf: TimelineData, meta: dict[str, Any], waits: bool, path: bool, msgs: bool) -> str:
    """The colour choice, the process filter, the overlay check boxes and the legend (HTML)."""
    esc = _html.escape
    boxes = []
    for key, label, on, symbol in (
        (
            "waits",
            "wait states",
            waits,
            '<svg width="22" height="12"><defs><pattern id="pfh" width="4" height="4" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><line x1="0" y1="0" x2="0" y2="4" stroke="#b00000" stroke-width="1.5"/></pattern></defs><rect x="1" y="1" width="20" height="10" fill="#d91a1a40" stroke="#b00000"/><rect x="1" y="1" width="20" height="10" fill="url(#pfh)"/></svg>',
        ),
        (
            "path",
            "critical path",
            path,
            '<svg width="22" height="12"><line x1="1" y1="6" x2="21" y2="6" stroke="black" stroke-width="3"/></svg>',
        ),
        (
            "messages",
            "messages",
            msgs,
            '<svg width="22" height="12"><line x1="1" y1="10" x2="21" y2="2" stroke="#333" stroke-width="1"/></svg>',
        ),
    ):
        if on:
            boxes.append(f'<label>{symbol}<input type="checkbox" data-overlay="{key}" checked> {esc(label)}</label>')
    legend = []
    for key, data_, pal in (("kind", td, meta["kind_palette"]), ("region", tf, meta["region_palette"])):
        items = "".join(
            f'<span><span class="sw" style="background:{c}"></span>{esc(n)}</span>' for n, c in zip(data_.names, pal)
        )
        hidden = "" if key == "kind" else ' style="display:none"'
        legend.append(f'<div data-color="{key}"{hidden}>{items}</div>')
    return (
        '<div class="pf-tl-bar">'
        '<label><input type="radio" name="pf-tl-color" value="kind" checked> colour per category</label>'
        f'<label><input type="radio" name="pf-tl-color" value="region"> per function (top {len(tf.names) - 1})</label>'
        '<label>processes <input type="text" id="pf-tl-procs" placeholder="all, or 0-3, 7" '
        'title="the processes shown: ranks and ranges, e.g. 0-3, 7 (empty: all)"></label>'
        + "".join(boxes)
        + "</div>"
        + f'<div class="pf-tl-legend">{"".join(legend)}</div>'
    )


#: The tooltip element and its style (one for the whole timeline).
TOOLTIP = (
    '<div id="pf-timeline-tip" style="position:fixed;display:none;z-index:10;background:#fffffff0;border:1px solid #999;'
    'padding:4px 6px;font-size:12px;font-family:monospace;max-width:48em;pointer-events:none"></div>'
)


def bokeh_js(models: list[Any]) -> str:
    """Bokeh's JavaScript for ``models`` only (inline: the page works offline; no widgets, no MathJax)."""
    from bokeh.embed.bundle import bundle_for_objs_and_resources
    from bokeh.resources import Resources

    bundle = bundle_for_objs_and_resources(models, Resources(mode="inline"))
    return bundle._render_js()
