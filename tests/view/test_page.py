"""The run page, its tables and call tree, saved outputs, terminal tables, notebook display, lazy imports."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
import zlib

import numpy as np
import pandas as pd
import pytest

import perflow
from perflow.cli.main import main
from perflow.flow.outputs import text_suffix, write_value
from perflow.passes._panes import panes_data
from perflow.passes.html_report import markdown_html, run_page, table_html


@pytest.fixture(scope="module")
def two_ranks() -> perflow.PAG:
    """main -> solve on two processes: solve takes 3 s on rank 0 and 1 s on rank 1; main 1 s exclusive each."""
    tb = perflow.TraceBuilder()
    tb.enter(0, 0.0, "main")
    tb.call(0, "solve", 1.0, 4.0)
    tb.leave(0, 4.0)
    tb.enter(1, 0.0, "main")
    tb.call(1, "solve", 1.0, 2.0)
    tb.leave(1, 2.0)
    return tb.build()


def decode_panes(data: dict) -> dict[str, np.ndarray]:
    """Every metric node's own part as a dense (call path x location) matrix, as the page's script rebuilds it."""
    buf = zlib.decompress(base64.b64decode(data["blob"]))
    n_v, n_l = len(data["vertices"]["name"]), data["n_locations"]
    out = {}
    for m in data["metrics"]:
        mat = np.zeros((n_v, n_l))
        if m["part"]:
            r, off = m["part"]["rows"], m["part"]["offset"]
            rows = np.frombuffer(buf, "<i4", r, off)
            scale = np.frombuffer(buf, "<f4", r, off + 4 * r)
            q = np.frombuffer(buf, "<i2", r * n_l, off + 8 * r).reshape(r, n_l)
            mat[rows] = q * scale[:, None]
        out[m["id"]] = mat
    return out


def test_panes_data_hand_computed(two_ranks: perflow.PAG) -> None:
    """main (1 s exclusive on each rank) -> solve (3 s on rank 0, 1 s on rank 1): the metric tree's parts."""
    d = panes_data(two_ranks)
    assert d["vertices"]["name"] == ["main", "solve"] and d["vertices"]["parent"] == [-1, 0]
    assert d["locations"]["process"] == [0, 1] and d["n_locations"] == 2
    parts = decode_panes(d)
    ids = [m["id"] for m in d["metrics"]]
    assert ids[:2] == ["time", "time/computation"] and "visits" in ids
    np.testing.assert_allclose(parts["time/computation"], [[1.0, 1.0], [3.0, 1.0]], rtol=1e-4)
    np.testing.assert_allclose(parts["visits"], [[1, 1], [1, 1]], rtol=1e-4)
    assert next(m for m in d["metrics"] if m["id"] == "time")["part"] is None  # its value: its children's


def test_panes_fold_small_call_paths_and_keep_min_max() -> None:
    """Score-P's min_time/max_time aggregate as a minimum and a maximum; folded call paths keep the totals."""
    lit = {
        "name": "main",
        "metrics": {"time_exc": [1.0, 1.0], "min_time": [0.5, 0.2], "max_time": [1.0, 4.0]},
        "children": [
            {
                "name": f"f{i}",
                "metrics": {"time_exc": [0.1 * i, 0.1], "min_time": [0.01 * i, 0.3], "max_time": [i, 1.0]},
            }
            for i in range(1, 6)
        ],
    }
    pag = perflow.PAG.from_literal([lit])
    d = panes_data(pag, max_vertices=3)  # main, f4, f5 (in id order) and a line for the three others
    names = d["vertices"]["name"]
    assert names[:3] == ["main", "f4", "f5"] and names[3] == "(3 more call paths)" and d["folded"] == 3
    assert d["vertices"]["parent"] == [-1, 0, 0, 0]
    parts = decode_panes(d)
    comb = {m["id"]: m["combine"] for m in d["metrics"]}
    assert comb["min_time"] == "min" and comb["max_time"] == "max" and comb["time/computation"] == "sum"
    np.testing.assert_allclose(parts["time/computation"][3], [0.1 + 0.2 + 0.3, 0.3], rtol=1e-4)  # f1..f3 summed
    np.testing.assert_allclose(parts["min_time"][3], [0.01, 0.3], rtol=1e-3)  # their minimum, never summed
    np.testing.assert_allclose(parts["max_time"][3], [3.0, 1.0], rtol=1e-4)  # their maximum


def test_table_html_units_pages_and_raw_values() -> None:
    df = pd.DataFrame({"name": ["a", "b"], "time_exc": [0.0015, 2.0], "bytes": [2048, 10]})
    t = table_html(df)
    assert '<th title="unit: s">time_exc</th>' in t and '<th title="unit: bytes">bytes</th>' in t  # cells say units
    assert '<td class="n" data-v="0.0015">1.50 ms</td>' in t and '<td class="n" data-v="2048.0">2.00 KiB</td>' in t
    assert '<tr data-row="1">' in t
    t = table_html(pd.DataFrame({"x": range(600)}), table_id="tbl-x", csv="x.csv")
    assert t.count("<tr") == 501 and "pf-paged" in t and 'class="pf-pager" data-for="tbl-x"' in t
    assert '100 more rows in <a href="x.csv">x.csv</a>: 600 in all.' in t
    html = markdown_html("# r\n\n| a | time |\n| --- | ---: |\n| x | 1 ms |\n")
    assert '<table class="pf-sortable">' in html and "<h1>r</h1>" in html


def test_run_page_sections(two_ranks: perflow.PAG) -> None:
    fig = perflow.passes.plot.plot_process_bars(two_ranks, metric="time_exc")
    page = run_page(
        {"report": "# Report\n\nall fine", "hot": pd.DataFrame({"time": [1.0]}), "fig": fig, "n": {"a": 1}},
        pag=two_ranks,
        title="T",
    )
    assert page.startswith("<!DOCTYPE html>") and "<title>T</title>" in page
    heads = re.findall(r"<h2>([^<]*)</h2>", page)
    assert heads[0] == "Findings" and heads[1:4] == ["Timeline", "Profile", "report"]
    assert '<details class="pf-out" id="out-1-hot"><summary>hot' in page  # a table under a report: folded
    for h in ("fig", "n"):
        assert f">{h}</h2>" in page, h
    assert page.count('src="data:image/png;base64,') == 1
    assert re.search(r'<(script|link)[^>]+(src|href)="https?://', page) is None  # offline: nothing fetched
    assert "Bokeh" in page and "pfPage" in page and "pfPanes" in page and "pfTimelineInit" in page
    assert page.count("Copyright (c) Anaconda, Inc., and Bokeh Contributors") == 1  # Bokeh's core alone


def test_saved_extensions(tmp_path) -> None:
    assert text_suffix("# Title\n\ntext") == ".md"
    assert text_suffix("<!DOCTYPE html>\n<html></html>") == ".html"
    assert text_suffix("plain words") == ".txt"
    assert write_value("# R\n", tmp_path, "report").name == "report.md"
    assert write_value("<html><body></body></html>", tmp_path, "page").name == "page.html"


def test_flow_result_in_a_notebook_and_saved(tmp_path) -> None:
    pag = perflow.synthetic.trace(nprocs=4, iterations=5, late_sender=0.2, seed=1)
    result = perflow.run("critical_path", pag=pag)
    h = result._repr_html_()
    assert "<h1>perflow critical path</h1>" in h  # the Markdown report, rendered
    assert h.count('src="data:image/png;base64,') == 1  # the timeline figure, inline
    assert '<table class="pf-sortable">' in h and "<details><summary>steps</summary>" in h
    paths = result.save(tmp_path)
    assert paths["report"].name == "report.md" and paths["index"] == tmp_path / "index.html"
    page = paths["index"].read_text()
    assert re.findall(r"<h2>([^<]*)</h2>", page)[:3] == ["Findings", "Timeline", "Profile"]
    assert (tmp_path / "findings.csv").is_file()


def test_figures_display_in_notebooks() -> None:
    fig = perflow.passes.plot.new_figure(2, 1)
    fig.add_subplot().plot([0, 1])
    assert fig._repr_png_()[:4] == b"\x89PNG"


def test_importing_and_validating_is_light() -> None:
    code = (
        "import sys, perflow\n"
        "from perflow.flow.loader import load_flow\n"
        "load_flow('critical_path').validate()\n"
        "print(sorted(m for m in ('matplotlib', 'bokeh', 'plotly', 'markdown_it') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out.strip().replace("'", '"')) == []


def test_cli_run_writes_index(tmp_path) -> None:
    pag = perflow.synthetic.trace(nprocs=2, iterations=3, seed=1)
    pag.save(tmp_path / "t.pag")
    assert main(["-q", "run", "hotspot", "--input", str(tmp_path / "t.pag"), "--output", str(tmp_path / "o")]) == 0
    assert (tmp_path / "o" / "index.html").is_file() and (tmp_path / "o" / "report.md").is_file()
