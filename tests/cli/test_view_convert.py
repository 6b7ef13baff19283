"""``perflow view`` and ``perflow convert`` on the command line."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import perflow
from perflow.cli.main import main


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory: pytest.TempPathFactory):
    d = tmp_path_factory.mktemp("conv")
    pag = perflow.synthetic.trace(nprocs=2, iterations=2, seed=1)
    pag.save(d / "t.pag")
    return d / "t.pag", pag


def test_convert_chrome_csv_pag(trace_file, tmp_path, capsys) -> None:
    src, pag = trace_file
    assert main(["convert", str(src), str(tmp_path / "t.json"), "--to", "chrome"]) == 0
    events = json.loads((tmp_path / "t.json").read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    assert sum(1 for e in events if e.get("ph") == "X") == pag.trace.n_intervals
    assert main(["convert", str(src), str(tmp_path / "t.csv"), "--to", "csv"]) == 0
    df = pd.read_csv(tmp_path / "t.csv")
    assert set(df["process"]) == {0, 1} and "time_exc" in df.columns
    assert main(["convert", str(tmp_path / "t.json"), str(tmp_path / "back.pag"), "--to", "pag"]) == 0
    back = perflow.read(tmp_path / "back.pag")
    assert back.trace.n_intervals == pag.trace.n_intervals
    assert "wrote" in capsys.readouterr().out


def test_convert_errors_name_the_file(trace_file, tmp_path, capsys) -> None:
    src, _ = trace_file
    (tmp_path / "exists.json").write_text("{}")
    assert main(["convert", str(src), str(tmp_path / "exists.json"), "--to", "chrome"]) == 2
    assert f"{tmp_path / 'exists.json'}: already exists" in capsys.readouterr().err
    assert main(["convert", str(src), str(tmp_path / "x.otf2"), "--to", "otf2"]) == 2
    assert f"{src}: cannot write OTF2 from this input" in capsys.readouterr().err
    assert main(["convert", str(tmp_path / "missing"), str(tmp_path / "y"), "--to", "csv"]) == 2
    assert "missing: no such file or directory" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["convert", str(src), str(tmp_path / "z"), "--to", "vtk"])


def test_convert_otf2_rewrite(shared_data, tmp_path) -> None:
    src = shared_data / "otf2" / "ping-pong" / "traces.otf2"
    assert main(["convert", str(src), str(tmp_path / "out"), "--to", "otf2"]) == 0
    a, b = perflow.read(src), perflow.read(tmp_path / "out" / "traces.otf2")
    assert a.trace.n_intervals == b.trace.n_intervals and len(a.trace.messages) == len(b.trace.messages)


def test_view_writes_the_page(trace_file, tmp_path, capsys) -> None:
    src, _ = trace_file
    assert main(["view", str(src), "--no-open", "-o", str(tmp_path / "v")]) == 0
    page = (tmp_path / "v" / "index.html").read_text()
    assert page.index(">Findings</h2>") < page.index(">Timeline</h2>") < page.index(">Profile</h2>")
    assert f"page {(tmp_path / 'v' / 'index.html').resolve()}" in capsys.readouterr().out
    # a run's output folder: its index.html is the page
    assert main(["view", str(tmp_path / "v"), "--no-open"]) == 0
    assert f"page {(tmp_path / 'v' / 'index.html').resolve()}" in capsys.readouterr().out
    assert main(["view", str(tmp_path / "nothing"), "--no-open"]) == 2
