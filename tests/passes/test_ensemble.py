"""Ensembles on real shared data: reading a directory/glob/list, metadata, statistics, passes, flows, CLI."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

import perflow
from perflow.cli.main import main
from perflow.errors import FormatError, PassError
from perflow.pag.pag import PAG
from perflow.pag.runinfo import run_info
from perflow.passes.ensemble import ensemble_differential, ensemble_metadata, ensemble_stats, per_run, read_ensemble
from perflow.passes.hotspot import hotspot
from perflow.passes.scalability import scalability
from tests.conftest import shared

SCALES = [27, 64, 125, 216, 343]


@pytest.fixture(scope="module")
def lulesh() -> perflow.Ensemble:
    return perflow.Ensemble.from_paths(shared("scaling", "lulesh-caliper"))


def test_lulesh_directory_in_natural_order_with_adiak_metadata(lulesh: perflow.Ensemble) -> None:
    assert lulesh.names == [f"{n}_cores" for n in SCALES]
    meta = lulesh.metadata
    assert meta["nprocs"].tolist() == SCALES  # from mpi.world.size
    assert (meta["tool"] == "Caliper 2.5.0").all() and (meta["format"] == "caliper").all()
    assert meta["nthreads"].tolist() == [1] * 5  # Adiak threads
    assert (meta["problem_size"] == 30).all() and (meta["compiler"] == "intel").all() and (meta["user"] == "Ted").all()
    assert meta["jobsize"].tolist() == SCALES and meta["executable"].str.endswith("/lulesh2.0").all()
    assert meta.loc["27_cores", "date"] == pd.Timestamp(1616614379, unit="s", tz="UTC")
    assert meta.loc["27_cores", "elapsed_time"] == pytest.approx(47.231215)


def test_lulesh_trees_align(lulesh: perflow.Ensemble) -> None:
    tree = lulesh.tree
    assert len(tree) == 45 and (tree["n_runs"] == 5).all()  # README: 45 call-tree nodes per run
    assert lulesh.presence.to_numpy().all()


def test_lulesh_stats_match_the_runs_read_one_by_one(lulesh: perflow.Ensemble) -> None:
    d = shared("scaling", "lulesh-caliper")
    path = "main/lulesh.cycle/TimeIncrement/MPI_Allreduce"
    per_run_values = []
    for n in SCALES:
        pag = perflow.read(d / f"{n}_cores.cali")
        per_run_values.append(pag.aggregate("time_exc", "max")[pag.vertex(path).id])
    s = lulesh.stats("time_exc", "max").set_index("call_path").loc[path]
    assert s["n_runs"] == 5
    assert s["mean"] == pytest.approx(np.mean(per_run_values))
    assert s["std"] == pytest.approx(np.std(per_run_values, ddof=1))
    assert (s["min"], s["max"]) == (pytest.approx(min(per_run_values)), pytest.approx(max(per_run_values)))
    assert s["p50"] == pytest.approx(np.median(per_run_values))
    groups = lulesh.groupby("nprocs")
    assert list(groups) == SCALES and all(len(g) == 1 for g in groups.values())
    assert lulesh.filter(lambda m: m.nprocs >= 125).names == ["125_cores", "216_cores", "343_cores"]


def test_glob_list_and_directory_agree(lulesh: perflow.Ensemble) -> None:
    d = shared("scaling", "lulesh-caliper")
    by_glob = perflow.Ensemble.from_paths(str(d / "*_cores.cali"))
    assert by_glob.names == lulesh.names
    by_list = perflow.Ensemble.from_paths([d / "343_cores.cali", str(d / "2*_cores.cali")])
    assert by_list.names == ["343_cores", "27_cores", "216_cores"]  # in the order given; a glob in natural order
    with pytest.raises(FormatError, match="no runs match this pattern"):
        perflow.Ensemble.from_paths(str(d / "*.otf2"))
    with pytest.raises(FormatError, match="no such file or directory"):
        perflow.Ensemble.from_paths(d / "missing.cali")


def test_metadata_of_every_format() -> None:
    ens = perflow.Ensemble.from_paths(
        [
            shared("otf2", "ping-pong", "traces.otf2"),
            shared("tau", "cpi-mpi"),
            shared("cube", "scorep-cpi", "profile.cubex"),
            shared("hpctoolkit", "cpi-xml"),
            shared("caliper", "cpi-json", "cpi-callpath-profile.json"),
        ]
    )
    m = ens.metadata
    assert ens.names == ["ping-pong", "cpi-mpi", "scorep-cpi", "cpi-xml", "cpi-callpath-profile"]
    assert m["format"].tolist() == ["otf2", "tau", "cube", "hpctoolkit", "caliper"]
    assert m["nprocs"].tolist() == [2, 4, 4, 4, 4]
    assert m.loc["ping-pong", "tool"] == "Score-P 7.1" and m.loc["scorep-cpi", "tool"] == "Score-P 7.1"
    # Score-P's configuration beside the OTF2 archive (scorep.cfg)
    assert m.loc["ping-pong", "SCOREP_ENABLE_TRACING"] == "true" and m.loc["ping-pong", "SCOREP_TIMER"] == "tsc"
    assert pd.isna(m.loc["cpi-mpi", "SCOREP_TIMER"])
    # TAU's metadata: command line, executable, host, start time (microseconds)
    assert m.loc["cpi-mpi", "command"] == "./cpi-mpi" and m.loc["cpi-mpi", "host"] == "nid01045"
    assert m.loc["cpi-mpi", "executable"].endswith("/cpi-mpi")
    assert m.loc["cpi-mpi", "date"] == pd.Timestamp("2021-03-01T15:16:01.048525Z")
    assert m.loc["scorep-cpi", "CUBE_CT_AGGR"] == "SUM"
    assert pd.isna(m.loc["cpi-xml", "date"]) and m.loc["cpi-xml", "command"] is None  # not recorded: missing
    assert len(ens.tree) > max(len(p.call_paths()) for p in ens)  # different programs: a union of trees


def test_recorder_run_information() -> None:
    pag = PAG.from_literal({"name": "main", "metrics": {"time_exc": [1.0, 1.0]}})
    pag.attrs.update(
        {
            "creator": "perflow record",
            "command_line": "python ring.py --n 4",
            "date": "2025-01-02T03:04:05+00:00",
            "host": "node7",
            "program": "/usr/bin/python3",
            "mpi": "openmpi",
            "ranks_requested": 2,
            "format": "recording",
        }
    )
    info = run_info(pag)
    assert info["tool"] == "perflow record" and info["command"] == "python ring.py --n 4"
    assert info["date"] == pd.Timestamp("2025-01-02T03:04:05Z") and info["host"] == "node7"
    assert info["executable"] == "/usr/bin/python3" and info["nprocs"] == 2 and info["mpi"] == "openmpi"


def test_passes_on_the_lulesh_ensemble(lulesh: perflow.Ensemble) -> None:
    meta = ensemble_metadata(lulesh, columns=["nprocs", "tool"])
    assert meta.columns.tolist() == ["run", "nprocs", "tool"] and meta["nprocs"].tolist() == SCALES
    st = ensemble_stats(lulesh, k=3)
    assert len(st) == 3 and st["mean"].is_monotonic_decreasing
    assert st.columns[:3].tolist() == ["name", "n_runs", "mean"]
    grouped = ensemble_stats(lulesh.with_metadata(big=lambda p: p.attrs["nprocs"] > 100), by="big", k=2)
    assert grouped["big"].tolist() == [False, False, True, True]
    hs = per_run(lulesh, analysis="hotspot", settings={"k": 2}, metadata=["nprocs"])
    assert hs.columns[:2].tolist() == ["run", "nprocs"] and len(hs) == 10
    assert hs.groupby("run", sort=False)["nprocs"].first().tolist() == SCALES
    first = hs[hs["run"] == "27_cores"]["name"].tolist()
    assert first == hotspot(lulesh["27_cores"], k=2)["name"].tolist()
    with pytest.raises(PassError, match="pass 'hotspot' has no setting 'kk'"):
        per_run(lulesh, analysis="hotspot", settings={"kk": 2})
    ch = ensemble_differential(lulesh, baseline="27_cores", k=1)
    assert ch["run"].tolist() == ["64_cores", "125_cores", "216_cores", "343_cores"]
    # scalability takes an ensemble as it takes a list of runs
    a, b = scalability(lulesh, all_vertices=True), scalability(list(lulesh), all_vertices=True)
    pd.testing.assert_frame_equal(a, b)


def test_read_ensemble_pass_errors(tmp_path) -> None:  # noqa: ANN001
    with pytest.raises(PassError, match="no runs matching"):
        read_ensemble(tmp_path)
    with pytest.raises(PassError, match="no such file or directory"):
        read_ensemble([tmp_path / "nope.cali"])


def test_flows_take_a_directory_or_a_glob() -> None:
    d = shared("scaling", "lulesh-caliper")
    res = perflow.run("scalability", runs=str(d))  # was: "expects list, got str"
    res.raise_for_status()
    assert res["fits"].attrs["scales"] == [float(s) for s in SCALES]
    res = perflow.run("scalability", runs=str(d / "*_cores.cali"))
    res.raise_for_status()
    assert res["fits"].attrs["scales"] == [float(s) for s in SCALES]
    res = perflow.run("ensemble", runs=str(d))
    res.raise_for_status()
    assert res["metadata"]["nprocs"].tolist() == SCALES
    assert res["stats"]["n_runs"].eq(5).all()
    assert set(res["changes"]["run"]) == {"64_cores", "125_cores", "216_cores", "343_cores"}
    assert res["report"].startswith("# perflow: ensemble")


def test_differential_flow_writes_the_difference_pag(tmp_path) -> None:  # noqa: ANN001
    d = shared("scaling", "lulesh-caliper")
    res = perflow.run("differential", a=d / "27_cores.cali", b=d / "343_cores.cali")
    res.raise_for_status()
    pag, table = res["difference"], res["changes"]
    assert isinstance(pag, PAG) and pag.metric_info["time_exc"].unit == "s"
    got = pd.Series(pag.aggregate("time_exc").to_numpy(), index=pag.call_paths().to_numpy())
    assert np.allclose(got.reindex(table["call_path"]).to_numpy(), table["diff"].to_numpy())


def test_cli_runs_given_as_directory_glob_or_repeated(capsys, tmp_path) -> None:  # noqa: ANN001
    d = shared("scaling", "lulesh-caliper")
    for args in (
        ["--input", f"runs={d}"],
        ["--input", f"runs={d}/*_cores.cali"],
        ["--input", f"runs={d / '27_cores.cali'}", "--input", f"runs={d / '343_cores.cali'}"],
    ):
        code = main(["-q", "run", "scalability", *args, "-o", str(tmp_path / "out")])
        out, err = capsys.readouterr()
        assert code == 0, err
        assert "Non-scalable call paths" in out
    code = main(["-q", "run", "ensemble", "--input", f"runs={d}/*.cali"])
    out, err = capsys.readouterr()
    assert code == 0 and re.search(r"\| 343_cores +\| caliper +\| Caliper 2\.5\.0 +\| +343 +\|", out), out
    code = main(["-q", "run", "scalability", "--input", f"runs={d}/nothing*.cali"])
    out, err = capsys.readouterr()
    assert code == 2 and "nothing*.cali: no runs match this pattern" in err
