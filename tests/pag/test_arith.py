"""PAG arithmetic: + - * / aligned by call path, units, fill, processes (perflow/pag/arith.py)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import perflow
from perflow.errors import MetricError, PAGError
from perflow.pag.pag import PAG, MetricInfo
from perflow.passes.differential import difference, differential
from tests.conftest import shared


def build(paths: dict[str, dict[int, float]], metric: str = "time_exc", unit: str = "s") -> PAG:
    """A PAG from ``{"main/x": {process: value}}`` (parents created as needed, with no rows)."""
    ids: dict[str, int] = {}
    names, parents = [], []
    for path in paths:
        parts = path.split("/")
        for d in range(1, len(parts) + 1):
            p = "/".join(parts[:d])
            if p not in ids:
                ids[p] = len(names)
                names.append(parts[d - 1])
                parents.append(ids["/".join(parts[: d - 1])] if d > 1 else -1)
    rows = [(ids[p], proc, v) for p, vals in paths.items() for proc, v in vals.items()]
    m = pd.DataFrame(rows, columns=["vertex", "process", metric])
    return PAG.from_frames(
        pd.DataFrame({"name": names, "parent": parents}),
        m,
        metric_info={metric: MetricInfo(metric, unit, "exclusive")},
    )


def rows(pag: PAG, metric: str = "time_exc") -> dict[tuple[str, int], float]:
    """``{(call path, process): value}`` of the stored rows."""
    cp = pag.call_paths().to_numpy()
    m = pag.metrics.reset_index()
    return {(cp[v], int(p)): float(x) for v, p, x in zip(m["vertex"], m["process"], m[metric])}


A = {"main": {0: 2.0, 1: 4.0}, "main/x": {0: 1.0}}
B = {"main": {0: 3.0, 1: 5.0}, "main/y": {1: 2.0}}


def test_worked_example_subtraction() -> None:
    a, b = build(A), build(B)
    d = b - a
    assert rows(d) == {("main", 0): 1.0, ("main", 1): 1.0, ("main/y", 1): 2.0, ("main/x", 0): -1.0}
    status = dict(zip(d.call_paths(), d.vertex_table["status"]))
    assert status == {"main": "both", "main/y": "only_left", "main/x": "only_right"}
    assert d.metric_info["time_exc"].unit == "s" and d.metric_info["time_exc"].mode == "exclusive"
    assert d.attrs["by"] == "location" and d.attrs["fill"] == 0.0
    assert d.trace is None


def test_fill_nan_marks_paths_in_one_run_only() -> None:
    d = build(B).sub(build(A), fill=np.nan)
    r = rows(d)
    assert r[("main", 0)] == 1.0 and r[("main", 1)] == 1.0
    assert math.isnan(r[("main/y", 1)]) and math.isnan(r[("main/x", 0)])


def test_addition_multiplication_division() -> None:
    a, b = build(A), build(B)
    assert rows(a + b) == {("main", 0): 5.0, ("main", 1): 9.0, ("main/x", 0): 1.0, ("main/y", 1): 2.0}
    prod = a * b
    assert prod.metric_info["time_exc"].unit == "s^2" and prod.metric_info["time_exc"].mode == "other"
    assert rows(prod)[("main", 1)] == 20.0
    q = b / a
    assert q.metric_info["time_exc"].unit == ""  # s / s is dimensionless
    r = rows(q)
    assert r[("main", 0)] == 1.5 and r[("main", 1)] == 1.25
    assert r[("main/y", 1)] == math.inf  # 2 / (fill 0)
    assert r[("main/x", 0)] == 0.0  # (fill 0) / 1


def test_absent_location_counts_as_zero_within_a_shared_vertex() -> None:
    a = build({"main": {0: 1.0, 1: 1.0}, "main/k": {0: 4.0, 1: 2.0}})
    b = build({"main": {0: 1.0, 1: 1.0}, "main/k": {0: 3.0}})  # rank 1 did not run k in b
    assert rows(b - a)[("main/k", 1)] == -2.0
    assert rows(b / a)[("main/k", 1)] == 0.0


def test_units_are_checked() -> None:
    t = build({"main": {0: 1.0}}, "time_exc", "s")
    by = build({"main": {0: 8.0}}, "bytes_sent", "bytes")
    with pytest.raises(MetricError, match=r"cannot add 'time_exc' and 'bytes_sent': units differ: \[s\] \+ \[bytes\]"):
        t + by
    with pytest.raises(MetricError, match="cannot subtract"):
        by - t
    bw = by / t
    assert bw.metric_names == ["bytes_sent"] and bw.metric_info["bytes_sent"].unit == "bytes/s"
    assert (by * t).metric_info["bytes_sent"].unit == "bytes*s"
    assert (1 / t).metric_info["time_exc"].unit == "1/s"


def test_metrics_paired_by_name_and_others_dropped() -> None:
    a = build({"main": {0: 1.0}}).with_metrics(visits=np.array([3.0]))
    b = build({"main": {0: 2.0}})
    with pytest.raises(MetricError, match="share no metric"):
        a.select_metrics("visits") + b.with_metrics(other=np.array([1.0])).select_metrics("time_exc", "other")
    c = b.with_metrics(extra=np.array([5.0])) - a
    assert c.metric_names == ["time_exc"] and sorted(c.attrs["dropped_metrics"]) == ["extra", "visits"]
    with pytest.raises(MetricError, match="unknown metric 'visits'"):
        b.sub(a, metrics=["visits"])


def test_different_processes_need_an_explicit_choice() -> None:
    small = build({"main": {0: 2.0, 1: 2.0}})
    big = build({"main": {0: 1.0, 1: 1.0, 2: 1.0, 3: 1.5}})
    with pytest.raises(PAGError, match=r"left: 4 processes, 4 locations; right: 2 processes.*by='vertex'"):
        big - small
    per_vertex = big.sub(small, by="vertex")  # sums: 4.5 - 4
    assert rows(per_vertex) == {("main", 0): 0.5}
    assert "sum over the processes" in per_vertex.attrs["aggregated"]
    assert rows(big.sub(small, by="vertex", agg="max")) == {("main", 0): -0.5}
    shared_locs = big.sub(small, by="location")  # ranks 2 and 3 count as zero in small
    assert rows(shared_locs) == {("main", 0): -1.0, ("main", 1): -1.0, ("main", 2): 1.0, ("main", 3): 1.5}
    with pytest.raises(PAGError, match="by must be one of"):
        big.sub(small, by="rank")


def test_scalars() -> None:
    a = build(A)
    assert rows(a * 2) == {("main", 0): 4.0, ("main", 1): 8.0, ("main/x", 0): 2.0}
    assert rows(np.float64(2.0) * a) == rows(a * 2)
    assert rows(a / 2)[("main", 1)] == 2.0
    # + 1 changes the implicit zeros too: main/x on rank 1 becomes 1
    assert rows(a + 1) == {("main", 0): 3.0, ("main", 1): 5.0, ("main/x", 0): 2.0, ("main/x", 1): 1.0}
    assert rows(-a)[("main/x", 0)] == -1.0
    assert rows(1 / a)[("main/x", 1)] == math.inf
    assert rows(sum([a, a, a])) == rows(a * 3)
    with pytest.raises(TypeError):
        a + "x"  # noqa: B018


def test_difference_pass_matches_differential_table() -> None:
    a, b = build(A), build(B)
    d = difference(a, b)
    table = differential(a, b).set_index("call_path")
    got = pd.Series(d.aggregate("time_exc").to_numpy(), index=d.call_paths().to_numpy())
    assert got.to_dict() == table["diff"].to_dict()


def _random_pag(draw: st.DrawFn, n_procs: int) -> PAG:
    names = ["main", "main/a", "main/b", "main/a/c", "main/b/c", "main/a/c/d"]
    chosen = draw(st.lists(st.sampled_from(names[1:]), unique=True, max_size=5))
    vals = st.floats(min_value=-1e3, max_value=1e3, allow_nan=False).map(lambda x: round(x, 3))
    spec = {p: {r: draw(vals) for r in range(n_procs)} for p in ["main", *chosen]}
    return build(spec)


@st.composite
def two_pags(draw: st.DrawFn) -> tuple[PAG, PAG]:
    n = draw(st.integers(1, 3))
    return _random_pag(draw, n), _random_pag(draw, n)


@settings(max_examples=40, deadline=None)
@given(two_pags())
def test_property_sum_minus_right_is_left(pair: tuple[PAG, PAG]) -> None:
    a, b = pair
    back = (a + b) - b
    got, want = rows(back), rows(a)
    for key, v in want.items():
        assert got[key] == pytest.approx(v, abs=1e-9)
    assert all(abs(v) < 1e-9 for k, v in got.items() if k not in want)  # b's paths cancel
    # per call path, the difference PAG agrees with the differential table
    d = (b - a).sub(a * 0, by="vertex")  # aggregated per vertex
    table = differential(a, b).set_index("call_path")["diff"]
    agg = pd.Series(d.aggregate("time_exc").to_numpy(), index=d.call_paths().to_numpy())
    assert np.allclose(agg.reindex(table.index).to_numpy(), table.to_numpy())


def test_real_lulesh_runs_difference_equals_differential() -> None:
    d = shared("scaling", "lulesh-caliper")
    a, b = perflow.read(d / "27_cores.cali"), perflow.read(d / "343_cores.cali")
    diff = b - a  # both are Caliper profiles aggregated over ranks: one location each
    assert diff.n_vertices == 45 and (diff.vertex_table["status"] == "both").all()
    table = differential(a, b).set_index("call_path")["diff"]
    got = pd.Series(diff.aggregate("time_exc").to_numpy(), index=diff.call_paths().to_numpy())
    assert np.allclose(got.reindex(table.index).to_numpy(), table.to_numpy())
    ar = diff.vertex("main/lulesh.cycle/TimeIncrement/MPI_Allreduce")
    va = a.aggregate("time_exc")[a.vertex("main/lulesh.cycle/TimeIncrement/MPI_Allreduce").id]
    vb = b.aggregate("time_exc")[b.vertex("main/lulesh.cycle/TimeIncrement/MPI_Allreduce").id]
    assert diff.aggregate("time_exc")[ar.id] == pytest.approx(vb - va)
    assert vb - va > 5  # the Allreduce grows by seconds from 27 to 343 ranks


def test_real_cube_bandwidth_and_self_difference() -> None:
    pag = perflow.read(shared("cube", "scorep-cpi", "profile.cubex"))
    zero = pag - pag
    assert set(zero.metric_names) == set(pag.metric_names)
    assert np.all(zero.metrics.to_numpy() == 0)
    bw = pag.select_metrics("bytes_sent") / pag.select_metrics("time_exc")
    assert bw.metric_info["bytes_sent"].unit == "bytes/s"
    with pytest.raises(MetricError, match=r"units differ: \[bytes\] \+ \[s\]"):
        pag.select_metrics("bytes_sent") + pag.select_metrics("time_exc")


def test_real_traces_of_different_formats_align_by_call_path() -> None:
    otf2 = perflow.read(shared("otf2", "ping-pong", "traces.otf2"))
    papi = perflow.read(shared("otf2", "ping-pong-papi", "traces.otf2"))
    d = papi.sub(otf2, metrics=["time_exc"])
    assert d.attrs["nprocs"] == 2
    assert set(otf2.call_paths()) <= set(d.call_paths())
