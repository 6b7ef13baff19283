"""Critical path: worked examples (messages, barriers, synchronous sends), imbalance, T_ideal, synthetic traces."""

from __future__ import annotations

import numpy as np
import pytest

import perflow.passes  # noqa: F401
from perflow import synthetic
from perflow.errors import PassError
from perflow.passes.critical_path import critical_path, critical_path_imbalance
from perflow.trace.builder import TraceBuilder


def _cp_by_name(prof):
    return {str(n): round(t, 9) for n, t in zip(prof["name"], prof["cp_time"]) if t > 0}


def _message_example():
    tb = TraceBuilder()
    tb.call(0, "compute", 0, 4)
    tb.call(0, "MPI_Send", 4, 5, send={"to": 1, "bytes": 8})
    tb.call(0, "post", 5, 6)
    tb.call(1, "compute", 0, 1)
    tb.call(1, "MPI_Recv", 1, 5.5, recv={"frm": 0, "bytes": 8})
    tb.call(1, "post", 5.5, 9)
    return tb.build()


def test_worked_example():
    r = critical_path(_message_example())
    s = r["summary"].iloc[0]
    assert s["length"] == 9.0 and s["start"] == 0.0 and s["end"] == 9.0
    assert _cp_by_name(r["profile"]) == {"compute": 4.0, "MPI_Recv": 1.5, "post": 3.5}
    assert s["ideal_runtime"] == 7.5 and s["mpi_on_path"] == 1.5
    seg = r["segments"]
    assert list(zip(seg["process"], seg["start"], seg["end"], seg["name"].astype(str))) == [
        (0, 0.0, 4.0, "compute"),
        (1, 4.0, 5.5, "MPI_Recv"),
        (1, 5.5, 9.0, "post"),
    ]
    assert {"process", "thread", "start", "end", "vertex", "interval"} <= set(seg.columns)


def test_imbalance_formula():
    # compute: CP 4, time 4 + 1 over N = 2 locations, no waiting: cpi = 4 - 5 / 2 = 1.5
    # MPI_Recv: CP 1.5, time 4.5 of which 3 waiting: cpi = 1.5 - 1.5 / 2 = 0.75
    prof = critical_path(_message_example())["profile"].set_index("name")
    assert prof.loc["compute", "cpi"] == 1.5
    assert prof.loc["MPI_Recv", "wait"] == 3.0
    assert prof.loc["MPI_Recv", "cpi"] == 0.75
    assert prof.loc["MPI_Send", "cpi"] == 0.0
    t = critical_path_imbalance(_message_example())
    assert t["name"].astype(str).tolist()[0] == "compute"
    assert t["cpi_percent"].iloc[0] == pytest.approx(100 * 1.5 / 9)


def test_barrier_jumps_to_the_last_arriver():
    tb = TraceBuilder()
    tb.call(0, "compute", 0, 1)
    tb.call(0, "MPI_Barrier", 1, 6.5, coll={})
    tb.call(0, "post", 6.5, 10)
    tb.call(1, "compute", 0, 6)
    tb.call(1, "MPI_Barrier", 6, 6.6, coll={})
    tb.call(1, "post", 6.6, 7)
    r = critical_path(tb.build())
    assert _cp_by_name(r["profile"]) == {"compute": 6.0, "MPI_Barrier": 0.5, "post": 3.5}
    s = r["summary"].iloc[0]
    assert (s["length"], s["ideal_runtime"], s["hops"]) == (10.0, 9.5, 2)


def test_late_receiver_jumps_to_the_receiver():
    tb = TraceBuilder()
    tb.call(0, "MPI_Ssend", 1, 5, send={"to": 1, "bytes": 8, "sync": True})
    tb.call(0, "post", 5, 6)
    tb.call(1, "compute", 0, 4)
    tb.call(1, "MPI_Recv", 4, 5, recv={"frm": 0, "bytes": 8})
    r = critical_path(tb.build())
    assert _cp_by_name(r["profile"]) == {"compute": 4.0, "MPI_Ssend": 1.0, "post": 1.0}
    assert r["summary"]["length"].iloc[0] == 6.0


def test_late_receiver_ignored_when_disabled():
    tb = TraceBuilder()
    tb.call(0, "MPI_Ssend", 1, 5, send={"to": 1, "bytes": 8, "sync": True})
    tb.call(0, "post", 5, 6)
    tb.call(1, "compute", 0, 4)
    tb.call(1, "MPI_Recv", 4, 5, recv={"frm": 0, "bytes": 8})
    r = critical_path(tb.build(), late_receiver="none")
    assert _cp_by_name(r["profile"]) == {"MPI_Ssend": 4.0, "post": 1.0}


def test_synthetic_slow_rank_is_on_the_path():
    pag = synthetic.trace(nprocs=8, iterations=30, slow_rank=5, seed=4)
    r = critical_path(pag)
    seg = r["segments"]
    comp = seg[seg["name"].astype(str) == "compute"]
    on5 = (comp["end"] - comp["start"])[comp["process"] == 5].sum()
    s = r["summary"].iloc[0]
    assert on5 > 0.9 * (comp["end"] - comp["start"]).sum()
    assert r["profile"]["name"].astype(str).iloc[0] == "compute"
    assert r["profile"]["cp_percent"].iloc[0] > 95
    # the path is contiguous in time and ends where the last process enters MPI_Finalize (Scalasca's end)
    assert np.allclose(seg["start"].to_numpy()[1:], seg["end"].to_numpy()[:-1])
    iv = pag.trace.intervals
    fin = iv[pag.vertex_table["name"].astype(str).to_numpy()[iv["vertex"].to_numpy()] == "MPI_Finalize"]
    assert s["end"] == pytest.approx(fin["enter"].max())
    assert critical_path(pag, path_ends="trace")["summary"].iloc[0]["end"] == pytest.approx(pag.trace.span[1])
    assert s["length"] <= s["runtime"] and s["ideal_runtime"] < s["length"]
    # the slow rank's compute is on the path far longer than the average rank computes
    prof = r["profile"].set_index("name")
    assert prof.loc["compute", "cpi"] > 0.4 * prof.loc["compute", "cp_time"]


def test_balanced_run_has_little_imbalance():
    pag = synthetic.trace(nprocs=4, iterations=20, noise=0.0)
    prof = critical_path(pag)["profile"].set_index("name")
    assert prof.loc["compute", "cpi"] < 1e-6 * prof.loc["compute", "cp_time"]


def test_error_without_trace():
    with pytest.raises(PassError, match="pass 'critical_path' needs a trace-backed PAG"):
        critical_path(synthetic.profile(10, 2))
    with pytest.raises(PassError, match="pass 'critical_path_imbalance' needs a trace-backed PAG"):
        critical_path_imbalance(synthetic.profile(10, 2))


def test_tables_feed_the_timeline():
    from perflow.passes.timeline import plot_timeline
    from perflow.passes.waitstates import wait_states

    pag = synthetic.trace(nprocs=4, iterations=5, slow_rank=1, seed=1)
    fig = plot_timeline(pag, wait_states(pag), critical_path(pag)["segments"])
    labels = {c.get_label() for ax in fig.axes for c in ax.collections}
    assert {"wait states", "critical path"} <= labels
