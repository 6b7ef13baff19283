"""The delay kernel (perflow.trace.delays): costs summed in place and listed then summed are the same sums."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import perflow
from perflow import synthetic
from perflow.trace import analyses, delays

RING8 = Path(__file__).resolve().parents[2] / "examples" / "data" / "ring8" / "traces.otf2"


def _costs(pag, long_term: bool, kind: str) -> delays.DelayResult:
    return analyses._delays(pag, analyses.DelaySettings(long_term=long_term, long_term_kind=kind))


@pytest.fixture(scope="module", params=["ring8", "synthetic"])
def pag(request):  # type: ignore[no-untyped-def]
    if request.param == "ring8":
        return perflow.read(str(RING8))
    return synthetic.trace(nprocs=6, iterations=12, slow_rank=2, seed=5)


@pytest.mark.parametrize("long_term,kind", [(False, "caused"), (True, "caused"), (True, "first")])
def test_listed_costs_equal_the_dense_sums_bit_for_bit(pag, long_term, kind, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    dense = _costs(pag, long_term, kind)
    monkeypatch.setattr(delays, "_DENSE_KEYS", 0)  # every cost listed, then summed per key
    listed = _costs(pag, long_term, kind)
    assert len(dense.costs) > 0
    pd.testing.assert_frame_equal(dense.costs, listed.costs, check_exact=True)
    assert (dense.total_wait, dense.unattributed, dense.lost) == (listed.total_wait, listed.unattributed, listed.lost)


def test_long_term_costs_account_for_the_waiting(pag) -> None:  # type: ignore[no-untyped-def]
    r = _costs(pag, True, "caused")
    assert r.costs["cost"].sum() + r.unattributed + r.lost == pytest.approx(r.total_wait, rel=1e-9)
