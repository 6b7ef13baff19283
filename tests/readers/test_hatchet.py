"""Hatchet interop that holds: round trips, Hatchet's own operations on perflow's export, units, graphs.

Needs llnl-hatchet (in the ``test`` extra); Hatchet needs pandas < 3 (its
readers and ``filter`` fail on pandas 3's read-only arrays), so the tests skip
where the installed pandas is newer.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest

import perflow
from perflow.errors import PAGError
from tests.conftest import REPO, import_hatchet, shared

ht = import_hatchet()

from perflow.writers.hatchet import detect_time_unit, from_hatchet, to_hatchet  # noqa: E402

pytestmark = [pytest.mark.hatchet, pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::DeprecationWarning")]


def _by_path(pag: perflow.PAG, metric: str) -> pd.Series:
    """A metric summed over locations per call path."""
    return pd.Series(pag.aggregate(metric, "sum").to_numpy(), index=pag.call_paths().to_numpy()).groupby(level=0).sum()


@pytest.fixture(scope="module")
def hpct() -> perflow.PAG:
    return perflow.read(str(shared("hpctoolkit", "cpi-xml")))


def test_export_works_with_hatchets_operations(hpct: perflow.PAG) -> None:
    gf = to_hatchet(hpct)
    df = gf.dataframe
    # dense, as Hatchet's readers make it: every node on every rank (the sparse export crashed tree())
    assert len(df) == hpct.n_vertices * 4 and df.index.names == ["node", "rank"]
    assert df["time"].sum() == pytest.approx(3.998242)  # seconds (the database's 3,998,242 us)
    text = gf.tree()
    assert "main" in text and "MPI_Init" in text
    hot = gf.filter(lambda row: row["time (inc)"] > 0.01, num_procs=1)  # squashes by default
    assert 0 < len(hot.graph) < len(gf.graph)
    assert hot.dataframe["time"].sum() <= df["time"].sum() + 1e-12
    kept = gf.filter(lambda row: row["time"] > 0, num_procs=1, squash=False).squash()
    assert kept.dataframe["time"].sum() == pytest.approx(df["time"].sum())
    diff = gf.deepcopy() - gf.deepcopy()
    assert diff.dataframe["time"].abs().sum() == 0.0
    both = gf.deepcopy() + gf.deepcopy()
    assert both.dataframe["time"].sum() == pytest.approx(2 * df["time"].sum())
    assert gf.metadata["perflow.time_unit"] == "s"


@pytest.mark.parametrize(
    "parts",
    [("hpctoolkit", "cpi-xml"), ("tau", "cpi-mpi"), ("cube", "scorep-cpi", "profile.cubex")],
    ids=["hpctoolkit", "tau", "cube"],
)
def test_round_trip(parts: tuple[str, ...]) -> None:
    pag = perflow.read(str(shared(*parts)))
    back = from_hatchet(to_hatchet(pag))
    assert back.attrs["time_unit"] == "s" and back.attrs["time_unit_source"] == "perflow's Hatchet export"
    assert list(back.call_paths()) == list(pag.call_paths())
    for m in ("time_exc", "time_inc"):
        a, b = _by_path(back, m), _by_path(pag, m)
        np.testing.assert_allclose(a.reindex(b.index).to_numpy(), b.to_numpy(), rtol=1e-12, atol=0)
    assert "dropped_edges" not in back.attrs


def test_ring8_with_threads_and_ranks() -> None:
    pag = perflow.load(REPO / "examples" / "data" / "ring8.pag")
    gf = to_hatchet(pag)
    assert len(gf.dataframe) == pag.n_vertices * 8
    back = from_hatchet(gf)
    np.testing.assert_allclose(back.aggregate("time_exc").to_numpy(), pag.aggregate("time_exc").to_numpy())


def test_hatchets_hpctoolkit_reader_is_read_in_microseconds(hpct: perflow.PAG) -> None:
    gf = ht.GraphFrame.from_hpctoolkit(str(shared("hpctoolkit", "cpi-xml")))
    assert detect_time_unit(gf) == ("us", "HPCToolkit database (CPUTIME in microseconds)")
    pag = from_hatchet(gf)
    # the README's fact: exclusive time summed over all nodes and ranks is 3,998,242 us
    assert pag.metrics["time_exc"].sum() == pytest.approx(3.998242)
    assert pag.attrs["time_unit"] == "us"
    # the same tree as perflow's own reader (Hatchet names call sites "62:MPI_Finalize")
    assert pag.n_vertices == hpct.n_vertices
    assert sorted(np.round(pag.aggregate("time_inc").to_numpy(), 9)) == sorted(
        np.round(hpct.aggregate("time_inc").to_numpy(), 9)
    )
    assert "interp.c:0" in set(pag.vertex_table["name"].astype(str))
    # told explicitly, the unit wins
    assert from_hatchet(gf, time_unit="ms").metrics["time_exc"].sum() == pytest.approx(3998.242)
    with pytest.raises(PAGError, match="time_unit must be one of s, ms, us, ns, not 'min'"):
        from_hatchet(gf, time_unit="min")


def test_hatchets_tau_and_caliper_readers() -> None:
    tau_dir = str(shared("tau", "cpi-mpi"))
    gf = ht.GraphFrame.from_tau(tau_dir)
    assert detect_time_unit(gf)[0] == "us"
    assert from_hatchet(gf).metrics["time_exc"].sum() == pytest.approx(perflow.read(tau_dir).metrics["time_exc"].sum())
    js = str(shared("caliper", "cpi-json", "cpi-callpath-profile.json"))
    cal = ht.GraphFrame.from_caliper(js, node_ordering=False)
    assert detect_time_unit(cal)[0] == "us"
    assert from_hatchet(cal).metrics["time_exc"].sum() == pytest.approx(perflow.read(js).metrics["time_exc"].sum())
    cali = str(shared("caliper", "lulesh-cali", "lulesh-annotation-profile.cali"))
    native = ht.GraphFrame.from_caliperreader(cali)
    assert detect_time_unit(native) == ("s", "Caliper .cali file (version 2.2.0-dev: seconds)")
    assert from_hatchet(native).metrics["time_exc"].sum() == pytest.approx(
        perflow.read(cali).metrics["time_exc"].sum(), rel=1e-6
    )


def test_recursive_cprofile_graph(caplog: pytest.LogCaptureFixture) -> None:
    # 9 functions; recursive() calls itself and is called by f and g: a graph, not a tree
    gf = ht.GraphFrame.from_cprofile(str(shared("cprofile", "cprofile-cycle.pstats")))
    assert len(gf.graph) == 9
    pag = from_hatchet(gf)
    assert pag.n_vertices == 9  # every node once: no endless expansion of the cycle
    assert pag.attrs["dropped_edges"] == 2 and "not a tree" in pag.attrs["approximation"]
    assert pag.attrs["time_unit_source"] == "cProfile (seconds)"
    paths = list(pag.call_paths())
    assert "e/f/g/recursive" in paths and paths.count("e/f/g/recursive") == 1
    # each node's own time is counted once; inclusive time is re-derived on the tree, so it partitions
    np.testing.assert_allclose(pag.metrics["time_exc"].sum(), gf.dataframe["time"].sum())
    inc = pag.metrics["time_inc"]
    roots = pag.metrics.loc[list(pag.roots), "time_inc"].sum()
    assert roots == pytest.approx(pag.metrics["time_exc"].sum())
    assert (inc >= pag.metrics["time_exc"] - 1e-12).all()
    assert "time_inc_hatchet" in pag.metric_names  # Hatchet's own inclusive times, kept


def test_unknown_origin_is_assumed_seconds_and_said(caplog: pytest.LogCaptureFixture) -> None:
    lit = [{"frame": {"name": "main", "type": "function"}, "metrics": {"time (inc)": 3.0, "time": 3.0}}]
    gf = ht.GraphFrame.from_literal(lit)
    with caplog.at_level(logging.WARNING, logger="perflow.writers.hatchet"):
        pag = from_hatchet(gf)
    assert pag.attrs["time_unit"] == "s" and pag.attrs["time_unit_source"].startswith("assumed")
    assert "pass time_unit=" in caplog.text
    assert from_hatchet(gf, time_unit="us").metrics["time_exc"].tolist() == [3e-6]
