"""TAU profile reader on the shared cpi-mpi sample (TAU 2.29, 4 ranks) and small hand-written files."""

from __future__ import annotations

from pathlib import Path

import pytest

import perflow
from perflow.errors import FormatError
from tests.conftest import shared
from tests.readers.helpers import check_times, value


@pytest.fixture(scope="module")
def cpi() -> perflow.PAG:
    return perflow.read(shared("tau", "cpi-mpi"))


def test_shape(cpi: perflow.PAG) -> None:
    assert cpi.attrs["format"] == "tau"
    assert cpi.n_vertices == 12  # README: 12 call-tree nodes
    assert list(cpi.processes) == [0, 1, 2, 3]
    assert cpi.attrs["nprocs"] == 4
    assert cpi.attrs["metadata"]["Metric Name"] == "TIME"
    assert list(cpi.roots) == [cpi.vertex(".TAU application").id]
    assert len(cpi.vertex(".TAU application/MPI_Finalize()").children) == 4


def test_hand_checked(cpi: perflow.PAG) -> None:
    # profile.0.0.0: "MPI_Finalize()" 1 4 4458 32304 -> excl 4458 us, incl 32304 us;
    # its callees' incl: 296 + 27490 + 33 + 27 = 27846 us, and 4458 + 27846 = 32304.
    assert value(cpi, ".TAU application/MPI_Finalize()", "time_exc", 0) == pytest.approx(4458e-6)
    assert value(cpi, ".TAU application/MPI_Finalize()", "time_inc", 0) == pytest.approx(32304e-6)
    # profile.1.0.0: ".TAU application" 1 7 419 55329
    assert value(cpi, ".TAU application", "time_inc", 1) == pytest.approx(55329e-6)
    assert value(cpi, ".TAU application", "visits", 1) == 1
    assert cpi.vertex(".TAU application/MPI_Bcast()").kind == "mpi"


def test_consistent_times(cpi: perflow.PAG) -> None:
    check_times(cpi)


def _write(d: Path, rank: int, lines: list[str]) -> None:
    body = [
        f"{len(lines)} templated_functions_MULTI_TIME",
        "# Name Calls Subrs Excl Incl ProfileCalls # <metadata><attribute><name>Metric Name</name>"
        "<value>TIME</value></attribute></metadata>",
        *lines,
        "0 aggregates",
    ]
    (d / f"profile.{rank}.0.0").write_text("\n".join(body) + "\n")


def test_flat_profile_one_level(tmp_path: Path) -> None:
    _write(
        tmp_path,
        0,
        [
            '"main" 1 2 10 60 0 GROUP="TAU_DEFAULT"',
            '"solve" 3 0 40 40 0 GROUP="TAU_USER"',
            '"MPI_Send()" 5 0 10 10 0 GROUP="MPI"',
        ],
    )
    pag = perflow.read(tmp_path)
    assert pag.attrs["format"] == "tau"
    # no ".TAU application": a synthetic root with every timer one level below it
    assert sorted(pag.call_paths()) == ["<program>", "<program>/MPI_Send()", "<program>/main", "<program>/solve"]
    assert value(pag, "<program>/solve", "visits") == 3
    assert value(pag, "<program>/solve", "time_exc") == pytest.approx(40e-6)


def test_errors(tmp_path: Path) -> None:
    (tmp_path / "profile.0.0.0").write_text('3 templated_functions_MULTI_TIME\n# Name\n"main" 1 0 1 1 0\n')
    with pytest.raises(FormatError, match=r"profile\.0\.0\.0.*truncated: header announces 3 timers, the file has 1"):
        perflow.read_tau(tmp_path)
    (tmp_path / "profile.0.0.0").write_text("1 templated_functions\n# Name\nmain 1 0 1 1 0\n")
    with pytest.raises(FormatError, match=r"line 3.*malformed timer line"):
        perflow.read_tau(tmp_path)
    (tmp_path / "profile.0.0.0").write_text("hello\n")
    with pytest.raises(FormatError, match="first line should be"):
        perflow.read_tau(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FormatError, match="no TAU profile"):
        perflow.read_tau(empty)


def test_multi_metric_and_threads(tmp_path: Path) -> None:
    for metric, scale in (("TIME", 1), ("PAPI_TOT_CYC", 1000)):
        d = tmp_path / f"MULTI__{metric}"
        d.mkdir()
        for thr in (0, 1):
            lines = [
                f'"main" 1 1 {10 * scale} {30 * scale} 0 GROUP="TAU_DEFAULT"',
                f'"MPI_Send()" 2 0 {20 * scale} {20 * scale} 0 GROUP="MPI"',
                f'"main => MPI_Send()" 2 0 {20 * scale} {20 * scale} 0 GROUP="TAU_CALLPATH|MPI"',
            ]
            body = [
                f"{len(lines)} templated_functions_MULTI_{metric}",
                f"# Name Calls Subrs Excl Incl ProfileCalls # <metadata><attribute><name>Metric Name</name>"
                f"<value>{metric}</value></attribute></metadata>",
                *lines,
            ]
            (d / f"profile.0.0.{thr}").write_text("\n".join(body) + "\n")
    pag = perflow.read(tmp_path)
    assert sorted(pag.call_paths()) == ["main", "main/MPI_Send()"]
    assert {"time_inc", "time_exc", "visits", "PAPI_TOT_CYC_inc", "PAPI_TOT_CYC_exc"} <= set(pag.metric_names)
    send = pag.vertex("main/MPI_Send()").id
    assert pag.metrics.loc[(send, 0, 1), "PAPI_TOT_CYC_exc"] == 20000
    assert pag.metrics.loc[(send, 0, 1), "time_exc"] == pytest.approx(20e-6)
    assert pag.metric_info["PAPI_TOT_CYC_inc"].mode == "inclusive"
    assert len(pag.locations) == 2
    check_times(pag)
