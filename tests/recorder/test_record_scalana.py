"""The scalana flow names the non-scalable part of a recorded program and its cause.

``scaling_serial.c`` divides a fixed amount of work among the ranks
(``compute_block``, 800 ms in all: 400, 200, 100 ms per rank at 2, 4 and 8
ranks) and has rank 0 merge one value per rank after a gather
(``merge_results``, 8 ms per rank and iteration: 64, 128, 256 ms), which the
other ranks wait for in ``MPI_Bcast``. Built with ``perflow cc``, recorded
with ``perflow record`` at 2, 4 and 8 ranks (about 2 s each), the flow must
find ``merge_results`` and the broadcast non-scalable, trace the broadcast
back to ``merge_results`` on rank 0 with its file and a line inside it, and
leave ``compute_block`` (which scales) alone. The work is timed sleeping, so
that 8 ranks on 2 cores scale as on 8 cores (see the program).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import site_line

pytestmark = pytest.mark.mpi

SOURCE = "scaling_serial.c"
SCALES = (2, 4, 8)


@pytest.fixture(scope="module")
def scalana(recorded):  # noqa: ANN001, ANN201
    """The scalana flow's results on the three recordings."""
    import perflow

    dirs = []
    for n in SCALES:
        # instrumented, not sampled: the work is simulated by sleeping, which sampling (rightly) shows as
        # time off the CPU, no code's
        run = recorded(SOURCE, n=n, instrument=True, sample_rate=0)
        assert run.result.status == 0, run.stderr
        assert f"scaling_serial: {n} ranks" in run.stdout
        dirs.append(str(Path(run.result.files["rawtrace"]).parent))
    res = perflow.run("scalana", runs=dirs, jobs=1)
    res.raise_for_status()
    return res


def test_the_non_scalable_part_is_found(scalana) -> None:  # noqa: ANN001
    ns = scalana["non_scalable"].set_index("name")
    assert ns.attrs["scales"] == list(SCALES) and ns.attrs["mode"] == "strong"
    assert {"merge_results", "MPI_Bcast"} <= set(ns.index)
    merge = ns.loc["merge_results"]
    where = merge[["model", "T@2", "T@4", "T@8", "loss", "predicted"]].to_dict()
    # 64, 128, 256 ms by construction (plus the wake-up delays of 8 ranks on 2 cores)
    assert 0.055 <= merge["T@2"] <= 0.12 and 0.23 <= merge["T@8"] <= 0.6, where
    assert merge["T@8"] > 2.5 * merge["T@2"], where
    assert bool(merge["by_loss"]) and merge["loss"] > 0.15 and merge["share"] > 0.1, where
    # its model keeps growing beyond the largest scale (three points: its exact form is loosely determined)
    assert bool(merge["by_model"]) and merge["predicted"] > merge["T@8"], where
    # the divided work scales: its model shrinks with p and it is not reported
    models = scalana["models"].set_index("name")
    assert "compute_block" not in ns.index, ns.loc["compute_block", ["model", "loss", "share"]].to_dict()
    block = models.loc["compute_block"]
    assert block["predicted"] < block["T@8"], block[["model", "T@2", "T@4", "T@8"]].to_dict()  # e.g. c·p^-1
    assert 0.35 <= models.loc["compute_block", "T@2"] <= 0.5


def test_the_cause_is_named_with_its_source(scalana) -> None:  # noqa: ANN001
    causes = scalana["causes"].set_index("call_path")
    bcast = causes.loc[[c for c in causes.index if c.endswith("/MPI_Bcast")][0]]
    assert bcast["cause"] == "merge_results" and bcast["cause_process"] == 0
    file, _, line = bcast["source"].rpartition(":")
    assert file == SOURCE
    assert site_line(SOURCE, "merge_begin") <= int(line) <= site_line(SOURCE, "merge_end")
    assert "<-collective- MPI_Bcast (rank 0) <-program- merge_results (rank 0)" in bcast["walk"]
    merge = causes.loc[[c for c in causes.index if c.endswith("/merge_results")][0]]
    assert merge["cause"] == "merge_results" and merge["steps"] == 0  # abnormal itself: only rank 0 merges
    # the report's table of causes: the broadcast's row names the function and where it is
    rows = [ln for ln in scalana["report"].splitlines() if "/MPI_Bcast " in ln and "merge_results" in ln]
    assert rows and bcast["source"] in rows[0]
