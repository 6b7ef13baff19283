"""Breakdown pass: categories of a profile, waiting time of traces, output shapes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import perflow
from perflow.errors import PassError
from perflow.passes.breakdown import breakdown, waiting_time
from perflow.sdk.profile import CATEGORIES, categories

from .profile_data import allreduce_waits_for_rank7, literal, read_shared, slow_rank_trace


@pytest.fixture(scope="module")
def profile() -> perflow.PAG:
    return literal(
        [
            {"name": "compute", "metrics": {"time_exc": [4.0, 6.0]}},
            {"name": "MPI_Send", "metrics": {"time_exc": [1.0, 0.0]}},
            {"name": "MPI_Waitall", "metrics": {"time_exc": [0.5, 1.5]}},
            {"name": "MPI_Allreduce", "metrics": {"time_exc": [2.0, 1.0]}},
            {"name": "MPI_Barrier", "metrics": {"time_exc": [0.25, 0.25]}},
            {"name": "MPI_File_write", "metrics": {"time_exc": [0.75, 0.0]}},
            {"name": "fwrite", "kind": "io", "metrics": {"time_exc": [0.0, 0.5]}},
            {"name": "MPI_Comm_rank", "metrics": {"time_exc": [0.5, 0.75]}},
        ],
        nprocs=2,
    )


def test_categories(profile: perflow.PAG) -> None:
    assert categories(profile).tolist() == [
        "computation",
        "computation",
        "p2p",
        "p2p",
        "collective",
        "sync",
        "io",
        "io",
        "mpi",
    ]


def test_categories_of_decorated_names() -> None:
    # TAU writes "MPI_Bcast()", sampling tools may append annotations
    pag = literal(
        [
            {"name": n, "metrics": {"time_exc": [1.0]}}
            for n in ("MPI_Bcast()", "MPI_Init()", "MPI_Send() [THROTTLED]", "compute()")
        ],
        nprocs=1,
    )
    assert categories(pag).tolist()[1:] == ["collective", "sync", "p2p", "computation"]


def test_profile_per_process(profile: perflow.PAG) -> None:
    wide = breakdown(profile, wide=True)
    assert wide["process"].tolist() == [0, 1]
    assert list(wide.columns) == ["process", *CATEGORIES, "total"]
    assert wide["computation"].tolist() == [4.0, 6.0]
    assert wide["p2p"].tolist() == [1.5, 1.5]
    assert wide["collective"].tolist() == [2.0, 1.0]
    assert wide["sync"].tolist() == [0.25, 0.25]
    assert wide["io"].tolist() == [0.75, 0.5]
    assert wide["mpi"].tolist() == [0.5, 0.75]
    assert wide["wait"].tolist() == [0.0, 0.0]  # no trace: no waiting time
    assert wide["total"].tolist() == [9.0, 10.0]
    long = breakdown(profile)
    assert list(long.columns) == ["process", "category", "value", "share"]
    assert len(long) == 2 * len(CATEGORIES)
    p0 = long[long["process"] == 0].set_index("category")
    assert p0.loc["computation", "share"] == pytest.approx(4 / 9)


def test_profile_other_groupings(profile: perflow.PAG) -> None:
    tot = breakdown(profile, by="total").set_index("category")
    assert tot.loc["computation", "value"] == 10.0 and tot.loc["p2p", "value"] == 3.0
    assert tot["share"].sum() == pytest.approx(1.0)
    per_v = breakdown(profile, by="vertex")
    assert per_v["name"].tolist()[:2] == ["compute", "MPI_Send"]
    assert set(per_v.columns) == {"vertex", "name", "call_path", "category", "value", "share"}
    vp = breakdown(profile, by="vertex_process")
    assert len(vp) == 13  # 8 vertices x 2 processes, minus the zeros of MPI_Send@1, MPI_File_write@1, fwrite@0
    assert vp["value"].sum() == pytest.approx(19.0)
    vpw = breakdown(profile, by="vertex_process", wide=True)
    assert len(vpw) == 13 and vpw["total"].sum() == pytest.approx(19.0)
    row = vpw[(vpw["name"] == "MPI_Waitall") & (vpw["process"] == 1)].iloc[0]
    assert (row["p2p"], row["computation"], row["total"]) == (1.5, 0.0, 1.5)


def test_trace_waiting_collective() -> None:
    # ranks 0-6 wait 1.0 in MPI_Allreduce for rank 7; MPI_Init / MPI_Finalize start together (no wait)
    pag = allreduce_waits_for_rank7()
    wide = breakdown(pag, wide=True).set_index("process")
    assert wide.loc[0, "computation"] == pytest.approx(1.1)  # init_data 0.1 + compute 1.0
    assert wide.loc[0, "collective"] == pytest.approx(0.1)
    assert wide.loc[0, "wait"] == pytest.approx(1.0)
    assert wide.loc[0, "sync"] == pytest.approx(0.2)
    assert wide.loc[7, "computation"] == pytest.approx(2.1)
    assert wide.loc[7, "wait"] == pytest.approx(0.0)
    assert np.allclose(wide["total"], 2.4)
    no_wait = breakdown(pag, wide=True, waiting=False).set_index("process")
    assert no_wait.loc[0, "collective"] == pytest.approx(1.1)
    vp = breakdown(pag, by="vertex_process").set_index(["name", "process", "category"])
    assert vp.loc[("MPI_Allreduce", 3, "wait"), "value"] == pytest.approx(1.0)
    assert vp.loc[("MPI_Allreduce", 3, "collective"), "share"] == pytest.approx(0.1 / 1.1)
    wt = waiting_time(pag)
    assert len(wt) == 7 and np.allclose(wt["collective"], 1.0) and (wt["vertex"] == 5).all()


def test_trace_waiting_late_sender() -> None:
    tb = perflow.TraceBuilder()
    tb.call(0, "compute", 0, 4)
    tb.call(0, "MPI_Send", 4, 5, send={"to": 1, "bytes": 8})
    tb.call(1, "compute", 0, 1)
    tb.call(1, "MPI_Recv", 1, 5.5, recv={"frm": 0, "bytes": 8})
    pag = tb.build()
    wide = breakdown(pag, wide=True).set_index("process")
    # Late Sender: min(Es = 4, Lr = 5.5) - Er (1) = 3 of the receive's 4.5
    assert wide.loc[1, "wait"] == pytest.approx(3.0)
    assert wide.loc[1, "p2p"] == pytest.approx(1.5)
    assert wide.loc[0, "p2p"] == pytest.approx(1.0) and wide.loc[0, "wait"] == 0.0
    wt = waiting_time(pag)
    assert wt[["process", "late_sender"]].values.tolist() == [[1, 3.0]]


def test_synthetic_trace_total_is_preserved() -> None:
    pag = slow_rank_trace()
    wide = breakdown(pag, wide=True)
    exc = pag.aggregate("time_exc").sum()
    assert wide["total"].sum() == pytest.approx(exc)
    # the slow rank waits least
    assert int(wide.loc[wide["wait"].idxmin(), "process"]) == 3


def test_errors(profile: perflow.PAG) -> None:
    with pytest.raises(PassError, match="needs an exclusive metric; 'time_inc' is inclusive"):
        breakdown(profile, metric="time_inc")
    with pytest.raises(PassError, match="by must be one of process, vertex, vertex_process, total"):
        breakdown(profile, by="thread")


def test_real_trace() -> None:
    pag = read_shared("otf2", "ping-pong", "traces.otf2")
    wide = breakdown(pag, wide=True)
    assert wide["process"].tolist() == [0, 1]
    assert wide["total"].sum() == pytest.approx(pag.aggregate("time_exc").sum())
    assert (wide["p2p"] + wide["wait"] > 0).all()


def test_gpu_work_and_idle_regions_have_their_categories() -> None:
    from perflow.sdk.profile import device_categories

    names = pd.Series(["saxpy", "cudaLaunchKernel", "[CUDA memcpy Host-to-Device]", "GPU idle", "DEVICE IDLE",
                       "Idle", "hipMemcpy", "compute"])  # fmt: skip
    kinds = np.array(["gpu", "gpu", "gpu", "gpu", "gpu", "function", "gpu", "function"])
    assert device_categories(names, kinds).tolist() == ["gpu", "", "gpu", "idle", "idle", "idle", "", ""]
    pag = perflow.PAG.from_frames(
        pd.DataFrame(
            {
                "name": ["main", "cudaMemcpy", "copy", "GPU idle"],
                "parent": [-1, 0, 1, -1],
                "kind": ["function", "gpu", "gpu", "gpu"],
            }
        ),  # fmt: skip
        pd.DataFrame(
            {"vertex": [0, 1, 2, 3], "process": 0, "thread": [0, 0, 1, 1], "time_exc": [1.0, 2.0, 3.0, 4.0]}
        ),  # fmt: skip
    )
    assert categories(pag).tolist() == ["computation", "computation", "gpu", "idle"]
    wide = breakdown(pag, by="process", wide=True).iloc[0]
    assert (wide["computation"], wide["gpu"], wide["idle"], wide["total"]) == (3.0, 3.0, 4.0, 10.0)
