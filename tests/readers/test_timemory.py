"""timemory reader: Hatchet's wall.tree.json (2 MPI ranks, threads merged by timemory)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import perflow
from perflow.cli.main import main
from perflow.errors import FormatError
from perflow.readers import detect_format
from tests.conftest import import_hatchet
from tests.readers.helpers import check_times, fuzz_file, value

WALL = Path(__file__).resolve().parents[1] / "data" / "timemory" / "wall.tree.json"


@pytest.fixture(scope="module")
def wall() -> perflow.PAG:
    return perflow.read(WALL)


def test_facts(wall: perflow.PAG) -> None:
    assert detect_format(WALL) == "timemory" and wall.attrs["format"] == "timemory"
    assert wall.attrs["nprocs"] == 2 and list(wall.processes) == [0, 1]
    assert wall.attrs["components"] == ["wall_clock"]
    # timemory merged threads 1 and 2 ("tid": [1, 2]) into one node: one location per process
    assert wall.attrs["thread_ids"] == {"0": [[1, 2]], "1": [[1, 2]]}
    assert wall.n_vertices == 14
    assert sorted(wall.vertex_table.loc[wall.roots, "name"]) == ["outer-loop-0", "outer-loop-1"]
    # rank 0: "generate_history@hatchet_tests.cpp:114/outer-loop-0", inclusive repr_data 35.638487535 s,
    # exclusive 1.501585375 s, stats.count 6 (laps 3)
    assert value(wall, "outer-loop-0", "time_inc") == pytest.approx(35.638487535)
    assert value(wall, "outer-loop-0", "time_exc") == pytest.approx(1.501585375)
    assert value(wall, "outer-loop-0", "visits") == 6
    assert value(wall, "outer-loop-0", "time_inc", process=1) == pytest.approx(33.403509, rel=1e-6)
    v = wall.vertex("outer-loop-0/inner-loop-1")
    assert (v.file, v.line, v.kind) == ("hatchet_tests.cpp", 118, "loop")
    assert wall.vertex_table.loc[v.id, "function"] == "generate_history"
    # "generate_history/do-sleep": no file or line
    s = wall.vertex("outer-loop-1/inner-loop-1/do-sleep")
    assert (s.file, s.line) == ("", -1)
    assert value(wall, "outer-loop-1/inner-loop-1/do-sleep", "visits") == 4
    check_times(wall, rtol=1e-6, atol=1e-6)  # timemory's own inclusive/exclusive values


@pytest.mark.hatchet
def test_against_hatchet(wall: perflow.PAG) -> None:
    ht = import_hatchet()
    try:
        gf = ht.GraphFrame.from_timemory(str(WALL))
    except Exception as exc:  # Hatchet's reader needs timemory's own package for some files
        pytest.skip(f"Hatchet cannot read it here: {exc}")
    df = gf.dataframe.reset_index()
    col = next(c for c in df.columns if str(c).startswith("sum") and "(inc)" in str(c))
    assert df[col].sum() == pytest.approx(wall.metrics["time_inc"].sum(), rel=1e-9)


def test_other_components(tmp_path: Path) -> None:
    doc = json.loads(WALL.read_text())
    comp = json.loads(json.dumps(doc["timemory"]["WALL_CLOCK"]))
    comp["properties"]["id"] = "peak_rss"
    comp["unit_repr"] = "MB"
    doc["timemory"]["PEAK_RSS"] = comp
    f = tmp_path / "two.tree.json"
    f.write_text(json.dumps(doc))
    pag = perflow.read(f)
    assert "peak_rss_inc" in pag.metric_names and pag.metric_info["peak_rss_inc"].unit == "MB"
    assert value(pag, "outer-loop-0", "peak_rss_inc") == pytest.approx(35.638487535)
    assert pag.metric_info["peak_rss_exc"].mode == "exclusive"


def test_errors(tmp_path: Path) -> None:
    flat = tmp_path / "wall.json"
    flat.write_text(json.dumps({"timemory": {"wall_clock": {"unit_repr": "sec", "ranks": [{"rank": 0, "graph": []}]}}}))
    with pytest.raises(FormatError, match=r"wall\.json.*flat JSON.*\.tree\.json"):
        perflow.read(flat)
    bad = tmp_path / "bad.tree.json"
    bad.write_text(json.dumps({"timemory": {"wall": {"unit_repr": "sec", "mpi": [[{"node": {"prefix": 3}}]]}}}))
    with pytest.raises(FormatError, match=r"bad\.tree\.json.*no text 'prefix'"):
        perflow.read(bad)


def test_fuzz(tmp_path: Path) -> None:
    out = fuzz_file(lambda p: perflow.read(p, format="timemory"), WALL, tmp_path)
    assert out["error"] >= 10


def test_cli_info(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", str(WALL)]) == 0
    out = capsys.readouterr().out
    assert "(timemory)" in out and "processes   2" in out
    assert "outer-loop-0/inner-loop-1" in out.splitlines()[7]
