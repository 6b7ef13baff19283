"""The trace passes on the shipped sample examples/data/ring8.pag (a saved and reloaded trace PAG).

The sample is a synthetic 8-rank ring with a slow rank (3, 1.8x), 30 % linear load imbalance and
occasional late senders (see examples/make_samples.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import perflow
import perflow.passes  # noqa: F401
from perflow.passes.critical_path import critical_path
from perflow.passes.delay import root_cause
from perflow.passes.pop import pop_metrics
from perflow.passes.variance import variance
from perflow.passes.waitstates import late_sender, wait_states

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "data" / "ring8.pag"


@pytest.fixture(scope="module")
def ring8():
    if not SAMPLE.exists():
        pytest.skip("examples/data/ring8.pag is not in this checkout")
    return perflow.load(SAMPLE)


def test_sample_findings(ring8):
    assert ring8.trace is not None
    w = wait_states(ring8)
    assert w.attrs["clock_violations"] == 0
    ls = late_sender(ring8)
    assert ls["name"].astype(str).tolist() == ["MPI_Waitall"]
    # rank 3 is waited for most in the exchange
    assert ls["waited_for"].iloc[0].startswith("3:")
    cp = critical_path(ring8)
    seg = cp["segments"]
    comp = seg[seg["name"].astype(str) == "compute"]
    share = (comp["end"] - comp["start"]).groupby(comp["process"]).sum() / (comp["end"] - comp["start"]).sum()
    # the late senders pull the path to other ranks now and then; the slow rank holds the largest part
    assert share.idxmax() == 3 and share[3] > 0.35
    top = root_cause(ring8, long_term=True)["by_process"].iloc[0]
    assert (top["process"], top["name"]) == (3, "compute")
    pop = pop_metrics(ring8).set_index("metric")["value"]
    assert 0.4 < pop["load_balance"] < 0.8  # slow rank 3 and 30 % imbalance
    slow = variance(ring8, slices=10)["slow"]
    assert 3 in set(slow["process"])


def test_hpctoolkit_trace_of_a_ping_pong():
    """A real trace (HPCToolkit 2023+, MPI ping-pong, 2 ranks): sampled call paths inside the MPI calls."""
    from tests.conftest import shared

    pag = perflow.read(shared("hpctoolkit", "ping-pong-v4"))
    assert pag.trace is not None and len(pag.trace.messages) == 0
    w = wait_states(pag)
    # MPI_Finalize is a world barrier: rank 0 arrives first and waits for rank 1
    assert list(zip(w["process"], w["kind"].astype(str), w["name"].astype(str), w["cause_process"])) == [
        (0, "finalize_wait", "MPI_Finalize", 1)
    ]
    s = critical_path(pag)["summary"].iloc[0]
    assert s["end"] == pytest.approx(pag.trace.span[1])
    # a ping-pong is all communication: the MPI library's functions below MPI_Send/MPI_Recv are MPI time
    assert s["mpi_on_path"] == pytest.approx(s["length"], rel=1e-6)
    pop = pop_metrics(pag).set_index("metric")["value"]
    assert pop["useful_total"] == 0.0 and pop["parallel_efficiency"] == 0.0
    # without message records the work of an MPI call is unknown: no communication snippets are compared
    assert variance(pag)["instances"].empty
