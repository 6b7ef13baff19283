"""Score-P experiment directories and folders holding runs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import perflow
from perflow.cli.main import main
from perflow.errors import FormatError
from perflow.readers import detect_format
from tests.conftest import shared


@pytest.fixture
def experiment(tmp_path: Path) -> Path:
    """A Score-P experiment with a trace and a profile: the shared ping-pong experiment plus the cpi profile."""
    d = tmp_path / "scorep-20240101_1200_42"
    shutil.copytree(shared("otf2", "ping-pong"), d)
    shutil.copy(shared("cube", "scorep-cpi", "profile.cubex"), d / "profile.cubex")
    return d


def test_trace_first(experiment: Path) -> None:
    assert detect_format(experiment) == "scorep"
    pag = perflow.read(experiment)
    assert pag.attrs["format"] == "otf2" and pag.trace is not None
    assert pag.attrs["source"] == str(experiment / "traces.otf2")
    assert pag.attrs["experiment"] == str(experiment)
    assert pag.attrs["experiment_parts"] == ["cube", "otf2"]
    # scorep.cfg: SCOREP_ENABLE_TRACING=true, SCOREP_TIMER='tsc' (quotes removed)
    assert pag.attrs["metadata"]["SCOREP_ENABLE_TRACING"] == "true"
    assert pag.attrs["metadata"]["SCOREP_TIMER"] == "tsc"
    assert pag.metrics["bytes_sent"].sum() == 2 * 4177920


@pytest.mark.parametrize("how", [{"format": "cube"}, {"part": "profile"}])
def test_choose_the_profile(experiment: Path, how: dict[str, str]) -> None:
    pag = perflow.read(experiment, **how)
    assert pag.attrs["format"] == "cube" and pag.n_vertices == 10
    meta = pag.attrs["metadata"]
    assert meta["Creator"] == "Score-P 7.1" and meta["SCOREP_TIMER"] == "tsc"  # the cube's and the run's


def test_profile_only(tmp_path: Path) -> None:
    d = tmp_path / "scorep-profile-only"
    d.mkdir()
    shutil.copy(shared("cube", "scorep-cpi", "profile.cubex"), d)
    (d / "scorep.cfg").write_text("SCOREP_ENABLE_PROFILING=true\nSCOREP_ENABLE_TRACING=false\n")
    pag = perflow.read(d)
    assert pag.attrs["format"] == "cube" and pag.attrs["metadata"]["SCOREP_ENABLE_PROFILING"] == "true"
    with pytest.raises(FormatError, match=r"scorep-profile-only: this Score-P experiment has no trace"):
        perflow.read(d, format="otf2")
    (d / "scorep.cfg").write_bytes(b"\xff\xfe garbage =\x00\n==\n")  # a damaged config is not fatal
    assert perflow.read(d).n_vertices == 10


def test_shared_ping_pong_experiment() -> None:
    d = shared("otf2", "ping-pong")
    assert detect_format(d) == "scorep"
    pag = perflow.read(d)
    assert pag.attrs["format"] == "otf2" and pag.attrs["metadata"]["SCOREP_ENABLE_PROFILING"] == "false"


def test_cli_info(experiment: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", str(experiment)]) == 0
    out = capsys.readouterr().out
    assert "traces.otf2  (otf2)" in out and "16 messages" in out
    assert main(["info", str(experiment), "--format", "cube"]) == 0
    out = capsys.readouterr().out
    assert "profile.cubex  (cube)" in out and "processes   4" in out


def test_folder_with_one_caliper_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "run"
    d.mkdir()
    shutil.copy(shared("caliper", "lulesh-cali", "lulesh-annotation-profile.cali"), d)
    (d / "notes.txt").write_text("run on Tuesday\n")
    (d / ".hidden.cali").write_text("__rec=globals\n")
    pag = perflow.read(d)
    assert pag.attrs["format"] == "caliper" and pag.n_vertices == 19  # README: 19 call-tree nodes
    assert pag.attrs["folder"] == str(d)
    assert main(["info", str(d)]) == 0
    assert "lulesh-annotation-profile.cali  (caliper)" in capsys.readouterr().out


def test_folder_of_several_runs_is_an_ensemble(capsys: pytest.CaptureFixture[str]) -> None:
    d = shared("scaling", "lulesh-caliper")
    ens = perflow.read(d)
    assert isinstance(ens, perflow.Ensemble)
    assert ens.names == ["27_cores", "64_cores", "125_cores", "216_cores", "343_cores"]  # natural order
    assert ens.metadata["nprocs"].tolist() == [27, 64, 125, 216, 343]
    assert [p.n_vertices for p in ens] == [p.n_vertices for p in perflow.read_runs(d)]
    assert main(["info", str(d), "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "ensemble    5 runs" in out and "343_cores" in out
    assert "call paths  45 in the union, 45 in every run" in out
    assert "main/lulesh.cycle/TimeIncrement/MPI_Allreduce" in out  # the largest mean exclusive time
    # a flow that takes one run says what it got and what to do
    assert main(["run", "hotspot", "--input", str(d)]) == 2
    err = capsys.readouterr().err
    assert "expects PAG, got Ensemble" in err and "holds 5 runs" in err and "'ensemble'" in err


def test_read_runs_still_expands_the_folder() -> None:
    from perflow.passes.scalability import read_runs

    runs = read_runs(shared("scaling", "lulesh-caliper"), pattern="2*_cores.cali")
    assert [r.attrs["source"].rsplit("/", 1)[-1] for r in runs] == ["27_cores.cali", "216_cores.cali"]  # natural order


def test_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("nothing here")
    with pytest.raises(FormatError, match="no file or folder in it is a run perflow reads"):
        perflow.read(tmp_path)
