"""The run page, its tables and call tree, saved outputs, terminal tables, notebook display, lazy imports."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pandas as pd
import pytest

import perflow
from perflow.cli.main import main
from perflow.flow.outputs import as_text, fit_width, text_suffix, write_value
from perflow.passes.html_report import markdown_html, run_page, table_html
from perflow.passes.html_tree import calltree_html


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


def _cells(fragment: str, name: str) -> dict[str, str]:
    """The shown value of every (metric, aggregation) cell of a tree line."""
    line = re.search(rf'<span class="nm"[^>]*>{name}</span>(.*?)(?:</summary>|</div>)', fragment).group(1)
    return {f"{m}:{a}": v for a, v, m in _tags(line)}


def _tags(line: str) -> list[tuple[str, str, str]]:
    vals = re.findall(r'<span class="c" data-a="(\w+)"[^>]*>([^<]*)</span>', line)
    metrics = ["time_inc", "time_exc", "visits"]
    n = len(vals) // 4
    return [(a, v, metrics[i // 4] if i // 4 < len(metrics) else "?") for i, (a, v) in enumerate(vals[: 4 * n])]


def test_calltree_aggregations_hand_computed(two_ranks: perflow.PAG) -> None:
    frag = calltree_html(two_ranks, metrics=["time_inc", "time_exc", "visits"])
    solve = _cells(frag, "solve")
    assert solve["time_inc:sum"] == "4.00 s" and solve["time_inc:mean"] == "2.00 s"
    assert solve["time_inc:max"] == "3.00 s" and solve["time_inc:min"] == "1.00 s"
    main_ = _cells(frag, "main")
    assert main_["time_inc:sum"] == "6.00 s" and main_["time_exc:sum"] == "2.00 s" and main_["time_exc:max"] == "1.00 s"
    assert '<details data-v="0" open><summary>' in frag  # main has a child: a collapsible node
    assert 'title="time_inc (max over 2 processes)"' in frag
    assert '<option value="sum" selected>sum</option>' in frag


def test_table_html_units_and_raw_values() -> None:
    df = pd.DataFrame({"name": ["a", "b"], "time_exc": [0.0015, 2.0], "bytes": [2048, 10]})
    t = table_html(df)
    assert '<th title="s">time_exc (s)</th>' in t and '<th title="bytes">bytes (bytes)</th>' in t
    assert '<td class="n" data-v="0.0015">1.50 ms</td>' in t and '<td class="n" data-v="2048.0">2.00 KiB</td>' in t
    t = table_html(pd.DataFrame({"x": range(10)}), max_rows=3)
    assert t.count("<tr>") == 4 and "7 more rows" in t
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
    for h in ("Interactive timeline", "Call tree (input)", "report", "hot", "fig", "n"):
        assert f">{h}</h2>" in page, h
    assert page.count('src="data:image/png;base64,') == 1
    assert re.search(r'<(script|link)[^>]+(src|href)="https?://', page) is None  # offline: nothing fetched
    assert "Bokeh" in page and "pfSort" in page and "pfAgg" in page


def test_saved_extensions(tmp_path) -> None:
    assert text_suffix("# Title\n\ntext") == ".md"
    assert text_suffix("<!DOCTYPE html>\n<html></html>") == ".html"
    assert text_suffix("plain words") == ".txt"
    assert write_value("# R\n", tmp_path, "report").name == "report.md"
    assert write_value("<html><body></body></html>", tmp_path, "page").name == "page.html"


def test_terminal_tables_fit_the_width() -> None:
    df = pd.DataFrame({"name": ["main"], "aaaaaaaaaaaa": [1], "bbbbbbbbbbbb": [2], "cccccccccccc": [3]})
    text = as_text(df, width=34)
    assert all(len(ln) <= 34 for ln in text.split("\n")[:-1])
    assert text.endswith("(columns not shown to fit 34 characters: bbbbbbbbbbbb, cccccccccccc)")
    md = "| name | long_column_one | long_column_two |\n| :--- | ---: | ---: |\n| main | 1 | 2 |"
    cut = fit_width(md, 34)
    assert cut.split("\n")[-1] == "(columns not shown to fit 34 characters: long_column_two)"
    assert all(len(ln) <= 34 for ln in cut.split("\n")[:-1])
    assert fit_width(md, 200) == md


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
    assert ">Interactive timeline</h2>" in page and ">Call tree (input)</h2>" in page


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
