"""The invariants suite records small MPI programs (once per session, with the recorder tests' fixtures)."""

from __future__ import annotations

import functools

import pytest


@pytest.fixture(scope="session")
def recorded_pag(recorded):  # noqa: ANN001, ANN201
    """recorded_pag(source, args) -> the PAG of that program recorded on 4 ranks by ``perflow record``."""
    from perflow.trace.build import build_pag

    @functools.cache
    def pag(source: str, args: tuple[str, ...]):  # noqa: ANN202
        return build_pag(recorded(source, *args, n=4).raw)

    return pag
