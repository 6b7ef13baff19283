"""The invariants of :mod:`tests.invariants.checks` on every dataset of :mod:`tests.invariants.datasets`."""

from __future__ import annotations

import pytest

from . import datasets
from .checks import CHECKS, Check

#: Invariants a dataset is known to break, with the reason (an xfail, not strict: a fix shows up as XPASS).
#: (dataset, check id) -> why the check fails there (a non-strict xfail); empty: every check holds everywhere
KNOWN_ISSUES: dict[tuple[str, str], str] = {}


def _marks(dataset: str) -> list[pytest.MarkDecorator]:
    return [pytest.mark.mpi] if dataset in datasets.RECORDED else []


@pytest.mark.parametrize("check", CHECKS, ids=[c.id for c in CHECKS])
@pytest.mark.parametrize("dataset", [pytest.param(d, marks=_marks(d), id=d) for d in datasets.IDS])
def test_invariant(dataset: str, check: Check, request: pytest.FixtureRequest) -> None:
    pag = datasets.load(dataset, request)
    is_trace = pag.trace is not None and pag.trace.n_intervals > 0
    if check.needs == "trace" and not is_trace:
        pytest.skip("a trace invariant; this dataset is a profile")
    if check.needs == "profile" and is_trace:
        pytest.skip("a profile invariant; this dataset is a trace")
    reason = KNOWN_ISSUES.get((dataset, check.id))
    if reason is not None:
        request.applymarker(pytest.mark.xfail(reason=reason, strict=False))
    check.fn(pag)


def test_every_check_is_named_once() -> None:
    ids = [c.id for c in CHECKS]
    assert len(ids) == len(set(ids))
