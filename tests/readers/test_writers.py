"""pandas export and the Hatchet bridge (skipped when llnl-hatchet is absent)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import perflow
from perflow.writers.frames import to_csv, to_dataframe
from tests.conftest import import_hatchet, shared


@pytest.fixture(scope="module")
def tau() -> perflow.PAG:
    return perflow.read(shared("tau", "cpi-mpi"))


def test_to_dataframe_long(tau: perflow.PAG) -> None:
    df = to_dataframe(tau)
    assert list(df.columns[:9]) == ["vertex", "process", "thread", "call_path", "name", "kind", "depth", "file", "line"]
    assert len(df) == len(tau.metrics) == 12 * 4
    row = df[(df["call_path"] == ".TAU application/MPI_Finalize()") & (df["process"] == 0)]
    assert row["time_inc"].iat[0] == pytest.approx(32304e-6)  # profile.0.0.0: incl 32304 us
    assert row["kind"].iat[0] == "mpi"


def test_to_dataframe_aggregated(tau: perflow.PAG, tmp_path: Path) -> None:
    df = to_dataframe(tau, ["time_inc"], agg="max", sep=" > ")
    assert len(df) == 12 and list(df.columns) == [
        "vertex",
        "call_path",
        "name",
        "kind",
        "depth",
        "file",
        "line",
        "time_inc",
    ]
    # .TAU application incl per rank: 51781, 55329, ... us; the maximum is rank 1's 55329
    assert df.loc[df["call_path"] == ".TAU application", "time_inc"].iat[0] == pytest.approx(55329e-6)
    assert ".TAU application > MPI_Init()" in set(df["call_path"])
    out = to_csv(tau, tmp_path / "t.csv", agg="sum")
    back = pd.read_csv(out)
    np.testing.assert_allclose(back["time_exc"].sum(), tau.aggregate("time_exc").sum())
    with pytest.raises(perflow.MetricError, match="unknown metric 'tme'"):
        to_dataframe(tau, ["tme"])


@pytest.mark.hatchet
def test_hatchet_round_trip(tau: perflow.PAG) -> None:
    ht = import_hatchet()
    from perflow.writers.hatchet import from_hatchet, to_hatchet

    gf = to_hatchet(tau)
    assert isinstance(gf, ht.GraphFrame)
    assert len(gf.graph) == 12
    assert {"time", "time (inc)", "visits"} <= set(gf.dataframe.columns)
    assert gf.dataframe.index.names == ["node", "rank"]
    back = from_hatchet(gf)
    assert list(back.call_paths()) == list(tau.call_paths())
    np.testing.assert_allclose(back.metrics["time_inc"].to_numpy(), tau.metrics["time_inc"].to_numpy())
    np.testing.assert_allclose(back.metrics["visits"].to_numpy(), tau.metrics["visits"].to_numpy())


@pytest.mark.hatchet
def test_from_hatchet_literal() -> None:
    ht = import_hatchet()
    from perflow.writers.hatchet import from_hatchet

    lit = [
        {
            "frame": {"name": "main", "type": "function"},
            "metrics": {"time (inc)": 10.0, "time": 2.0},
            "children": [
                {"frame": {"name": "MPI_Send", "type": "function"}, "metrics": {"time (inc)": 8.0, "time": 8.0}}
            ],
        }
    ]
    pag = from_hatchet(ht.GraphFrame.from_literal(lit))
    assert list(pag.call_paths()) == ["main", "main/MPI_Send"]
    assert pag.metrics["time_exc"].tolist() == [2.0, 8.0]
    assert pag.vertex("main/MPI_Send").kind == "function"  # the frame's type wins over the name
