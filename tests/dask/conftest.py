"""One Dask engine (2 threaded workers) shared by the tests of this package: a cluster started once."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="package")
def engine():  # type: ignore[no-untyped-def]
    pytest.importorskip("distributed", reason="the Dask engine needs the perflow[dask] extra (dask, distributed)")
    from perflow.dask import Engine

    eng = Engine(n_workers=2, processes=False)
    yield eng
    eng.close()
