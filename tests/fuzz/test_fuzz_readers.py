"""Seeded fuzzing of every reader (the table of :mod:`tests.fuzz.targets`): no traceback, hang, crash or blow-up.

A few cases per row keep the suite fast; ``benchmarks/fuzz_readers.py`` runs
hundreds per row and prints the counts per outcome.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from .harness import FAILURES, run_case, warm_up
from .targets import targets

N_CASES = 10
TARGETS = {t.name: t for t in targets()}


@pytest.mark.timeout(240)
@pytest.mark.parametrize("name", sorted(TARGETS))
def test_fuzz(name: str, tmp_path: Path) -> None:
    t = TARGETS[name]
    warm_up(t, tmp_path)
    cases = [run_case(t, 1000 + 7919 * i, tmp_path, timeout=60) for i in range(N_CASES)]
    failures = [f"{c.mutation} -> {c.outcome}: {c.detail}" for c in cases if c.outcome in FAILURES]
    assert not failures, "\n".join(failures)
    assert not [c for c in cases if "not applicable" in c.mutation], [c.mutation for c in cases]
    counts = Counter(c.outcome for c in cases)
    assert counts["format_error"] > 0, counts  # the mutations do damage the samples
