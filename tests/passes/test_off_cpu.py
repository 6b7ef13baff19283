"""Time off the CPU (the recorder's ``off_cpu`` instances): its own breakdown category, nobody's code."""

from __future__ import annotations

import pytest

import perflow
from perflow.passes.breakdown import breakdown
from perflow.passes.critical_path import critical_path, critical_path_imbalance
from perflow.passes.delay import root_cause
from perflow.passes.hotspot import hotspot
from perflow.passes.imbalance import imbalance
from perflow.trace.builder import TraceBuilder


@pytest.fixture(scope="module")
def pag() -> perflow.PAG:
    """Rank 0 works in main/work, is off the CPU for 3 s in the middle, and reaches the allreduce last."""
    tb = TraceBuilder()
    with tb.region(0, "prog", 0.0, 10.0):
        tb.sample(0, 2.0, ["main", "work"], 2.0)  # [0, 2]
        tb.call(0, "off_cpu", 2.0, 5.0, role="artificial", paradigm="measurement_system", stack=["main", "work"])
        tb.sample(0, 7.0, ["main", "work"], 2.0)  # [5, 7]
        tb.call(0, "MPI_Allreduce", 7.0, 8.0, coll={"bytes": 8}, stack=["main"])
    with tb.region(1, "prog", 0.0, 10.0):
        tb.sample(1, 2.0, ["main", "work"], 2.0)
        tb.call(1, "MPI_Allreduce", 2.0, 8.0, coll={"bytes": 8}, stack=["main"])
    return tb.build()


def test_breakdown_shows_off_cpu_as_its_own_category(pag: perflow.PAG) -> None:
    b = breakdown(pag, by="process", wide=True).set_index("process")
    assert b.loc[0, "off_cpu"] == pytest.approx(3.0) and b.loc[1, "off_cpu"] == 0.0
    assert b.loc[0, "computation"] == pytest.approx(4.0 + 2.0)  # work's 4 s and prog's own 2 s after the call
    assert b.loc[1, "wait"] == pytest.approx(5.0)


def test_root_cause_reports_it_apart_from_the_code(pag: perflow.PAG) -> None:
    res = root_cause(pag, long_term=True)
    causes, s = res["causes"], res["summary"].iloc[0]
    assert "off_cpu" not in set(causes["name"].astype(str))
    top = causes.iloc[0]
    assert (top["name"], int(top["top_process"])) == ("work", 0)
    # rank 1 waited 5 s: rank 0's 2 s more of work and its 3 s off the CPU
    assert s["total_wait"] == pytest.approx(5.0)
    assert s["off_cpu"] == pytest.approx(3.0) and top["total"] == pytest.approx(2.0)
    assert s["attributed"] + s["off_cpu"] + s["unattributed"] == pytest.approx(5.0)


def test_code_blame_passes_leave_it_out(pag: perflow.PAG) -> None:
    names = pag.vertex_table["name"].astype(str).to_numpy()
    imb = critical_path_imbalance(pag)
    assert len(imb) and "off_cpu" not in set(imb["name"].astype(str))
    assert imb["name"].iloc[0] == "work"
    profile = critical_path(pag)["profile"]
    assert "off_cpu" in set(profile["name"].astype(str))  # the path's own profile still shows where it went
    assert "off_cpu" not in set(hotspot(pag, k=20)["name"].astype(str))
    assert "off_cpu" not in set(imbalance(pag)["name"].astype(str))
    assert "off_cpu" in set(names)


def test_root_cause_says_which_code_was_off_the_cpu(pag: perflow.PAG) -> None:
    res = root_cause(pag, long_term=True)
    off, s = res["off_cpu"], res["summary"].iloc[0]
    assert len(off) == 1
    row = off.iloc[0]
    names = pag.vertex_table["name"].astype(str)
    assert row["name"] == "work" and row["call_path"].endswith("main/work")  # the code it was off the CPU in
    assert names.iat[int(row["off_cpu_vertex"])] == "off_cpu"
    assert int(pag.vertex_table["parent"].iat[int(row["off_cpu_vertex"])]) == int(row["vertex"])
    assert row["total"] == pytest.approx(s["off_cpu"]) == pytest.approx(3.0)
    assert int(row["top_process"]) == 0 and row["causes"] == "wait_nxn:3"
    assert row["percent"] == pytest.approx(60.0)  # of the 5 s of waiting analysed


def test_findings_name_the_code_off_the_cpu_and_explain_the_wait(pag: perflow.PAG) -> None:
    from perflow.passes.findings import findings

    f = findings(root_cause(pag, long_term=True), pag)
    first = f.iloc[0]
    assert first["where"] == "work" and first["processes"] == "0"
    assert first["what"].startswith(
        "off the CPU here (descheduled, or blocked in a system call), delays others: 3.00 s"
    )
    assert "explains 3.00 s of Wait at N×N waiting in MPI_Allreduce on rank 1" in first["what"]
    assert "also root cause of 2.00 s of waiting" in first["what"]
    # the 5 s of waiting at the allreduce is explained (3 s off the CPU, 2 s of work): no finding of its own
    assert not f["what"].str.contains("by no root cause").any()
    assert not ((f["kind"] == "wait state") & (f["where"].str.startswith("MPI_Allreduce"))).any()
