"""MPI one-sided programs recorded by ``perflow record``: RMA records, bytes and wait states as for Score-P traces.

* ``rma_fence.c``: fence epochs; every rank puts 1000 doubles into the next
  rank's window each iteration, and the last rank runs ``slow_compute``
  before the fence, so the others wait at the fence (Wait at Fence) for
  about as long as it ran (the program prints that time).
* ``rma_pscw.c``: post/start/complete/wait; rank 0 runs ``slow_compute``
  before ``MPI_Win_post``, the origins start at once and wait for the post
  (Late Post) about as long.

Recorded on 4 ranks (the invariants run on the same recordings).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from perflow.kinds import RmaEv

from .conftest import site_line

pytestmark = pytest.mark.mpi

N = 4
ITER = 6
#: program arguments (iterations, extra sweeps of slow_compute), shared with tests/invariants/datasets.py
FENCE_ARGS = (str(ITER), "36000")
PSCW_ARGS = (str(ITER), "36000")
_PAGS: dict[int, object] = {}


def _pag(run):  # noqa: ANN001, ANN202
    from perflow.trace.build import build_pag

    if id(run) not in _PAGS:
        _PAGS[id(run)] = build_pag(run.raw)
    return _PAGS[id(run)]


def _printed(run, what: str) -> float:  # noqa: ANN001
    m = re.search(rf"{what} (\S+)", run.stdout)
    assert m, run.stdout
    return float(m.group(1))


def _waits(pag, kind: str):  # noqa: ANN001, ANN202
    from perflow.trace.analyses import WAIT_INSTANCES

    w = pag.analyses.get(WAIT_INSTANCES)
    w = w[w["kind"].astype(str) == kind]
    return w.groupby("process")["amount"].sum()


@pytest.fixture(scope="module")
def fence(recorded):  # noqa: ANN001, ANN201
    run = recorded("rma_fence.c", *FENCE_ARGS, n=N)
    assert run.result.status == 0, run.stderr
    return run


@pytest.fixture(scope="module")
def pscw(recorded):  # noqa: ANN001, ANN201
    run = recorded("rma_pscw.c", *PSCW_ARGS, n=N)
    assert run.result.status == 0, run.stderr
    return run


def test_fence_records(fence):  # noqa: ANN001
    raw = fence.raw
    r = raw.table("rma_events")
    counts = r.groupby(["location", "kind"]).size().unstack(fill_value=0)
    for loc in range(N):
        c = counts.loc[loc]
        assert c[RmaEv.WIN_CREATE] == 1 and c[RmaEv.WIN_DESTROY] == 1
        # create, the opening fence, ITER fences, free: a BEGIN and an END each
        assert c[RmaEv.COLLECTIVE_BEGIN] == c[RmaEv.COLLECTIVE_END] == ITER + 3
        assert c[RmaEv.PUT] == c[RmaEv.OP_COMPLETE_NON_BLOCKING] == ITER
    assert raw.attrs["rma_windows"] == {0: {"name": "window 0", "comm": 0}}
    assert raw.comm_names[0] == "MPI_COMM_WORLD"
    names = raw.regions["name"]
    assert (raw.regions.loc[names == "MPI_Win_fence", "role"] == "rma").all()
    puts = r[r["kind"] == RmaEv.PUT]
    assert set(puts["bytes"]) == {8000} and set(puts["win"]) == {0}
    # each rank puts to the next one (ranks of the window's communicator, world here)
    rank = raw.locations["process"].to_numpy()[puts["location"]]
    assert (puts["remote"].to_numpy() == (rank + 1) % N).all()


def test_fence_transfers_and_matrix(fence):  # noqa: ANN001
    from perflow.passes.comm import comm_matrix

    pag = _pag(fence)
    put = _printed(fence, "put")
    assert put == ITER * 1000 * 8
    m = pag.metrics.groupby(level="process")["rma_bytes_put"].sum()
    assert m.tolist() == [put] * N
    rma = pag.trace.rma
    xfer = rma[rma["kind"] == RmaEv.PUT]
    assert xfer["complete"].notna().all()  # each put completed by the next fence
    assert (xfer["complete"] >= xfer["time"]).all()
    mat = comm_matrix(pag, rma=True).to_numpy()
    expect = np.zeros((N, N))
    expect[np.arange(N), (np.arange(N) + 1) % N] = put
    assert mat.tolist() == expect.tolist()


def test_wait_at_fence(fence):  # noqa: ANN001
    pag = _pag(fence)
    slow = _printed(fence, "slow")
    w = _waits(pag, "rma_wait_at_fence")
    # the fast ranks wait about as long as slow_compute ran on rank 3 (which hardly waits)
    for r in range(N - 1):
        assert 0.6 * slow < w.get(r, 0.0) < 1.6 * slow + 0.05, (w.to_dict(), slow)
    assert w.get(N - 1, 0.0) < 0.2 * slow, (w.to_dict(), slow)


def test_fence_root_cause_names_slow_compute(fence):  # noqa: ANN001
    import perflow

    pag = _pag(fence)
    vt = pag.vertex_table
    causes = perflow.run("root_cause", pag=pag, outputs=["causes"], jobs=1)["causes"]
    top = causes.iloc[0]
    v = int(top["vertex"])
    assert vt["name"].iloc[v] == "slow_compute" and int(top["top_process"]) == N - 1, causes.head()
    assert "rma_wait_at_fence" in top["causes"]
    assert Path(vt["file"].iloc[v]).name == "rma_fence.c"
    line = int(vt["line"].iloc[v])
    assert site_line("rma_fence.c", "fence_slow_begin") <= line <= site_line("rma_fence.c", "fence_slow_end")


def _backtracked(run, slow_rank: int):  # noqa: ANN001, ANN202
    """The root causes of the default backtracking walk, and the first one's (name, process, file, line)."""
    from perflow.passes.backtrack import backtrack

    pag = _pag(run)
    vt = pag.vertex_table
    rc = backtrack(pag)["root_causes"]
    assert len(rc), rc
    top = rc.iloc[0]
    v = int(top["vertex"])
    return rc, (vt["name"].iloc[v], int(top["process"]), Path(vt["file"].iloc[v]).name, int(vt["line"].iloc[v]))


def test_fence_backtracking_crosses_the_fence(fence):  # noqa: ANN001
    # from the fence the fast ranks waited in, across the RMA wait to rank 3's fence, back to slow_compute
    rc, (name, proc, file, line) = _backtracked(fence, N - 1)
    assert (name, proc, file) == ("slow_compute", N - 1, "rma_fence.c"), rc.head()
    assert site_line("rma_fence.c", "fence_slow_begin") <= line <= site_line("rma_fence.c", "fence_slow_end")


def test_late_post_backtracking_reaches_the_target(pscw):  # noqa: ANN001
    # from MPI_Win_start on an origin, across the Late Post to rank 0's post, back to its slow_compute
    rc, (name, proc, file, line) = _backtracked(pscw, 0)
    assert (name, proc, file) == ("slow_compute", 0, "rma_pscw.c"), rc.head()
    assert site_line("rma_pscw.c", "pscw_slow_begin") <= line <= site_line("rma_pscw.c", "pscw_slow_end")


def test_late_post(pscw):  # noqa: ANN001
    pag = _pag(pscw)
    slow = _printed(pscw, "slow")
    late = _waits(pag, "rma_late_post")
    for r in range(1, N):  # every origin waits for rank 0's post
        assert 0.6 * slow < late.get(r, 0.0) < 1.6 * slow + 0.05, (late.to_dict(), slow)
    assert late.get(0, 0.0) == 0.0
    # the group syncs name the partners: origins -> {0}, the target -> {1, 2, 3}
    groups = {k: sorted(v) for k, v in pag.trace.rma_groups.items()}
    rma = pag.trace.rma
    gs = rma[rma["kind"] == RmaEv.GROUP_SYNC]
    for p, g in gs.groupby("process")["group"]:
        assert {tuple(groups[int(k)]) for k in g} == ({(1, 2, 3)} if p == 0 else {(0,)})
    m = pag.metrics.groupby(level="process")["rma_bytes_put"].sum()
    put = _printed(pscw, "put")
    assert m.tolist() == [0.0] + [put] * (N - 1)


def test_breakdown_counts_rma_as_mpi(pscw):  # noqa: ANN001
    from perflow.passes.waitstates import waiting_time

    pag = _pag(pscw)
    wt = waiting_time(pag).groupby("process")["rma_sync"].sum()
    slow = _printed(pscw, "slow")
    assert all(wt.get(r, 0.0) > 0.6 * slow for r in range(1, N)), (wt.to_dict(), slow)


@pytest.mark.parametrize(("program", "create"), [("rma_fence.c", "MPI_Win_create"), ("rma_pscw.c", "MPI_Win_allocate")])
def test_otf2_output_keeps_the_rma_calls(recorded, program: str, create: str):  # noqa: ANN001
    """The OTF2 trace the recorder writes has the one-sided calls as regions (not their RMA records)."""
    import perflow

    run = recorded(program, *(FENCE_ARGS if program == "rma_fence.c" else PSCW_ARGS), n=N)
    if "otf2" not in run.result.files:
        pytest.skip("no OTF2 writer")
    pag = perflow.read(str(run.result.files["otf2"]))
    names = set(pag.vertex_table["name"].astype(str))
    assert {create, "MPI_Put", "MPI_Win_free"} <= names


def test_fortran_f08_calls_recorded(recorded):  # noqa: ANN001
    run = recorded("rma_fence.f90", n=2)
    assert run.result.status == 0, run.stderr
    raw = run.raw
    r = raw.table("rma_events")
    counts = r.groupby(["location", "kind"]).size().unstack(fill_value=0)
    assert (counts[RmaEv.PUT] == 3).all() and (counts[RmaEv.OP_COMPLETE_NON_BLOCKING] == 3).all()
    assert (counts[RmaEv.COLLECTIVE_END] == 8).all()  # create, 6 fences, free
    puts = r[r["kind"] == RmaEv.PUT]
    assert set(puts["bytes"]) == {800} and puts["remote"].tolist() == [1] * 3 + [0] * 3
    assert raw.attrs["rma_windows"] == {0: {"name": "window 0", "comm": 0}}
