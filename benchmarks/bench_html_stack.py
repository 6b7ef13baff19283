"""Benchmark: Bokeh against Plotly for the interactive timeline (how the plotting stack was chosen).

Both draw the same thing an HTML timeline needs: a summary image (rows x bins RGBA pixels) and
``--rects`` rectangles with hover text, into one standalone, offline HTML file (the library's
JavaScript inline). Prints the time to build and write the file and its size. The numbers are in
docs/viewing.md.

    python benchmarks/bench_html_stack.py --rects 20000
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from pathlib import Path

import numpy as np


def data(rows: int, bins: int, rects: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    img = rng.integers(0, 255, size=(rows * 9, bins, 4), dtype=np.uint8)
    img[..., 3] = 255
    x0 = np.sort(rng.random(rects))
    return img, {
        "x0": x0,
        "x1": x0 + rng.random(rects) * 1e-3,
        "row": rng.integers(0, rows, rects).astype(np.float64),
        "name": np.array([f"region_{i % 50}" for i in range(rects)]),
    }


def with_bokeh(img: np.ndarray, d: dict[str, np.ndarray], out: Path) -> None:
    from bokeh.embed import file_html
    from bokeh.models import ColumnDataSource, HoverTool
    from bokeh.plotting import figure
    from bokeh.resources import INLINE

    rows = img.shape[0] // 9
    p = figure(width=1200, height=600, y_range=(rows - 0.5, -0.5), tools="xpan,xwheel_zoom,reset")
    rgba = img.view(np.uint32).reshape(img.shape[:2])
    p.image_rgba(image=[rgba], x=0.0, y=rows - 0.5, dw=1.0, dh=float(rows))
    src = ColumnDataSource(
        {"left": d["x0"], "right": d["x1"], "bottom": d["row"] - 0.4, "top": d["row"] + 0.4, "name": d["name"]}
    )
    r = p.quad(source=src, left="left", right="right", bottom="bottom", top="top", color="#4c72b0")
    p.add_tools(HoverTool(renderers=[r], tooltips=[("name", "@name")]))
    out.write_text(file_html(p, INLINE, "bench"), encoding="utf-8")


def with_plotly(img: np.ndarray, d: dict[str, np.ndarray], out: Path) -> None:
    import plotly.graph_objects as go

    rows = img.shape[0] // 9
    fig = go.Figure()
    fig.add_trace(go.Image(z=img, x0=0.0, dx=1.0 / img.shape[1], y0=-0.5, dy=1.0 / 9, colormodel="rgba"))
    # rectangles as one scattergl trace of closed polygons (None-separated), the fast way in Plotly
    n = len(d["x0"])
    xs = np.c_[d["x0"], d["x1"], d["x1"], d["x0"], d["x0"], np.full(n, np.nan)].ravel()
    ys = np.c_[
        d["row"] - 0.4, d["row"] - 0.4, d["row"] + 0.4, d["row"] + 0.4, d["row"] - 0.4, np.full(n, np.nan)
    ].ravel()
    fig.add_trace(go.Scattergl(x=xs, y=ys, fill="toself", mode="lines", text=np.repeat(d["name"], 6), hoverinfo="text"))
    fig.update_yaxes(range=[rows - 0.5, -0.5])
    fig.write_html(out, include_plotlyjs=True, full_html=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--bins", type=int, default=1500)
    ap.add_argument("--rects", type=int, default=20000)
    a = ap.parse_args()
    img, d = data(a.rows, a.bins, a.rects)
    with tempfile.TemporaryDirectory() as tmp:
        for name, fn in (("bokeh", with_bokeh), ("plotly", with_plotly)):
            out = Path(tmp) / f"{name}.html"
            t = time.perf_counter()
            fn(img, d, out)
            dt = time.perf_counter() - t
            text = out.read_text(encoding="utf-8")
            offline = re.search(r'<(script|link)[^>]+(src|href)="https?://', text) is None
            print(f"{name:7s} build+write {dt:5.2f} s  file {out.stat().st_size / 2**20:6.2f} MiB  offline={offline}")


if __name__ == "__main__":
    main()
