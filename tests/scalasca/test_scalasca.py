"""perflow equals Scalasca 2.6 on the shared Score-P 8.4 traces: every metric, call path and location.

Each folder of ``scorep-scalasca/`` holds a trace and Scalasca's analysis of it
(``scout.cubex``). perflow reads the trace, computes its wait states, critical
path and delay costs, and names them as Scalasca does
(:func:`perflow.trace.cubemetrics.scalasca_metrics`); every value of every
metric perflow computes must equal Scalasca's within 1e-6 relative, per call
path (Cube's call tree: the program root, ``main``, OpenMP workers below
``main/!$omp parallel``) and location (process and thread). The metrics
Scalasca computes and perflow does not are named below. The CUBE file perflow
writes is read back with pycubexr and with perflow's CUBE reader and must hold
the same numbers.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import perflow
from perflow.trace.analyses import CRITICAL_PATH, DELAY_COSTS
from perflow.trace.cubemetrics import DELAY_CATEGORY, METRICS, scalasca_metrics
from tests.conftest import shared

from .cubekit import KEYS, compare, vertex_paths, with_perflow, with_pycubexr

PROGRAMS = ["late_sender", "allreduce_imbalance", "barrier_imbalance", "omp_imbalance"]
#: Scalasca's critical-path derivatives, which perflow does not compute
NOT_COMPUTED = {"critical_path_activities", "critical_imbalance_impact", "inter_partition_imbalance",
                "non_critical_path_activities"}  # fmt: skip
#: the facts of the shared data's README (seconds, from Scalasca): Late Sender (incl. wrong order), Wait at
#: Barrier, Wait at N x N, Finalize wait, Init completion, OpenMP implicit barrier, critical-section contention,
#: all delay costs (short + long term), critical path length
FACTS = {
    "late_sender": (0.874423613 + 0.198253802, 2.192722044, 0, 0.000247176, 0.024123206, 0, 0, 3.265399459,
                    1.584479170),
    "allreduce_imbalance": (0, 0, 1.450168006, 0.000637347, 0.006584777, 0, 0, 1.450168006, 1.274685644),
    "barrier_imbalance": (0, 1.808805316, 0, 0.000347634, 0.023794044, 0, 0, 1.808805316, 1.394728671),
    "omp_imbalance": (0, 0.176291848, 0, 0.000052868, 0.000000035, 0.540468206, 0.180242963, 0.716760054,
                      1.075838733),
}  # fmt: skip
_FACT_METRICS = ("mpi_latesender", "mpi_barrier_wait", "mpi_wait_nxn", "mpi_finalize_wait", "mpi_init_completion",
                 "omp_ibarrier_wait", "omp_lock_contention_critical")  # fmt: skip
#: the delay categories the README's "all delay costs" adds up (not OpenMP idle threads)
_FACT_DELAYS = ("latesender", "latereceiver", "barrier", "n2n", "12n", "n21", "ompbarrier")


@cache
def _pag(prog: str) -> perflow.PAG:
    return perflow.read(shared("scorep-scalasca", prog, "traces.otf2"))


@cache
def _scout(prog: str) -> pd.Series:
    return with_pycubexr(shared("scorep-scalasca", prog, "scout.cubex"))


@cache
def _perflow(prog: str) -> pd.Series:
    pag = _pag(prog)
    t = scalasca_metrics(pag)
    t["call_path"] = vertex_paths(pag.vertex_table)[t["vertex"].to_numpy()]
    t["metric"] = t["metric"].astype(str)
    return t.groupby(KEYS)["value"].sum()


@pytest.mark.parametrize("prog", PROGRAMS)
def test_every_metric_equals_scalasca(prog: str) -> None:
    """Every value of every metric, per call path and location: time and visits, the wait states (mpi_*,
    omp_*), their counts, message and collective counts and bytes, the critical path, the delay costs."""
    scout, ours = _scout(prog), _perflow(prog)
    computed = {m.name for m in METRICS}
    assert set(scout.index.get_level_values("metric")) - computed <= NOT_COMPUTED
    scout = scout[scout.index.get_level_values("metric").isin(computed)]
    bad = compare(scout, ours)
    assert bad.empty, f"{prog}: perflow (b) differs from Scalasca (a):\n{bad}"
    # the comparison covers what matters: Scalasca's wait states, time and visits of every call path
    metrics = set(scout.index.get_level_values("metric"))
    assert {"time", "visits", "critical_path", "mpi_init_completion", "mpi_finalize_wait"} <= metrics
    assert len(scout) >= 90


@pytest.mark.parametrize("prog", PROGRAMS)
def test_readme_facts(prog: str) -> None:
    """The totals of the shared data's README: wait states, all delay costs, the critical path length."""
    ours = _perflow(prog).groupby(level="metric").sum()
    *waits, delays, cp = FACTS[prog]
    for name, want in zip(_FACT_METRICS, waits):
        assert ours.get(name, 0.0) == pytest.approx(want, rel=1e-6, abs=1e-9), name
    names = [f"delay_{c}{lt}" for c in _FACT_DELAYS for lt in ("", "_longterm")]
    assert ours.reindex(names).fillna(0).sum() == pytest.approx(delays, rel=1e-6)
    assert _pag(prog).analyses.get(CRITICAL_PATH).length == pytest.approx(cp, rel=1e-6)


@pytest.mark.parametrize("prog", PROGRAMS)
def test_delay_costs_per_kind_equal_scalasca(prog: str) -> None:
    """Short- and long-term delay costs per Scalasca category, from the delay analysis itself."""
    d = _pag(prog).analyses.get(DELAY_COSTS, long_term=True).costs
    d = d[~d["propagating"].to_numpy()]
    cat = d["wait_kind"].astype(str).map(DELAY_CATEGORY)
    lt = np.where(d["long_term"].to_numpy(), "_longterm", "")
    ours = d.assign(metric="delay_" + cat.fillna("none") + lt)[cat.notna().to_numpy()].groupby("metric")["cost"].sum()
    scout = _scout(prog).groupby(level="metric").sum()
    scout = scout[scout.index.str.startswith("delay_")]
    pd.testing.assert_series_equal(
        ours.reindex(scout.index).fillna(0.0), scout, check_names=False, rtol=1e-6, check_index_type=False
    )


def test_both_readers_read_scalasca_alike() -> None:
    """pycubexr and perflow's CUBE reader give the same values from Scalasca's file (FLOAT is 8 bytes)."""
    path = shared("scorep-scalasca", "omp_imbalance", "scout.cubex")
    assert compare(with_pycubexr(path), with_perflow(path)).empty


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from perflow.writers.cube import write_cube

    d = tmp_path_factory.mktemp("cube")
    return {p: write_cube(_pag(p), d / p) for p in ("late_sender", "omp_imbalance")}


@pytest.mark.parametrize("prog", ["late_sender", "omp_imbalance"])
@pytest.mark.parametrize("reader", [with_pycubexr, with_perflow], ids=["pycubexr", "perflow"])
def test_written_cube_file_holds_scalascas_numbers(written: dict[str, Path], prog: str, reader) -> None:  # noqa: ANN001
    """perflow's CUBE file, read back by either reader, holds Scalasca's numbers under Scalasca's names."""
    back = reader(written[prog])
    scout = _scout(prog)
    scout = scout[scout.index.get_level_values("metric").isin({m.name for m in METRICS})]
    bad = compare(scout, back)
    assert bad.empty, f"{prog}: the written file (b) differs from Scalasca's (a):\n{bad}"
