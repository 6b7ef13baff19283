"""Ensembles on synthetic runs with known answers (perflow/pag/ensemble.py, align.py, runinfo.py)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from perflow.errors import MetricError, PAGError
from perflow.pag.ensemble import Ensemble
from perflow.pag.pag import PAG, MetricInfo
from tests.pag.test_arith import build


def run(paths: dict[str, dict[int, float]], **attrs: object) -> PAG:
    pag = build(paths)
    pag.attrs.update(attrs)
    return pag


@pytest.fixture
def ens() -> Ensemble:
    # solve: per-run sums 4, 6, 11 (rank values below); io only in r1 and r3
    r1 = run({"main": {0: 1.0, 1: 1.0}, "main/solve": {0: 1.0, 1: 3.0}, "main/io": {0: 0.5}}, nprocs=2, compiler="gcc")
    r2 = run({"main": {0: 1.0, 1: 1.0}, "main/solve": {0: 2.0, 1: 4.0}}, nprocs=2, compiler="intel")
    r3 = run(
        {"main": {0: 1.0, 1: 1.0, 2: 1.0, 3: 1.0}, "main/solve": {0: 2.0, 1: 3.0, 2: 3.0, 3: 3.0}, "main/io": {3: 1.5}},
        nprocs=4,
        compiler="gcc",
    )
    return Ensemble([r1, r2, r3], names=["r1", "r2", "r3"])


def test_union_tree_and_presence(ens: Ensemble) -> None:
    tree = ens.tree
    assert tree["call_path"].tolist() == ["main", "main/solve", "main/io"]
    assert tree["parent"].tolist() == [-1, 0, 0] and tree["depth"].tolist() == [0, 1, 1]
    assert tree["n_runs"].tolist() == [3, 3, 2]
    assert ens.presence.loc[2].tolist() == [True, False, True]


def test_values_are_nan_where_absent_never_zero(ens: Ensemble) -> None:
    v = ens.values("time_exc", "sum")
    assert v.loc[1].tolist() == [4.0, 6.0, 11.0]
    assert v.loc[2, "r1"] == 0.5 and math.isnan(v.loc[2, "r2"]) and v.loc[2, "r3"] == 1.5
    assert ens.values("time_exc", "max").loc[1].tolist() == [3.0, 4.0, 3.0]
    assert v.attrs == {"metric": "time_exc", "agg": "sum", "unit": "s"}


def test_stats_by_hand(ens: Ensemble) -> None:
    s = ens.stats("time_exc", "sum", percentiles=(50, 90)).set_index("call_path")
    solve = s.loc["main/solve"]
    assert solve["n_runs"] == 3 and solve["mean"] == 7.0
    assert solve["std"] == pytest.approx(math.sqrt(((4 - 7) ** 2 + (6 - 7) ** 2 + (11 - 7) ** 2) / 2))  # sqrt(13)
    assert (solve["min"], solve["p50"], solve["max"]) == (4.0, 6.0, 11.0)
    assert solve["p90"] == pytest.approx(6.0 + 0.8 * 5.0)  # linear between 6 and 11
    io = s.loc["main/io"]  # over the two runs having it: r2 is left out, not counted as 0
    assert io["n_runs"] == 2 and io["mean"] == 1.0 and io["min"] == 0.5 and io["max"] == 1.5
    assert io["std"] == pytest.approx(math.sqrt(0.5))
    single = Ensemble([run({"main": {0: 2.0}})]).stats()
    assert single["mean"].tolist() == [2.0] and math.isnan(single["std"].iloc[0])
    assert s.attrs["units"]["mean"] == "s" and "sum over each run" in s.attrs["aggregates"]["mean"]


def test_metadata_groupby_filter_sort(ens: Ensemble) -> None:
    meta = ens.metadata
    assert meta.index.tolist() == ["r1", "r2", "r3"]
    assert meta["nprocs"].tolist() == [2, 2, 4] and meta["nthreads"].tolist() == [1, 1, 1]
    assert meta["compiler"].tolist() == ["gcc", "intel", "gcc"]
    groups = ens.groupby("nprocs")
    assert list(groups) == [2, 4] and groups[2].names == ["r1", "r2"]
    assert type(list(groups)[0]) is int
    gs = groups.stats("time_exc").set_index(["nprocs", "call_path"])
    assert gs.loc[(2, "main/solve"), "mean"] == 5.0 and gs.loc[(4, "main/solve"), "mean"] == 11.0
    two = ens.groupby(["nprocs", "compiler"])
    assert list(two) == [(2, "gcc"), (2, "intel"), (4, "gcc")]
    assert groups.metadata()["runs"].tolist() == [2, 1]
    assert ens.filter(compiler="gcc").names == ["r1", "r3"]
    assert ens.filter(nprocs=[4, 8]).names == ["r3"]
    assert ens.filter(lambda m: m.nprocs < 4, compiler="intel").names == ["r2"]
    assert ens.filter([True, False, True]).names == ["r1", "r3"]
    assert ens.sort_by("nprocs", ascending=False).names == ["r3", "r1", "r2"]
    with pytest.raises(PAGError, match="no metadata column 'nproc'; did you mean 'nprocs'"):
        ens.groupby("nproc")


def test_user_metadata(ens: Ensemble) -> None:
    e2 = ens.with_metadata(repeat=[1, 2, 1], machine="quartz", note={"r2": "noisy"}, n_vertices=lambda p: p.n_vertices)
    m = e2.metadata
    assert m["repeat"].tolist() == [1, 2, 1] and set(m["machine"]) == {"quartz"}
    assert m["note"].tolist() == [None, "noisy", None] and m["n_vertices"].tolist() == [3, 2, 3]
    assert "repeat" not in ens.metadata.columns  # the original is unchanged
    assert e2.filter(repeat=1).metadata["machine"].tolist() == ["quartz", "quartz"]  # kept by derived ensembles
    frame = pd.DataFrame({"input": ["small", "big", "big"]}, index=["r1", "r2", "r3"])
    assert Ensemble(ens.runs, names=ens.names, metadata=frame).groupby("input")["big"].names == ["r2", "r3"]
    with pytest.raises(PAGError, match="has 2 values for 3 runs"):
        ens.with_metadata(repeat=[1, 2])
    with pytest.raises(PAGError, match="names unknown runs: r9"):
        ens.with_metadata(note={"r9": 1})


def test_frame_is_indexed_by_vertex_and_run(ens: Ensemble) -> None:
    f = ens.frame()
    assert f.index.names == ["vertex", "run"] and len(f) == 9
    assert f.loc[(1, "r3"), "time_exc"] == 11.0
    assert not f.loc[(2, "r2"), "present"] and math.isnan(f.loc[(2, "r2"), "time_exc"])
    joined = f.join(ens.metadata[["nprocs"]], on="run")
    assert joined.groupby("nprocs")["time_exc"].sum().to_dict() == {2: 6.5 + 8.0, 4: 4.0 + 11.0 + 1.5}


def test_sequence_protocol(ens: Ensemble) -> None:
    assert len(ens) == 3 and list(ens)[1] is ens["r2"] and ens[np.int64(2)] is ens.runs[2]
    assert ens[1:].names == ["r2", "r3"] and ens[["r3", 0]].names == ["r3", "r1"]
    with pytest.raises(PAGError, match=r"no run named 'r4' \(runs: r1, r2, r3\)"):
        ens["r4"]


def test_errors() -> None:
    a = run({"main": {0: 1.0}})
    with pytest.raises(PAGError, match="at least one run"):
        Ensemble([])
    with pytest.raises(PAGError, match="run 1 of the ensemble is a str"):
        Ensemble([a, "b.cali"])  # type: ignore[list-item]
    with pytest.raises(PAGError, match="run names must be unique; repeated: x"):
        Ensemble([a, a], names=["x", "x"])
    assert Ensemble([a, a]).names == ["run0", "run1"]
    b = PAG.from_frames(
        pd.DataFrame({"name": ["main"], "parent": [-1]}),
        pd.DataFrame({"vertex": [0], "process": [0], "time_exc": [1.0]}),
        metric_info={"time_exc": MetricInfo("time_exc", "ms", "exclusive")},
    )
    with pytest.raises(MetricError, match="different units across the runs: ms, s"):
        Ensemble([a, b]).values("time_exc")
    with pytest.raises(MetricError, match="unknown metric 'visits'"):
        Ensemble([a]).stats("visits")


def test_default_names_come_from_sources() -> None:
    a = run({"main": {0: 1.0}}, source="/x/27_cores.cali")
    b = run({"main": {0: 1.0}}, source="/y/27_cores.cali")
    c = run({"main": {0: 1.0}}, source="/z/ping-pong/traces.otf2")
    assert Ensemble([a, b, c]).names == ["27_cores", "27_cores#2", "ping-pong"]


def test_arithmetic_between_runs_of_an_ensemble(ens: Ensemble) -> None:
    d = ens["r2"].sub(ens["r1"])
    solve = d.vertex("main/solve").id
    assert d.aggregate("time_exc")[solve] == 2.0
    with pytest.raises(PAGError, match="different processes"):
        ens["r3"] - ens["r1"]
    assert ens["r3"].sub(ens["r1"], by="vertex").aggregate("time_exc")[solve] == 7.0
