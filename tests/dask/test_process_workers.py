"""The Dask engine with worker processes: partitions, analyses and OTF2 decoding cross process boundaries."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("distributed", reason="the Dask engine needs the perflow[dask] extra (dask, distributed)")

from perflow.synthetic import raw_trace  # noqa: E402
from perflow.trace.build import build_pag  # noqa: E402

from .example_analysis import WAITS_BY_VERTEX  # noqa: E402


@pytest.fixture(scope="module")
def engine():  # type: ignore[no-untyped-def]
    from perflow.dask import Engine

    eng = Engine(n_workers=2, processes=True, memory_limit="2GiB")
    yield eng
    eng.close()


def test_an_analysis_of_a_test_file_runs_in_worker_processes(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The example analysis is pickled by reference to the workers, which import it: no change to perflow.dask."""
    from perflow.readers.otf2 import fast_available
    from perflow.writers.otf2 import write_otf2

    raw = raw_trace(nprocs=6, iterations=5, late_sender=0.3, slow_rank=1, seed=11)
    ref = build_pag(raw)
    pag = engine.load(raw, n_partitions=3).pag()
    pd.testing.assert_frame_equal(pag.analyses.get(WAITS_BY_VERTEX), ref.analyses.get(WAITS_BY_VERTEX), rtol=1e-12)
    assert pag.gathered == set()
    if fast_available():  # each worker process decodes its own locations (in a forked child of its own)
        write_otf2(raw, tmp_path / "run")
        dt = engine.load(tmp_path / "run", scout_events=50)
        pd.testing.assert_frame_equal(dt.to_pag().metrics, build_pag(raw).metrics, check_exact=False, rtol=1e-12)
