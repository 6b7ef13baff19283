"""Tests of the plot passes: per-process bars, box plots, breakdown, heatmap, scaling, parallel view."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.quiver import Quiver

import perflow
from perflow.errors import PassError
from perflow.flow.registry import get_pass
from perflow.passes.parallel_view import normalise_paths, parallel_view_dot, plot_parallel_view
from perflow.passes.plot import plot_breakdown, plot_imbalance, plot_process_bars
from perflow.passes.plot_comm import plot_comm_matrix
from perflow.passes.plot_scaling import fit_log2, plot_scaling

# per process exclusive times (seconds): solve [1, 2, 3, 6], io [1, 1, 1, 1]
LITERAL = {
    "name": "main",
    "metrics": {"time_exc": [0.0, 0.0, 0.0, 0.0]},
    "children": [
        {"name": "solve", "metrics": {"time_exc": [1.0, 2.0, 3.0, 6.0]}},
        {"name": "io", "metrics": {"time_exc": [1.0, 1.0, 1.0, 1.0]}},
    ],
}


@pytest.fixture(scope="module")
def pag() -> perflow.PAG:
    return perflow.PAG.from_literal(LITERAL)


@pytest.fixture(scope="module")
def ping() -> perflow.PAG:
    """Rank 0 sends 8 bytes to rank 1, then 100 bytes to rank 2; rank 2 sends 4 bytes to rank 0."""
    tb = perflow.TraceBuilder()
    tb.call(0, "compute", 0.0, 4.0)
    tb.call(0, "MPI_Send", 4.0, 5.0, send={"to": 1, "bytes": 8})
    tb.call(0, "MPI_Send", 5.0, 6.0, send={"to": 2, "bytes": 100})
    tb.call(0, "MPI_Recv", 6.0, 7.0, recv={"frm": 2, "bytes": 4})
    tb.call(1, "compute", 0.0, 1.0)
    tb.call(1, "MPI_Recv", 1.0, 5.5, recv={"frm": 0, "bytes": 8})
    tb.call(2, "compute", 0.0, 2.0)
    tb.call(2, "MPI_Recv", 2.0, 6.5, recv={"frm": 0, "bytes": 100})
    tb.call(2, "MPI_Send", 6.5, 6.6, send={"to": 0, "bytes": 4})
    return tb.build()


def heights(fig: Figure) -> list[float]:
    return [round(p.get_height(), 9) for p in fig.axes[0].patches]


# ---------------------------------------------------------------------- per-process bars
def test_process_bars(pag: perflow.PAG, tmp_path) -> None:
    fig = plot_process_bars(pag, vertices=["solve", "io"], path=str(tmp_path / "b.png"))
    assert (tmp_path / "b.png").read_bytes()[:4] == b"\x89PNG"
    ax = fig.axes[0]
    assert len(fig.axes) == 1
    assert heights(fig) == [1.0, 2.0, 3.0, 6.0, 1.0, 1.0, 1.0, 1.0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "1", "2", "3"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["solve", "io"]
    assert ax.get_ylabel() == "time_exc (s)"
    assert [ln.get_ydata()[0] for ln in ax.lines] == [3.0, 1.0]  # the means


def test_process_bars_default_top_k_and_units(pag: perflow.PAG) -> None:
    fig = plot_process_bars(pag, k=1)  # largest max(time_exc) is solve
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["solve"]
    small = pd.DataFrame({"name": "x", "process": [0, 1], "time_exc": [0.002, 0.004]})
    fig = plot_process_bars(small)  # a long table: scaled to ms
    assert heights(fig) == [2.0, 4.0]
    assert fig.axes[0].get_ylabel() == "time_exc (ms)"


def test_process_bars_from_analysis_table(pag: perflow.PAG) -> None:
    hot = pd.DataFrame({"vertex": [2], "name": ["io"], "score": [1.0]})
    fig = plot_process_bars(hot, pag)
    assert heights(fig) == [1.0, 1.0, 1.0, 1.0]
    with pytest.raises(PassError, match="no PAG was given"):
        plot_process_bars(hot)


def test_process_bars_errors(pag: perflow.PAG) -> None:
    with pytest.raises(PassError, match="plot_process_bars: unknown metric 'time'"):
        plot_process_bars(pag, metric="time")
    with pytest.raises(PassError, match="no vertex named 'nope'"):
        plot_process_bars(pag, vertices=["nope"])
    with pytest.raises(PassError, match="no column 'rank' \\(setting process\\)"):
        plot_process_bars(pd.DataFrame({"name": ["a"], "time_exc": [1.0]}), process="rank")
    with pytest.raises(PassError, match="no column 'time_exc' \\(setting metric='time_exc'\\)"):
        plot_process_bars(pd.DataFrame({"name": ["a"], "process": [0], "t": [1.0]}))


# ---------------------------------------------------------------------- box plots
def test_imbalance_boxes(pag: perflow.PAG) -> None:
    fig = plot_imbalance(pag, k=2)
    ax = fig.axes[0]
    assert len(ax.patches) == 2  # one box per vertex
    assert [t.get_text() for t in ax.get_xticklabels()] == ["solve", "io"]
    # solve [1, 2, 3, 6]: median 2.5, mean 3.0
    ys = [tuple(np.round(ln.get_ydata(), 9)) for ln in ax.lines]
    assert (2.5, 2.5) in ys and (3.0,) in ys
    fig = plot_imbalance(pag, vertices=["io"], horizontal=True)
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["io"]
    assert fig.axes[0].get_xlabel() == "time_exc (s)"


def test_imbalance_dense_semantics() -> None:
    # a vertex run only on process 0 of 2: the other process counts as 0
    p = perflow.PAG.from_literal(
        {
            "name": "main",
            "metrics": {"time_exc": [1.0, 1.0]},
            "children": [{"name": "only0", "metrics": {"time_exc": {0: 4.0}}}],
        }
    )
    fig = plot_imbalance(p, vertices=["only0"])
    ys = [tuple(np.round(ln.get_ydata(), 9)) for ln in fig.axes[0].lines]
    assert (2.0,) in ys  # mean of [4, 0]


# ---------------------------------------------------------------------- breakdown
def test_breakdown_wide() -> None:
    df = pd.DataFrame(
        {"process": [0, 1], "wait": [0.5, 0.0], "computation": [1.0, 2.0], "p2p": [0.5, 0.25], "rank_name": ["a", "b"]}
    )
    fig = plot_breakdown(df)
    ax = fig.axes[0]
    assert len(ax.patches) == 6
    # stacked in category order computation, p2p, wait
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["computation", "p2p", "wait"]
    assert heights(fig) == [1.0, 2.0, 0.5, 0.25, 0.5, 0.0]
    assert [round(p.get_y(), 9) for p in ax.patches] == [0.0, 0.0, 1.0, 2.0, 1.5, 2.25]
    assert ax.get_xlabel() == "process" and ax.get_ylabel() == "time (s)"


def test_breakdown_long_normalised_and_capped() -> None:
    long = pd.DataFrame(
        {
            "name": ["solve", "solve", "io", "io", "tiny"],
            "category": ["computation", "wait", "io", "wait", "computation"],
            "time": [3.0, 1.0, 1.0, 1.0, 0.1],
        }
    )
    fig = plot_breakdown(long, normalize=True, max_rows=2)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["solve", "io"]
    tops = np.zeros(2)
    for p in ax.patches:
        tops[int(round(p.get_x() + p.get_width() / 2))] += p.get_height()
    np.testing.assert_allclose(tops, [100.0, 100.0])
    assert ax.get_ylabel() == "share of time (%)"
    fig = plot_breakdown(long, horizontal=True)
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["solve", "io", "tiny"]


def test_breakdown_errors() -> None:
    df = pd.DataFrame({"process": [0], "computation": [1.0]})
    with pytest.raises(PassError, match="no column 'p2p' \\(setting categories='p2p'\\)"):
        plot_breakdown(df, categories=["computation", "p2p"])
    with pytest.raises(PassError, match="no row column found"):
        plot_breakdown(pd.DataFrame({"computation": [1.0]}))
    with pytest.raises(PassError, match="no column 'seconds' \\(setting value='seconds'\\)"):
        plot_breakdown(pd.DataFrame({"process": [0], "category": ["io"]}), value="seconds")


# ---------------------------------------------------------------------- heatmap
def test_comm_matrix_from_pag(ping: perflow.PAG, tmp_path) -> None:
    fig = plot_comm_matrix(ping, path=str(tmp_path / "m.svg"))
    assert (tmp_path / "m.svg").read_text().lstrip().startswith("<?xml")
    assert len(fig.axes) == 2  # heatmap and colorbar
    np.testing.assert_array_equal(fig.axes[0].images[0].get_array(), [[0, 8, 100], [0, 0, 0], [4, 0, 0]])
    assert fig.axes[0].get_xlabel() == "receiver" and fig.axes[0].get_ylabel() == "sender"
    assert fig.axes[1].get_ylabel() == "bytes"  # the ticks carry the unit, as the cells do
    assert fig.axes[1].yaxis.get_major_formatter()(2048, 0) == "2.00 KiB"
    texts = sorted(t.get_text() for t in fig.axes[0].texts)
    assert texts == ["100 B", "4 B", "8 B"]
    fig = plot_comm_matrix(ping, value="count", log=True, annotate=False)
    im = fig.axes[0].images[0]
    assert isinstance(im.norm, LogNorm) and im.norm.vmin == 0.1 and im.norm.vmax == 1  # one value: at the top
    assert np.ma.getmaskarray(im.get_array()).sum() == 6  # empty cells are blank
    assert not fig.axes[0].texts


def test_comm_matrix_tables() -> None:
    long = pd.DataFrame({"send_process": [0, 0, 3], "recv_process": [3, 3, 0], "bytes": [10, 5, 7]})
    fig = plot_comm_matrix(long)
    np.testing.assert_array_equal(fig.axes[0].images[0].get_array(), [[0, 15], [7, 0]])
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["0", "3"]
    square = pd.DataFrame([[0.0, 2.0], [3.0, 0.0]], index=[4, 5], columns=[4, 5])
    fig = plot_comm_matrix(square, log=True)
    np.testing.assert_array_equal(np.ma.filled(fig.axes[0].images[0].get_array(), -1), [[-1, 2], [3, -1]])


def test_comm_matrix_errors(ping: perflow.PAG) -> None:
    with pytest.raises(PassError, match="no column 'volume'"):
        plot_comm_matrix(pd.DataFrame({"src": [0], "dst": [1], "bytes": [1]}), value="volume")
    with pytest.raises(PassError, match="a log colour scale needs positive values"):
        plot_comm_matrix(pd.DataFrame([[0.0]]), log=True)
    with pytest.raises(PassError, match="edge value must be bytes, count, time or wait"):
        plot_comm_matrix(ping, value="volume")


# ---------------------------------------------------------------------- scaling
@pytest.fixture
def scaling() -> tuple[pd.DataFrame, pd.DataFrame]:
    # log2 T = a + b log2 P: solve halves with every doubling (b = -1), the allreduce grows (b = 0.5)
    true = {"solve": (4.0, -1.0), "MPI_Allreduce": (-3.0, 0.5)}
    rows = [
        {"name": n, "nprocs": p, "time": 2 ** (a + b * np.log2(p))} for n, (a, b) in true.items() for p in (2, 4, 8, 16)
    ]
    fits = pd.DataFrame(
        {"name": list(true), "intercept": [a for a, _ in true.values()], "slope": [b for _, b in true.values()]}
    )
    return pd.DataFrame(rows), fits


def lines_by_label(fig: Figure) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    return {
        ln.get_label(): (np.asarray(ln.get_xdata(), float), np.asarray(ln.get_ydata(), float))
        for ln in fig.axes[0].lines
    }


def test_scaling_with_fits(scaling: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    data, fits = scaling
    fig = plot_scaling(data, fits, target=64)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    ln = lines_by_label(fig)
    x, y = ln["MPI_Allreduce fit"]
    np.testing.assert_allclose(x, [2, 4, 8, 16, 64])
    np.testing.assert_allclose(y, 2 ** (-3 + 0.5 * np.log2(x)))
    np.testing.assert_allclose(ln["MPI_Allreduce @ P=64"][1], [1.0])  # 2^(-3 + 0.5 * 6)
    np.testing.assert_allclose(ln["solve"][1], [8, 4, 2, 1])
    np.testing.assert_allclose(ln["solve @ P=64"][1], [0.25])
    # the largest time at the largest scale comes first
    # with their predictions at the target (no labels beside the stars to overlap)
    assert [t.get_text() for t in ax.get_legend().get_texts()][:2] == [
        "solve; 250 ms at P=64",
        "MPI_Allreduce; 1.00 s at P=64",
    ]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["2", "4", "8", "16", "64"]


def test_scaling_fits_itself(scaling: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    data, _ = scaling
    # the worked example: T = [8, 4, 2, 1] at P = 4, 8, 16, 32 gives b = -1 (and 0.5 at P = 64)
    a, b = fit_log2(np.array([4, 8, 16, 32]), np.array([8.0, 4.0, 2.0, 1.0]))
    assert b == pytest.approx(-1.0) and 2 ** (a + b * 6) == pytest.approx(0.5)
    a, b = fit_log2(np.array([4, 8, 16, 32]), np.array([0.5, 0.6, 0.7, 0.8]))
    assert b == pytest.approx(0.2257, abs=1e-4) and 2 ** (a + b * 6) == pytest.approx(0.947, abs=1e-3)
    fig = plot_scaling(data.rename(columns={"name": "region", "time": "t"}), label="region", time="t", k=1)
    ln = lines_by_label(fig)
    assert set(ln) == {"solve", "solve fit"}
    np.testing.assert_allclose(ln["solve fit"][1], [8, 4, 2, 1])


def test_scaling_errors(scaling: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    data, fits = scaling
    with pytest.raises(PassError, match="no column 'P' \\(setting nprocs='P'\\)"):
        plot_scaling(data, nprocs="P")
    with pytest.raises(PassError, match="no column 'beta' \\(setting b='beta'\\)"):
        plot_scaling(data, fits, b="beta")
    with pytest.raises(PassError, match="must be positive"):
        plot_scaling(data.assign(nprocs=0))


# ---------------------------------------------------------------------- parallel view
@pytest.fixture(scope="module")
def syn() -> perflow.PAG:
    return perflow.synthetic.trace(nprocs=4, iterations=2, seed=1)


def test_parallel_view_figure(syn: perflow.PAG, tmp_path) -> None:
    paths = {
        "late": [("MPI_Waitall", 1), ("MPI_Isend", 2), ("compute", 2)],
        "coll": [("MPI_Allreduce", 0), ("MPI_Allreduce", 3)],
    }
    fig = plot_parallel_view(syn, paths, path=str(tmp_path / "pv.png"))
    ax = fig.axes[0]
    assert len(fig.axes) == 2  # the colorbar
    # columns in calling-context order: compute, MPI_Isend, MPI_Waitall, MPI_Allreduce
    assert [t.get_text() for t in ax.get_xticklabels()] == ["compute", "MPI_Isend", "MPI_Waitall", "MPI_Allreduce"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["0", "1", "2", "3"]
    nodes = ax.collections[0]
    assert len(nodes.get_offsets()) == 16
    q = {c.get_label(): c for c in ax.collections if isinstance(c, Quiver)}
    assert set(q) == {"p2p", "collective"}
    assert q["p2p"].N == 8  # each rank's Isend to its two neighbours' Waitall
    ln = {x.get_label(): x for x in ax.lines}
    np.testing.assert_array_equal(ln["late"].get_xdata(), [2, 1, 0])
    np.testing.assert_array_equal(ln["late"].get_ydata(), [1, 2, 2])
    np.testing.assert_array_equal(ln["coll"].get_ydata(), [0, 3])


def test_parallel_view_inputs(syn: perflow.PAG) -> None:
    pv = syn.parallel.vertices.filter(name="compute", process=[1, 3])
    ((label, arr),) = normalise_paths(syn, pv, "t")
    assert arr.tolist() == [[3, 1, 0], [3, 3, 0]]
    df = pd.DataFrame({"path": [0, 0, 1], "step": [1, 0, 0], "vertex": [3, 7, 8], "process": [0, 1, 2]})
    got = normalise_paths(syn, df, "t")
    assert [(lab, a.tolist()) for lab, a in got] == [("path 0", [[7, 1, 0], [3, 0, 0]]), ("path 1", [[8, 2, 0]])]
    two = normalise_paths(syn, [[(3, 0), (7, 1)], [("compute", 2, 0)]], "t")
    assert [a.tolist() for _, a in two] == [[[3, 0, 0], [7, 1, 0]], [[3, 2, 0]]]
    fig = plot_parallel_view(syn, vertices=syn.vertices.filter(name="MPI_*"), processes=[0, 2], max_processes=2)
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["0", "2"]
    assert len(fig.axes[0].get_xticklabels()) == 6
    with pytest.raises(PassError, match="no vertex named 'nope'"):
        plot_parallel_view(syn, [("nope", 0)])
    with pytest.raises(PassError, match="path element must be .* got \\(1, 2, 3, 4\\)"):
        normalise_paths(syn, [[(1, 2, 3, 4)]], "t")
    with pytest.raises(PassError, match="a path must be a list of \\(vertex, process\\) pairs, got a int"):
        normalise_paths(syn, [[(1, 2)], 5], "t")
    with pytest.raises(PassError, match="unknown metric 'wait'"):
        plot_parallel_view(syn, metric="wait")


def test_parallel_view_max_processes(syn: perflow.PAG) -> None:
    fig = plot_parallel_view(syn, [("compute", 3)], max_processes=2)
    rows = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert len(rows) == 2 and "3" in rows


def test_parallel_view_dot(syn: perflow.PAG, tmp_path) -> None:
    out = parallel_view_dot(
        syn, [("MPI_Waitall", 1), ("MPI_Isend", 2)], names=["compute"], path=str(tmp_path / "p.dot")
    )
    assert (tmp_path / "p.dot").read_text() == out
    assert out.count("{") == out.count("}") == 5  # graph + one cluster per process
    assert out.splitlines()[0] == 'digraph "parallel_view" {'
    clusters = re.findall(r'label="process (\d+)"', out)
    assert clusters == ["0", "1", "2", "3"]
    nodes = re.findall(r"^\s+(n\d+_\d+_\d+) \[label=", out, re.M)
    assert len(nodes) == 12 and "n7_1_0" in nodes
    assert re.search(r'n7_1_0 \[label="MPI_Waitall\\n[^"]+", color="#d62728", penwidth=3\];', out)
    assert re.search(r'n7_1_0 -> n6_2_0 \[color="#d62728", penwidth=3', out)
    p2p = re.findall(r'(n6_\d_0) -> (n7_\d_0) \[color="#4c72b0"', out)
    assert len(p2p) == 8
    for line in out.splitlines()[1:-1]:
        assert line.rstrip().endswith((";", "{", "}")), line


def test_all_plot_passes_registered() -> None:
    for name in (
        "plot_process_bars",
        "plot_imbalance",
        "plot_breakdown",
        "plot_comm_matrix",
        "plot_scaling",
        "plot_parallel_view",
        "plot_timeline",
    ):
        assert get_pass(name).tags == ("plot",), name
    for name in ("tree_text", "tree_dot", "tree_html", "parallel_view_dot"):
        assert get_pass(name).tags == ("report",), name
    spec = get_pass("plot_parallel_view")
    assert [p.name for p in spec.inputs] == ["pag", "paths", "vertices"]
    assert [p.required for p in spec.inputs] == [True, False, False]


def test_figures_in_threads(pag: perflow.PAG, tmp_path) -> None:
    """Passes build figures without pyplot state, so a thread pool can run several at once."""
    from concurrent.futures import ThreadPoolExecutor

    def work(i: int) -> list[float]:
        fig = plot_process_bars(pag, vertices=["solve"], path=str(tmp_path / f"f{i}.png"))
        return heights(fig)

    with ThreadPoolExecutor(4) as ex:
        results = list(ex.map(work, range(4)))
    assert results == [[1.0, 2.0, 3.0, 6.0]] * 4
    assert all((tmp_path / f"f{i}.png").stat().st_size > 1000 for i in range(4))


def test_settings_accept_ids(pag: perflow.PAG) -> None:
    from perflow.flow.registry import check_value

    spec = get_pass("plot_process_bars")
    assert check_value([1, "io"], spec.setting("vertices").type)
    fig = plot_process_bars(pag, vertices=[1, "io"])
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["solve", "io"]
