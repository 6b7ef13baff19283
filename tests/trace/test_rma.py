"""MPI one-sided (RMA) records: decoded by both decoders, the trace's rma table, bytes, comm_matrix, wait states.

The archive is :func:`tests.otf2kit.rma_example` (3 ranks; its docstring has the timeline and the numbers).
"""

from __future__ import annotations

import numpy as np
import pytest

import perflow
from perflow.kinds import RmaEv
from perflow.readers.otf2 import decode
from perflow.trace.analyses import WAIT_INSTANCES
from tests.otf2kit import rma_example

US = 1e-6


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    return rma_example(tmp_path_factory.mktemp("rma") / "run")


@pytest.fixture(scope="module")
def pag(archive):
    return perflow.read(archive)


@pytest.mark.parametrize("decoder", ["fast", "bindings"])
def test_records_decoded(archive, decoder):
    raw = decode(archive, decoder=decoder)
    assert raw.attrs["skipped_events"] == {}
    assert raw.attrs["rma_windows"] == {0: {"name": "window", "comm": 0}}
    assert raw.attrs["rma_groups"][2] == [1] and raw.attrs["rma_groups"][3] == [0, 2]
    ev = raw.rma_events
    kind = ev["kind"]
    put = np.flatnonzero(kind == RmaEv.PUT)
    assert ev["bytes"][put].tolist() == [1000, 512, 256] and ev["remote"][put].tolist() == [1, 1, 1]
    assert ev["matching"][put].tolist() == [1, 4, 5]
    get = np.flatnonzero(kind == RmaEv.GET)
    assert ev["received"][get].tolist() == [400] and ev["remote"][get].tolist() == [2]
    at = np.flatnonzero(kind == RmaEv.ATOMIC)
    assert (ev["bytes"][at].tolist(), ev["received"][at].tolist(), ev["op"][at].tolist()) == ([8], [8], [5])
    end = np.flatnonzero(kind == RmaEv.COLLECTIVE_END)
    assert ev["op"][end].tolist() == [17, 0, 0, 18] * 3 and set(ev["level"][end].tolist()) == {3}
    assert ev["remote"][end].tolist() == [-1] * 12  # no root
    sync = np.flatnonzero(kind == RmaEv.GROUP_SYNC)
    assert ev["group"][sync].tolist() == [2, 2, 3, 3, 2, 2]
    counts = {k.name: int((kind == k).sum()) for k in RmaEv if (kind == k).any()}
    assert counts == {
        "WIN_CREATE": 3, "WIN_DESTROY": 3, "COLLECTIVE_BEGIN": 12, "COLLECTIVE_END": 12, "GROUP_SYNC": 6,
        "PUT": 3, "GET": 1, "ATOMIC": 1, "OP_COMPLETE_BLOCKING": 3, "OP_COMPLETE_NON_BLOCKING": 2,
    }  # fmt: skip


def test_decoders_agree(archive):
    from tests.readers.test_otf2_decode import assert_same_tables

    assert_same_tables(decode(archive, decoder="bindings"), decode(archive, decoder="fast", jobs=0))


def test_transfers_on_their_calls(pag):
    r = pag.trace.rma
    names = pag.vertex_table["name"].astype(str).to_numpy()
    vtx = pag.trace.intervals["vertex"].to_numpy()
    tr = r[r["kind"].isin([RmaEv.PUT, RmaEv.GET, RmaEv.ATOMIC])]
    assert tr["process"].tolist() == [0, 0, 1, 2, 2]
    assert tr["remote"].tolist() == [1, 1, 2, 0, 1]  # world ranks
    assert [names[vtx[i]] for i in tr["interval"]] == ["MPI_Put", "MPI_Put", "MPI_Get", "MPI_Fetch_and_op", "MPI_Put"]
    # completions folded in: in the second fence (70), in the call, in MPI_Win_complete
    assert tr["complete"].to_numpy() == pytest.approx(np.array([70, 108, 70, 51, 106]) * US)
    assert [names[vtx[i]] for i in tr["complete_interval"]] == [
        "MPI_Win_fence", "MPI_Win_complete", "MPI_Win_fence", "MPI_Fetch_and_op", "MPI_Win_complete"
    ]  # fmt: skip
    assert not r["kind"].isin([RmaEv.OP_COMPLETE_BLOCKING, RmaEv.OP_COMPLETE_NON_BLOCKING]).any()
    m = pag.metrics.groupby(level="process")[["rma_bytes_put", "rma_bytes_get"]].sum()
    assert m["rma_bytes_put"].tolist() == [1512, 0, 264] and m["rma_bytes_get"].tolist() == [0, 400, 8]
    put = np.flatnonzero(names == "MPI_Put")
    assert float(pag.metrics.loc[(int(put[0]), 0, 0), "rma_bytes_put"]) == 1512  # both puts of rank 0
    assert "bytes_sent" not in pag.metrics.columns  # RMA traffic is not counted as messages


def _waits(pag, kind):
    w = pag.analyses.get(WAIT_INSTANCES)
    w = w[w["kind"] == kind]
    return w["process"].tolist(), (w["amount"].to_numpy() / US).round(6).tolist(), w


def test_wait_at_fence_create_free(pag):
    procs, amount, w = _waits(pag, "rma_wait_at_fence")
    assert (procs, amount) == ([0, 0, 1, 1], [30, 5, 30, 3])
    assert w["cause_process"].tolist() == [2, 2, 2, 2]
    assert (w["cause_time"].to_numpy() / US).round(6).tolist() == [40, 65, 40, 65]
    names = pag.vertex_table["name"].astype(str).to_numpy()
    assert set(names[w["vertex"].to_numpy()]) == {"MPI_Win_fence"}
    assert _waits(pag, "rma_wait_at_create")[:2] == ([0, 1], [2, 2])
    assert _waits(pag, "rma_wait_at_free")[:2] == ([], [])


def test_late_post_and_early_wait(pag):
    names = pag.vertex_table["name"].astype(str).to_numpy()
    procs, amount, w = _waits(pag, "rma_late_post")
    assert (procs, amount) == ([0, 2], [20, 5])  # blocking start on rank 0; complete on rank 2
    assert names[w["vertex"].to_numpy()].tolist() == ["MPI_Win_start", "MPI_Win_complete"]
    assert w["cause_process"].tolist() == [1, 1]
    procs, amount, w = _waits(pag, "rma_early_wait")
    assert (procs, amount, w["cause_process"].tolist()) == ([1], [3], [0])
    assert names[w["vertex"].to_numpy()].tolist() == ["MPI_Win_wait"]


def test_waiting_time_and_breakdown_see_rma(pag):
    from perflow.passes.waitstates import waiting_time

    wt = waiting_time(pag).groupby("process")["rma_sync"].sum() / US
    assert wt.round(6).tolist() == [57, 38, 5]  # 2+30+5+20, 2+30+3+3, 5


def test_comm_matrix_and_summary(pag):
    from perflow.passes.comm import comm_matrix, comm_summary

    plain = comm_matrix(pag)
    assert int(plain.to_numpy().sum()) == 0
    m = comm_matrix(pag, rma=True)
    assert m.attrs["rma"] is True
    # puts 0->1 1512, 2->1 256; get by 1 from 2: 2->1 400; atomic of 2 with 0: 2->0 8 and 0->2 8
    expect = np.array([[0, 1512, 8], [0, 0, 0], [8, 656, 0]])
    assert m.to_numpy().tolist() == expect.tolist()
    c = comm_matrix(pag, rma=True, metric="count")
    assert c.to_numpy().tolist() == [[0, 2, 0], [0, 0, 0], [1, 2, 0]]
    s = comm_summary(pag)
    assert s["rma_ops"].tolist() == [2, 1, 2]
    assert s["rma_bytes_put"].tolist() == [1512, 0, 264] and s["rma_bytes_get"].tolist() == [0, 400, 8]
    assert (s["rma_wait"] / US).round(6).tolist() == [57, 38, 5]


def test_save_load_round_trip(pag, tmp_path):
    from perflow.pag.persist import load, save

    back = load(save(pag, tmp_path / "rma.pag"))
    assert back.trace.rma.equals(pag.trace.rma)
    assert back.trace.rma_windows == {0: {"name": "window", "comm": 0}}
    assert back.trace.rma_groups[3].tolist() == [0, 2]
    w0, w1 = pag.analyses.get(WAIT_INSTANCES), back.analyses.get(WAIT_INSTANCES)
    assert (
        w1[w1["kind"].astype(str).str.startswith("rma_")]
        .reset_index(drop=True)
        .equals(w0[w0["kind"].astype(str).str.startswith("rma_")].reset_index(drop=True))
    )


def test_partitioned_program_agrees(archive, pag):
    """Three processes in three partitions (the Dask engine's program, on a local runtime): the same waits."""
    import pandas as pd

    from tests.trace.partkit import partitioned_wait_instances

    raw = decode(archive)
    local = pag.analyses.get(WAIT_INSTANCES)
    dist = partitioned_wait_instances(raw, pag, 3)
    assert len(dist) == 9
    pd.testing.assert_frame_equal(dist, local)


def test_manifest_checks_rma_fields(pag, tmp_path):
    import json

    from perflow.errors import FormatError
    from perflow.pag.persist import load, save

    path = save(pag, tmp_path / "bad.pag")
    mf = path / "manifest.json"
    m = json.loads(mf.read_text())
    m["rma_windows"] = {"0": {"name": "w", "comm": "world"}}
    mf.write_text(json.dumps(m))
    with pytest.raises(FormatError, match="rma_windows.0.comm"):
        load(path)


def test_critical_path_follows_rma_waits(pag):
    """Ranks 0/1 wait at fence 1 for rank 2 (40), rank 0's start waits for rank 1's post (100)."""
    from perflow.trace.analyses import CRITICAL_PATH

    seg = pag.analyses.get(CRITICAL_PATH).segments

    def on(x):
        return int(seg["process"].to_numpy()[(seg["start"].to_numpy() <= x * US) & (x * US < seg["end"].to_numpy())][0])

    assert (on(20), on(85), on(150)) == (2, 1, 0)
