"""Builds that drop the raw events as they consume them (``build_pag(..., reread=...)``): the same PAG."""

import pandas as pd
import pytest

import perflow
from perflow import TraceBuilder
from perflow.synthetic import raw_trace


def _raw(seed: int):  # noqa: ANN202
    return raw_trace(nprocs=7, iterations=6, late_sender=0.3, imbalance=0.4, slow_rank=3, seed=seed)


def _same(a: perflow.PAG, b: perflow.PAG) -> None:
    pd.testing.assert_frame_equal(a.vertex_table, b.vertex_table)
    pd.testing.assert_frame_equal(a.metrics, b.metrics, check_exact=True)
    for t in ("intervals", "messages", "collectives"):
        pd.testing.assert_frame_equal(getattr(a.trace, t), getattr(b.trace, t), check_exact=True)
    assert a.attrs == b.attrs


def _never():  # noqa: ANN202
    raise AssertionError("reread without a clock correction")


@pytest.mark.parametrize("jobs", [1, 2, 3])
def test_released_build_gives_the_same_pag_and_empties_the_raw_trace(jobs: int) -> None:
    kept, given = _raw(jobs), _raw(jobs)
    n = kept.n_events
    one = perflow.build_pag(kept, jobs=jobs)
    two = perflow.build_pag(given, jobs=jobs, reread=_never)
    _same(two, one)
    assert kept.n_events == n  # without reread the caller's trace is left as it was
    assert given.n_events == 0 and len(given.locations) == len(kept.locations)  # only the definitions are left


def test_released_build_reads_the_events_again_for_a_clock_correction() -> None:
    tb = TraceBuilder()
    tb.call(0, "MPI_Send", 5, 6, send={"to": 1})
    tb.call(1, "MPI_Recv", 1, 3, recv={"frm": 0})  # completes before the send was issued
    calls = []

    def again():  # noqa: ANN202
        calls.append(1)
        return tb.raw()

    want = perflow.build_pag(tb.raw())
    got = perflow.build_pag(tb.raw(), reread=again)
    assert calls == [1] and got.attrs["clock_correction"]["violations"] == 1
    _same(got, want)
