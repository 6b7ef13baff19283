"""The root-cause flows name the slow function of a recorded program, sampled only and instrumented.

The halo_slow programs (C, C++ at -O3 with the slow function inlined, Fortran
with mpif.h, ``use mpi`` and ``use mpi_f08``) run a halo exchange and an
allreduce ten times; rank 3 also runs ``slow_compute`` (about 40 ms per
iteration here, some 6 times the smallest imbalance the flows still name, see
``benchmarks/bench_smallest_imbalance.py``). Recorded with ``perflow record
-n 4``, with timer samples only (the computation between MPI calls becomes
sampled pieces of the functions that ran) and with compiler instrumentation,
the top row of ``root_cause``, ``critical_path`` and ``backtracking`` must
be ``slow_compute`` on rank 3, with its file and a line inside it. The
recordings are those of ``test_record_slow.py`` (the session caches them).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import site_line
from .test_record_slow import PROGRAMS, SLOW

pytestmark = pytest.mark.mpi

FLOWS = ("root_cause", "critical_path", "backtracking")
_TOPS: dict[tuple, dict[str, dict]] = {}


def _tops(run) -> dict[str, dict]:  # noqa: ANN001
    """Per flow, the top row's vertex, name, file, line and process (computed once per recording)."""
    import perflow
    from perflow.trace.build import build_pag

    key = id(run)
    if key in _TOPS:
        return _TOPS[key]
    pag = build_pag(run.raw)
    top = {}
    r = perflow.run("root_cause", pag=pag, outputs=["causes"], jobs=1)["causes"]
    top["root_cause"] = (int(r["vertex"].iloc[0]), int(r["top_process"].iloc[0]))
    res = perflow.run("critical_path", pag=pag, outputs=["imbalance", "segments"], jobs=1)
    v = int(res["imbalance"]["vertex"].iloc[0])
    seg = res["segments"][res["segments"]["vertex"] == v]
    # the rank where that call path lies on the critical path
    top["critical_path"] = (v, int((seg["end"] - seg["start"]).groupby(seg["process"]).sum().idxmax()))
    b = perflow.run("backtracking", pag=pag, outputs=["root_causes"], jobs=1)["root_causes"]
    top["backtracking"] = (int(b["vertex"].iloc[0]), int(b["process"].iloc[0]))
    vt = pag.vertex_table
    _TOPS[key] = {
        f: {
            "name": str(vt["name"].iloc[v]),
            "file": str(vt["file"].iloc[v]),
            "line": int(vt["line"].iloc[v]),
            "process": p,
            "path": pag.call_paths().iloc[v],
        }
        for f, (v, p) in top.items()
    }
    return _TOPS[key]


def _check(top: dict, source: str, tag: str, fname: str) -> None:
    where = f"{top['path']} on rank {top['process']}"
    assert top["name"] == fname, where
    assert Path(top["file"]).name == source, where
    assert site_line(source, f"{tag}_slow_begin") <= top["line"] <= site_line(source, f"{tag}_slow_end"), where
    assert top["process"] == SLOW, where


@pytest.mark.parametrize("flow", FLOWS)
@pytest.mark.parametrize(("source", "flags", "tag", "fname"), PROGRAMS)
def test_sampled_run_names_the_slow_function(recorded, flow: str, source: str, flags: tuple, tag: str, fname: str):  # noqa: ANN001, ANN201
    run = recorded(source, n=4, flags=flags)
    assert run.result.status == 0, run.stderr
    _check(_tops(run)[flow], source, tag, fname)


@pytest.mark.parametrize("flow", FLOWS)
@pytest.mark.parametrize(("source", "flags", "tag", "fname"), PROGRAMS)
def test_instrumented_run_names_the_slow_function(recorded, flow: str, source: str, flags: tuple, tag: str, fname: str):  # noqa: ANN001, ANN201
    run = recorded(source, n=4, flags=flags, instrument=True)
    assert run.result.status == 0, run.stderr
    _check(_tops(run)[flow], source, tag, fname)


def _code(label: str) -> tuple[str, str, int]:
    """(name, file, line) of a ``name (file:line)`` code label."""
    name, _, where = label.rpartition(" (")
    file, _, line = where.rstrip(")").rpartition(":")
    return name, file, int(line)


@pytest.mark.parametrize("instrument", [False, True], ids=["sampled", "instrumented"])
@pytest.mark.parametrize(("source", "flags", "tag", "fname"), PROGRAMS)
def test_imbalance_and_variance_name_the_slow_function(
    recorded, instrument: bool, source: str, flags: tuple, tag: str, fname: str
):  # noqa: ANN001, ANN201, E501
    import perflow
    from perflow.trace.build import build_pag

    run = recorded(source, n=4, flags=flags, instrument=instrument)
    pag = build_pag(run.raw)
    lo, hi = site_line(source, f"{tag}_slow_begin"), site_line(source, f"{tag}_slow_end")
    # imbalance: the code losing the most time to imbalance is the slow function, at its worst on rank 3 (the
    # allreduce the others wait in may come first: on a loaded machine the slow rank is often off the CPU,
    # which is no code's time, so the function's own imbalance is its CPU time's)
    res = perflow.run("imbalance", pag=pag, outputs=["vertices", "outliers"], jobs=1)
    code = [t for t in (res["vertices"], res["outliers"])]
    code = [t[~t["name"].astype(str).str.startswith("MPI_")] for t in code]
    top = code[0].iloc[0]
    assert (top["name"], int(top["max_process"])) == (fname, SLOW), top["call_path"]
    out = code[1].iloc[0]
    assert (out["name"], int(out["process"])) == (fname, SLOW), out["call_path"]
    # variance: the code between the halo exchange and the allreduce that holds the time is the slow function
    res = perflow.run("variance", pag=pag, outputs=["groups", "slow"], jobs=1)
    g = res["groups"]
    g = g[(g["kind"] == "computation") & g["site"].astype(str).str.endswith("-> MPI_Allreduce")]
    name, file, line = _code(str(g.sort_values("t_median")["code"].iloc[-1]))
    assert (name, file) == (fname, source) and lo <= line <= hi
    if not instrument:
        # sampling cannot tell the slow rank's snippets from the others' (no region is entered): they run
        # 30 times slower, and the slow time range names the code that ran there
        slow = res["slow"].iloc[0]
        name, file, line = _code(str(slow["code"]))
        assert int(slow["process"]) == SLOW and (name, file) == (fname, source) and lo <= line <= hi
