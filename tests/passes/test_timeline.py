"""Tests of the timeline pass (perflow/passes/timeline.py)."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.colors import to_hex
from matplotlib.quiver import Quiver

import perflow
from perflow.errors import PassError
from perflow.passes._binned import path_rows, share_pixels, span_cover
from perflow.passes.timeline import aggregate_bins, plot_timeline
from perflow.sdk.figures import CATEGORY_COLORS


@pytest.fixture(scope="module")
def ping() -> perflow.PAG:
    """Rank 0: compute [0, 4), MPI_Send [4, 5) to rank 1. Rank 1: compute [0, 1), MPI_Recv [1, 5.5)."""
    tb = perflow.TraceBuilder()
    tb.call(0, "compute", 0.0, 4.0)
    tb.call(0, "MPI_Send", 4.0, 5.0, send={"to": 1, "bytes": 8})
    tb.call(1, "compute", 0.0, 1.0)
    tb.call(1, "MPI_Recv", 1.0, 5.5, recv={"frm": 0, "bytes": 8})
    return tb.build()


@pytest.fixture(scope="module")
def nested() -> perflow.PAG:
    """One process: main [0, 10) around MPI_Recv [2, 7)."""
    tb = perflow.TraceBuilder()
    tb.enter(0, 0.0, "main")
    tb.call(0, "MPI_Recv", 2.0, 7.0)
    tb.leave(0, 10.0)
    return tb.build()


def row_bars(fig) -> list[list[tuple[float, float, str]]]:
    """(start, end, colour) of the bars of each broken_barh row, in drawing order."""
    ax = fig.axes[0]
    out = []
    for c in ax.collections:
        if isinstance(c, PolyCollection) and c.get_label() != "wait states":
            bars = []
            for path, fc in zip(c.get_paths(), c.get_facecolors()):
                xs = path.vertices[:, 0]
                bars.append((round(float(xs.min()), 9), round(float(xs.max()), 9), to_hex(fc)))
            out.append(bars)
    return out


COMP, P2P = CATEGORY_COLORS["computation"], CATEGORY_COLORS["p2p"]


def test_aggregate_bins_hand_computed() -> None:
    # main [0, 10) (category 0) encloses MPI_Recv [2, 7) (category 1); 5 bins of 2 s
    cov = aggregate_bins(
        np.array([0, 0]),
        np.array([0.0, 2.0]),
        np.array([10.0, 7.0]),
        np.array([0, 1]),
        np.array([-1, 0]),
        n_rows=1,
        n_cats=2,
        t0=0.0,
        t1=10.0,
        bins=5,
    )
    np.testing.assert_allclose(cov[0], [[2, 0], [0, 2], [0, 2], [1, 1], [2, 0]])
    # clipping to a window [3, 8): 5 bins of 1 s
    cov = aggregate_bins(
        np.array([0, 0]),
        np.array([0.0, 2.0]),
        np.array([10.0, 7.0]),
        np.array([0, 1]),
        np.array([-1, 0]),
        n_rows=1,
        n_cats=2,
        t0=3.0,
        t1=8.0,
        bins=5,
    )
    np.testing.assert_allclose(cov[0], [[0, 1], [0, 1], [0, 1], [0, 1], [1, 0]])


def test_exact_bars(ping: perflow.PAG, tmp_path) -> None:
    fig = plot_timeline(ping, path=str(tmp_path / "t.png"))
    assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"
    assert fig.perflow_timeline == {"mode": "exact", "intervals": 4, "bars": 4}
    assert row_bars(fig) == [[(0.0, 4.0, COMP), (4.0, 5.0, P2P)], [(0.0, 1.0, COMP), (1.0, 5.5, P2P)]]
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["0", "1"]
    assert ax.get_xlim() == (0.0, 5.5)
    assert ax.get_xlabel() == "time (s)"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["computation", "p2p"]


def test_nested_children_paint_over_parents(nested: perflow.PAG) -> None:
    fig = plot_timeline(nested)
    assert row_bars(fig) == [[(0.0, 10.0, COMP), (2.0, 7.0, P2P)]]


def test_aggregated_bands_stack_every_category(nested: perflow.PAG) -> None:
    fig = plot_timeline(nested, max_intervals=1, bins=4)
    assert fig.perflow_timeline == {"mode": "aggregated", "intervals": 2, "bars": 4}
    ax = fig.axes[0]
    assert row_bars(fig) == []  # one image, no bars
    (im,) = ax.images
    px = np.asarray(im.get_array())
    assert px.shape == (12, 4, 4)  # one row: a band of 12 pixels (the top one a gap) x 4 bins
    assert (px[0, :, 3] == 0).all()  # the gap is transparent
    hexes = [[to_hex(px[j, i]) for j in range(1, 12)] for i in range(4)]
    # bins of 2.5 s: 80% comp + 20% p2p | p2p | 80% p2p + 20% comp | comp; 11 pixels stack each bin,
    # computation at the bottom: every category's share shows, not only the dominant one
    assert hexes[0] == [P2P] * 2 + [COMP] * 9
    assert hexes[1] == [P2P] * 11
    assert hexes[2] == [P2P] * 9 + [COMP] * 2
    assert hexes[3] == [COMP] * 11
    assert im.get_extent() == [0.0, 10.0, 0.5, -0.5]
    assert fig.texts[0].get_text() == "timeline (aggregated)"
    # the summary strip: processes per category per bin, stacked
    strip = fig.axes[1]
    assert strip.get_title() == "summary: processes per category"
    comp_poly, p2p_poly = strip.collections
    verts = comp_poly.get_paths()[0].vertices
    at = verts[np.isclose(verts[:, 0], 6.25)][:, 1]  # the centre of bin 2
    assert sorted(np.round(at, 9)) == [0.0, 0.2]


def test_share_pixels_hand_computed() -> None:
    shares = np.array([[[0.25, 0.5], [0.0, 0.0]]])  # one row, 2 bins, 2 categories
    idx = share_pixels(shares, 4)
    # heights sampled top to bottom: 0.875, 0.625, 0.375, 0.125; cumulative shares 0.25, 0.75
    assert idx[:, 0].tolist() == [2, 1, 1, 0]  # idle above 75%, then category 1, category 0 at the bottom
    assert idx[:, 1].tolist() == [2, 2, 2, 2]


def test_path_rows_and_span_cover() -> None:
    rows = path_rows(np.array([0, 1]), np.array([0.0, 4.0]), np.array([3.0, 8.0]), t0=0.0, t1=10.0, bins=5)
    np.testing.assert_array_equal(rows, [0, np.nan, 1, 1, np.nan])  # centres 1, 3 (the end: off the path), 5, 7, 9
    cov = span_cover(np.array([0, 0]), np.array([0.0, 1.0]), np.array([2.0, 2.5]), n_rows=1, t0=0.0, t1=4.0, bins=2)
    np.testing.assert_allclose(cov, [[1.0, 0.25]])  # overlaps add up, clipped at a full bin


def test_big_overlays_are_binned(nested: perflow.PAG) -> None:
    waits = pd.DataFrame({"process": [0] * 3, "start": [2.0, 3.0, 4.0], "end": [3.0, 4.0, 5.0]})
    path = pd.DataFrame({"process": [0, 0], "start": [0.0, 5.0], "end": [5.0, 10.0]})
    fig = plot_timeline(nested, waits, path, max_intervals=1, max_overlays=1, bins=5)
    ax = fig.axes[0]
    band, wait_img = ax.images
    px = np.asarray(wait_img.get_array())
    assert px.shape == (4, 5, 4)  # a strip on the bottom quarter of the band
    assert (px[:3, :, 3] == 0).all()
    np.testing.assert_allclose(px[3, :, 3], 0.9 * np.array([0, 1, 0.5, 0, 0]))  # waits cover [2, 5), bins of 2 s
    (cp,) = [c for c in ax.collections if c.get_label() == "critical path"]
    # one dash per run of bins on the same row: the whole window on process 0, no jumps
    assert [np.round(s, 9).tolist() for s in cp.get_segments()] == [[[0, 0], [10, 0]]]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["computation", "p2p", "wait states", "critical path"]


def test_sampled(nested: perflow.PAG) -> None:
    fig = plot_timeline(nested, max_intervals=1, reduce="sample")
    assert fig.perflow_timeline == {"mode": "sampled", "intervals": 2, "bars": 1}
    assert row_bars(fig) == [[(0.0, 10.0, COMP)]]  # the longest instance


def test_window_and_processes(ping: perflow.PAG) -> None:
    fig = plot_timeline(ping, start=0.5, end=4.5, processes=[1])
    assert fig.perflow_timeline["intervals"] == 2
    assert row_bars(fig) == [[(0.5, 1.0, COMP), (1.0, 4.5, P2P)]]
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["1"]
    assert fig.axes[0].get_xlim() == (0.5, 4.5)


def test_overlays(ping: perflow.PAG) -> None:
    waits = pd.DataFrame(
        {
            "process": [1, 7],
            "thread": [0, 0],
            "start": [1.0, 0.0],
            "end": [4.0, 1.0],
            "kind": "late_sender",
            "amount": [3.0, 1.0],
        }
    )
    crit = pd.DataFrame({"process": [0, 0, 1], "start": [0.0, 4.0, 5.0], "end": [4.0, 4.5, 5.5]})
    fig = plot_timeline(ping, waits, crit, messages=True)
    ax = fig.axes[0]
    (ws,) = [c for c in ax.collections if c.get_label() == "wait states"]
    assert isinstance(ws, PolyCollection) and len(ws.get_paths()) == 1  # process 7 is not in the trace
    xs, ys = ws.get_paths()[0].vertices[:, 0], ws.get_paths()[0].vertices[:, 1]
    assert (xs.min(), xs.max(), ys.min(), ys.max()) == (1.0, 4.0, 0.6, 1.4)
    (cp,) = [c for c in ax.collections if c.get_label() == "critical path"]
    assert isinstance(cp, LineCollection)
    segs = [np.round(s, 9).tolist() for s in cp.get_segments()]
    # three segments on their rows, and the jump from process 0 to process 1
    assert segs == [[[0, 0], [4, 0]], [[4, 0], [4.5, 0]], [[5, 1], [5.5, 1]], [[4.5, 0], [5, 1]]]
    (q,) = [c for c in ax.collections if isinstance(c, Quiver)]
    assert q.get_label() == "messages" and q.N == 1
    np.testing.assert_allclose([q.X[0], q.Y[0], q.U[0], q.V[0]], [4.0, 0.0, 1.5, 1.0])
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["computation", "p2p", "wait states", "critical path", "messages"]


def test_color_by_region_and_threads() -> None:
    tb = perflow.TraceBuilder()
    tb.call(0, "solve", 0.0, 3.0)
    tb.call(0, "io", 3.0, 4.0)
    tb.call(0, "solve", 0.0, 1.0, thread=1)
    pag = tb.build()
    fig = plot_timeline(pag, color_by="region", top_regions=1)
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["solve", "other"]
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["0.0", "0.1"]
    bars = row_bars(fig)
    assert [b[:2] for b in bars[0]] == [(0.0, 3.0), (3.0, 4.0)]
    assert bars[0][1][2] == CATEGORY_COLORS["other"]


def test_synthetic_trace_kinds() -> None:
    pag = perflow.synthetic.trace(nprocs=3, iterations=2, seed=0)
    fig = plot_timeline(pag)
    assert fig.perflow_timeline["bars"] == pag.trace.n_intervals
    assert len(row_bars(fig)) == 3
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == ["computation", "p2p", "collective", "wait", "mpi"]  # MPI_Init/Finalize are "mpi"
    agg = plot_timeline(pag, max_intervals=10)
    assert agg.perflow_timeline["mode"] == "aggregated" and agg.perflow_timeline["bars"] > 3


def test_errors(ping: perflow.PAG) -> None:
    profile = perflow.PAG.from_literal({"name": "main", "metrics": {"time_exc": 1.0}})
    with pytest.raises(PassError, match="has no trace instances"):
        plot_timeline(profile)
    with pytest.raises(PassError, match=r"plot_timeline \(wait_states\): the input has no column 'end'"):
        plot_timeline(ping, pd.DataFrame({"process": [0], "start": [0.0]}))
    with pytest.raises(PassError, match=r"\(critical_path\): the input has no column 'process'"):
        plot_timeline(ping, None, pd.DataFrame({"rank": [0], "start": [0.0], "end": [1.0]}))
    with pytest.raises(PassError, match="time window is empty"):
        plot_timeline(ping, start=3.0, end=2.0)
    with pytest.raises(PassError, match="reduce must be 'aggregate' or 'sample'"):
        plot_timeline(ping, reduce="drop")
    with pytest.raises(PassError, match="color_by must be 'kind' or 'region'"):
        plot_timeline(ping, color_by="rank")
    with pytest.raises(PassError, match="none of the processes \\[9\\]"):
        plot_timeline(ping, processes=[9])


def test_flow_run_shares_columns_with_the_page(ping: perflow.PAG, nested: perflow.PAG) -> None:
    """In a flow run the static figure keeps its columns for the page's timeline, taken once, same PAG only."""
    from perflow.flow.writes import write_policy
    from perflow.passes._binned import data_key, take_shared, timeline_data
    from perflow.passes.html_timeline import timeline_section

    assert take_shared([plot_timeline(ping)], ping, data_key(None, "kind", 10)) is None  # outside a flow run
    with write_policy(None, ()):
        fig = plot_timeline(ping)
        other = plot_timeline(ping, color_by="region")
    assert take_shared([fig], ping, data_key(None, "region", 10)) is None  # other settings
    assert take_shared([fig], nested, data_key(None, "kind", 10)) is None  # another PAG
    again = pickle.loads(pickle.dumps(fig))  # a cached figure: pickled without the columns
    assert take_shared([again], ping, data_key(None, "kind", 10)) is None
    td = take_shared([other, fig], ping, data_key(None, "kind", 10))
    fresh = timeline_data(ping)
    assert td is not None and np.array_equal(td.cat, fresh.cat) and np.array_equal(td.parent_cat, fresh.parent_cat)
    assert take_shared([fig], ping, data_key(None, "kind", 10)) is None  # taken once
    with write_policy(None, ()):
        fig = plot_timeline(ping)
    a = timeline_section(ping, reuse=[fig])
    b = timeline_section(ping)
    assert a.blob == b.blob and a.meta == b.meta and not hasattr(fig, "_perflow_timeline_data")
