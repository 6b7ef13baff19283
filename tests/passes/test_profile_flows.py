"""The shipped profile-analysis flows: valid, and runnable from Python and the command line on sample data."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import perflow
from perflow.cli.main import main

from .profile_data import read_shared, shared

REPO = Path(__file__).resolve().parents[2]
RING8 = REPO / "examples" / "data" / "ring8.pag"  # 8 ranks, rank 3 slow, linear imbalance, late senders
FLOWS = [
    "hotspot",
    "mpi_profiler",
    "imbalance",
    "comm_pattern",
    "scalability",
    "scalana",
    "backtracking",
    "differential",
]


@pytest.fixture(scope="module")
def ring8() -> perflow.PAG:
    return perflow.load(RING8)


@pytest.mark.parametrize("name", FLOWS)
def test_shipped_flow_is_valid_and_documented(name: str) -> None:
    flow = perflow.load_flow(name)
    flow.validate()
    assert flow.description and "perflow run" in flow.description
    assert "report" in flow.outputs


def test_hotspot_on_hpctoolkit_cpi() -> None:
    pag = read_shared("hpctoolkit", "cpi-xml", format="hpctoolkit")
    res = perflow.run("hotspot", pag=pag)
    res.raise_for_status()
    exc = res["exclusive"]
    # README fact: exclusive time summed over all nodes and ranks is 3,998,242 us
    assert exc.attrs["total"] == pytest.approx(3.998242, rel=1e-6)
    assert (exc["share"] >= 0.001).all() and exc["share"].is_monotonic_decreasing
    assert res["inclusive"]["share"].iloc[0] == pytest.approx(1.0)
    assert res["report"].startswith("# perflow: hotspots")


def test_mpi_profiler(ring8: perflow.PAG) -> None:
    res = perflow.run("mpi_profiler", pag=ring8)
    res.raise_for_status()
    assert set(res["callsites"]["kind"]) == {"mpi"}
    assert res["breakdown"]["process"].tolist() == list(range(8))
    assert res["breakdown"].set_index("process")["wait"].idxmin() == 3  # the slow rank waits least
    assert res["communication"]["msgs_sent"].tolist() == [80] * 8
    tau = read_shared("tau", "cpi-mpi", format="tau")
    res = perflow.run("mpi_profiler", pag=tau)
    res.raise_for_status()
    assert "MPI_Bcast()" in res["callsites"]["name"].tolist()


def test_imbalance(ring8: perflow.PAG) -> None:
    res = perflow.run("imbalance", pag=ring8)
    res.raise_for_status()
    assert res["vertices"]["name"].iloc[0] == "compute" and res["vertices"]["max_process"].iloc[0] == 3
    out = res["outliers"]
    assert ((out["name"] == "compute") & (out["process"] == 3)).any()
    assert res["groups"]["size"].sum() == 8


def test_comm_pattern(ring8: perflow.PAG) -> None:
    res = perflow.run("comm_pattern", pag=ring8)
    res.raise_for_status()
    assert res["pattern"].attrs["pattern"] == "nearest-neighbour"
    assert res["bytes"].to_numpy()[0, 1] == 40 * 4096 and res["messages"].to_numpy()[0, 7] == 40


def test_comm_pattern_on_otf2_ping_pong() -> None:
    pag = read_shared("otf2", "ping-pong", "traces.otf2")
    res = perflow.run("comm_pattern", pag=pag)
    res.raise_for_status()
    assert res["bytes"].to_numpy().tolist() == [[0, 4177920], [4177920, 0]]


def test_backtracking(ring8: perflow.PAG) -> None:
    res = perflow.run("backtracking", pag=ring8)
    res.raise_for_status()
    rc = res["root_causes"]
    assert set(zip(rc["name"], rc["process"])) == {("compute", 3)}


def test_differential_and_scalability_on_lulesh() -> None:
    d = shared("scaling", "lulesh-caliper")
    res = perflow.run("scalability", runs=[str(d)])
    res.raise_for_status()
    ns = res["non_scalable"]
    assert ns.attrs["scales"] == [27, 64, 125, 216, 343] and (ns["slope"] > 0).all()
    assert isinstance(res["measurements"], pd.DataFrame) and res["figure"] is not None
    res = perflow.run("differential", a=d / "27_cores.cali", b=d / "343_cores.cali")
    res.raise_for_status()
    assert (res["changes"]["status"] == "both").all() and len(res["changes"]) == 30


def cli(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_command_line_in_process(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = cli(capsys, "-q", "run", "imbalance", "--input", RING8, "--output", tmp_path / "imb")
    assert code == 0, err
    assert {"vertices.csv", "outliers.csv", "groups.csv", "figure.png", "report.md", "index.html"} <= {
        p.name for p in (tmp_path / "imb").iterdir()
    }
    assert "# perflow: load imbalance" in out
    code, out, err = cli(capsys, "-q", "run", "backtracking", "--input", RING8, "--set", "walk.k=5")
    assert code == 0, err
    assert "Root causes" in out
    code, out, err = cli(capsys, "-q", "run", "differential", "--input", f"a={RING8}", "--input", f"b={RING8}")
    assert code == 0, err
    code, out, err = cli(capsys, "run", "hotspot", "--input", RING8, "--set", "exclusive.k=ten")
    assert code == 2 and "expects int" in err


def test_command_line_subprocess(tmp_path: Path) -> None:
    # as a user runs it (kernels in the default mode: this small input runs interpreted), so that a cold kernel
    # cache costs no compile; test_comm_pattern checks the same flow with compiled kernels
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        "PERFLOW_JIT": "auto",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "perflow", "-q", "run", "comm_pattern", "--input", str(RING8), "--output", str(tmp_path)],
        capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "nearest-neighbour" in proc.stdout
    assert (tmp_path / "figure.png").stat().st_size > 0
    assert pd.read_csv(tmp_path / "bytes.csv", index_col=0).to_numpy().sum() == 8 * 2 * 40 * 4096
