"""waiting_time's compiled per-vertex sums equal pandas' group-by sums bit for bit (real sample traces)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import perflow
from perflow.passes import _waittime
from perflow.passes._waittime import WAITING_TIME, WaitingTimeSettings
from tests.conftest import shared_data_dir

SHARED = shared_data_dir()
TRACES = [Path(__file__).resolve().parents[2] / "examples" / "data" / "ring8" / "traces.otf2"] + (
    sorted((SHARED / "scorep-scalasca").glob("*/traces.otf2")) if SHARED is not None else []
)


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.parent.name)
def test_compiled_sums_equal_pandas_groupby(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not path.exists():
        pytest.skip(f"{path} not available")
    pag = perflow.read(str(path))
    fast = WAITING_TIME.compute(pag, WaitingTimeSettings())
    monkeypatch.setattr(_waittime, "_DENSE_GROUPS", 0)  # every table through pandas' group-by
    slow = WAITING_TIME.compute(pag, WaitingTimeSettings())
    assert len(fast) and fast["wait"].sum() > 0
    pd.testing.assert_frame_equal(fast, slow, check_exact=True)
