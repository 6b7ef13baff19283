"""pyinstrument reader: the committed profiles of tests/data/pyinstrument/work.py, Hatchet's sample, and live profiles."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import perflow
from perflow.cli.main import main
from perflow.errors import FormatError
from perflow.readers import detect_format
from tests.readers.helpers import check_times, fuzz_file, value

DATA = Path(__file__).resolve().parents[1] / "data" / "pyinstrument"


@pytest.fixture(scope="module")
def rendered() -> perflow.PAG:
    return perflow.read(DATA / "work.pyinstrument.json")


def test_json_facts(rendered: perflow.PAG) -> None:
    assert detect_format(DATA / "work.pyinstrument.json") == "pyinstrument"
    assert rendered.attrs["format"] == "pyinstrument"
    assert rendered.attrs["metadata"]["sample_count"] == 254
    assert rendered.attrs["metadata"]["duration"] == pytest.approx(0.402419)
    # work.pyinstrument.json: main 0.40104 s, solve 0.300799, step/sleep 0.150799, step/busy 0.15 of which [self] 0.087
    assert value(rendered, "<module>/main", "time_inc") == pytest.approx(0.40104)
    assert value(rendered, "<module>/main/solve", "time_inc") == pytest.approx(0.300799)
    assert value(rendered, "<module>/main/solve/step/sleep", "time_exc") == pytest.approx(0.150799)
    assert value(rendered, "<module>/main/solve/step/busy", "time_inc") == pytest.approx(0.15)
    assert value(rendered, "<module>/main/solve/step/busy", "time_exc") == pytest.approx(0.087)
    step = rendered.vertex("<module>/main/solve/step")
    assert (step.file, step.line) == ("work.py", 23)
    assert not any("[self]" in p for p in rendered.call_paths())  # [self] is the parent's own time, not a vertex
    assert "visits" not in rendered.metric_names  # a sampling profiler counts no calls
    check_times(rendered)


def test_session_facts() -> None:
    f = DATA / "work.pyisession"
    raw = json.loads(f.read_text())
    pag = perflow.read(f)
    assert detect_format(f) == "pyinstrument" and pag.attrs["pyinstrument_form"] == "session"
    # every sample's time lands on the frame it ended in; pyinstrument's own start frames are not vertices
    assert pag.metrics["time_exc"].sum() == pytest.approx(sum(t for _, t in raw["frame_records"]))
    assert pag.metrics["samples"].sum() == len(raw["frame_records"]) == 237
    assert not any("pyinstrument" in str(f) for f in pag.vertex_table["file"])
    solve = [p for p in pag.call_paths() if p.endswith("main/solve/step/sleep")]
    assert len(solve) == 1
    # the session and the rendered profile of the same program agree on where the time went (within sampling noise)
    assert pag.vertex(solve[0]).file == "<built-in>"
    assert float(pag.metrics.loc[(pag.vertex(solve[0]).id, 0, 0), "time_exc"]) == pytest.approx(0.15, abs=0.01)
    check_times(pag)


def test_hatchet_sample() -> None:
    pag = perflow.read(DATA / "pyinstrument-hatchet-profile.json")
    # {"duration": 0.478172, "program": "examples.py", root_frame <module> examples.py:1 time 0.47815}
    assert pag.attrs["metadata"]["program"] == "examples.py"
    assert list(pag.roots) == [0]
    assert float(pag.metrics.loc[(0, 0, 0), "time_inc"]) == pytest.approx(0.47815)
    root = pag.vertex(0)
    assert (root.file, root.line) == ("examples.py", 1)
    check_times(pag)


def _work() -> None:
    end = time.perf_counter() + 0.15
    while time.perf_counter() < end:
        pass


def test_live_profile(tmp_path: Path) -> None:
    pyinstrument = pytest.importorskip("pyinstrument")
    from pyinstrument.renderers import JSONRenderer

    prof = pyinstrument.Profiler(interval=0.001)
    prof.start()
    _work()
    prof.stop()
    out = tmp_path / "live.json"
    out.write_text(prof.output(JSONRenderer()))
    pag = perflow.read(out)
    hit = [p for p in pag.call_paths() if p.endswith("_work")]
    assert hit, pag.call_paths().tolist()
    v = pag.vertex(hit[0])
    assert v.file.endswith("test_pyinstrument.py") and v.line == _work.__code__.co_firstlineno
    assert 0.1 < value(pag, hit[0], "time_inc") < 2.0
    sess = tmp_path / "live.pyisession"
    prof.last_session.save(sess)
    assert perflow.read(sess).metrics["time_exc"].sum() == pytest.approx(prof.last_session.duration, rel=0.2)


def test_errors(tmp_path: Path) -> None:
    f = tmp_path / "empty.json"
    f.write_text('{"start_time": 1, "duration": 0, "sample_count": 0, "root_frame": null}')
    with pytest.raises(FormatError, match=r"empty\.json.*without 'root_frame'"):
        perflow.read(f)
    g = tmp_path / "bad.json"
    g.write_text('{"root_frame": {"function": "f", "time": "slow"}}')
    with pytest.raises(FormatError, match=r"bad\.json.*'time' \(a number\)"):
        perflow.read(g, format="pyinstrument")


@pytest.mark.parametrize("name", ["work.pyinstrument.json", "work.pyisession"])
def test_fuzz(tmp_path: Path, name: str) -> None:
    out = fuzz_file(lambda p: perflow.read(p, format="pyinstrument"), DATA / name, tmp_path)
    assert out["error"] >= 10


def test_cli_info(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", str(DATA / "work.pyinstrument.json")]) == 0
    out = capsys.readouterr().out
    assert "(pyinstrument)" in out and "metrics     time_inc, time_exc" in out
    assert "<module>/main/solve/step/sleep" in out and "151 ms" in out
