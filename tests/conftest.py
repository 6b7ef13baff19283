"""Shared fixtures: where the real sample data lives, small PAGs for worked examples."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# The suite checks the compiled kernels (the path large inputs take); tests/test_jit.py checks that small inputs,
# interpreted by default (perflow._jit), give the same results.
os.environ.setdefault("PERFLOW_JIT", "compile")

# The recorder's session fixtures, defined once here for the whole suite: the recorder, invariants and Dask tests
# share one build of the programs and of the recorder's library, and each distinct recording.
from tests.recorder.fixtures import build, mpi4py_ok, plain, recorded, toolchain, workdir  # noqa: E402, F401


def shared_data_dir() -> Path | None:
    """The read-only folder of real tool output (``../shared/data`` beside the checkout).

    ``PERFLOW_SHARED_DATA`` overrides the location.
    """
    candidates = [os.environ.get("PERFLOW_SHARED_DATA"), REPO.parent / "shared" / "data", Path("/work/shared/data")]
    for c in candidates:
        if c and Path(c).is_dir():
            return Path(c)
    return None


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path of the shared sample data; skips the test when it is absent."""
    d = shared_data_dir()
    if d is None:
        pytest.skip("the shared sample data (../shared/data) is not available here")
    return d


def shared(*parts: str) -> Path:
    """A path inside the shared data, or skip the calling test when it is missing."""
    d = shared_data_dir()
    if d is None or not (d.joinpath(*parts)).exists():
        pytest.skip(f"shared sample {'/'.join(parts)} is not available here")
    return d.joinpath(*parts)


def import_hatchet():
    """llnl-hatchet for a cross-check, or skip the calling test with the reason.

    Hatchet requires pandas < 3, while ``pip install perflow`` brings the newest
    pandas 3; the suite runs on what users get, and ``.ci/run`` runs the tests
    marked ``hatchet`` a second time in an environment where Hatchet's pin holds.
    """
    import pandas as pd

    if int(pd.__version__.split(".")[0]) >= 3:
        pytest.skip(
            f"llnl-hatchet requires pandas < 3 (here {pd.__version__}); .ci/run runs it in its Hatchet venv",
            allow_module_level=True,
        )
    return pytest.importorskip("hatchet", reason="llnl-hatchet is not installed (pip install llnl-hatchet)")
