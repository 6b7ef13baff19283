"""Tests of the table and report passes (perflow/passes/report.py, perflow/passes/_render.py)."""

from __future__ import annotations

import io
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest

import perflow
from perflow.errors import PassError
from perflow.flow.registry import get_pass
from perflow.passes.plot import plot_breakdown
from perflow.passes.report import render_table, report, styled_table
from perflow.sdk.render import format_value, guess_unit


class Cells(HTMLParser):
    """Collects the text of <th>/<td> cells, headings and image sources."""

    def __init__(self) -> None:
        super().__init__()
        self.th: list[str] = []
        self.td: list[str] = []
        self.tags: list[str] = []
        self.h2: list[str] = []
        self.imgs: list[str] = []
        self._cur: str | None = None
        self._buf = ""

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append(tag)
        if tag in ("th", "td", "h2"):
            self._cur, self._buf = tag, ""
        if tag == "img":
            self.imgs.append(dict(attrs)["src"])

    def handle_endtag(self, tag: str) -> None:
        if tag == self._cur:
            {"th": self.th, "td": self.td, "h2": self.h2}[tag].append(self._buf)
            self._cur = None

    def handle_data(self, data: str) -> None:
        if self._cur:
            self._buf += data


def parse(text: str) -> Cells:
    p = Cells()
    p.feed(text)
    p.close()
    return p


@pytest.fixture
def hot() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "name": ["main", "solve", "MPI_Allreduce"],
            "time_exc": [1.5, 0.0123, 4.5e-6],
            "bytes_sent": [0, 4096, 3 * 1024**2],
            "imbalance_pct": [1.0, 25.0, 300.0],
            "visits": [1, 1200, 3],
        }
    )


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (1.5, "s", "1.50 s"),
        (0.0123, "s", "12.3 ms"),
        (4.5e-6, "s", "4.50 us"),
        (2.5e-9, "s", "2.50 ns"),
        (0.0, "s", "0 s"),
        (123.4, "s", "123 s"),
        (1234.5, "s", "1234 s"),
        (0.99999, "s", "1.00 s"),
        (0.0009999, "s", "1.00 ms"),
        (1048575.9, "bytes", "1.00 MiB"),
        (-0.002, "s", "-2.00 ms"),
        (512, "bytes", "512 B"),
        (4096, "bytes", "4.00 KiB"),
        (96 * 1024**2, "bytes", "96.0 MiB"),
        (3 * 1024**3, "bytes", "3.00 GiB"),
        (12.5, "%", "12.5%"),
        (0.125, "ratio", "12.5%"),
        (1234567, "count", "1,234,567"),
        (7.0, "", "7"),
        (0.123456, "", "0.1235"),
        (float("nan"), "s", ""),
        ("MPI_Send", "s", "MPI_Send"),
    ],
)
def test_format_value(value: object, unit: str, text: str) -> None:
    assert format_value(value, unit) == text


@pytest.mark.parametrize(
    ("column", "unit"),
    [
        ("time_exc", "s"),
        ("time_inc:max", "s"),
        ("wait", "s"),
        ("recv_time", "s"),
        ("bytes_sent", "bytes"),
        ("imbalance_pct", "%"),
        ("fraction", "ratio"),
        ("visits", "count"),
        ("timestep", ""),
        ("name", ""),
    ],
)
def test_guess_unit(column: str, unit: str) -> None:
    assert guess_unit(column) == unit


def test_text_table_exact(hot: pd.DataFrame) -> None:
    out = render_table(hot, title="Hot spots")
    assert out.splitlines() == [
        "Hot spots",
        "name           time_exc  bytes_sent  imbalance_pct  visits",
        "-------------  --------  ----------  -------------  ------",
        "main             1.50 s         0 B           1.0%       1",
        "solve           12.3 ms    4.00 KiB          25.0%   1,200",
        "MPI_Allreduce   4.50 us    3.00 MiB         300.0%       3",
    ]


def test_text_table_columns_sort_and_max_rows(hot: pd.DataFrame) -> None:
    out = render_table(hot, columns=["name", "visits"], sort_by="visits", max_rows=2, units={"visits": ""})
    lines = out.splitlines()
    assert lines[2].split() == ["solve", "1200"]
    assert lines[3].split() == ["MPI_Allreduce", "3"]
    assert lines[-1] == "... 1 more row"


def test_markdown_table(hot: pd.DataFrame) -> None:
    out = render_table(hot.assign(name=["a|b", "solve", "x"]), format="markdown")
    lines = out.splitlines()
    assert lines[0] == "| name | time_exc | bytes_sent | imbalance_pct | visits |"
    assert lines[1] == "| :--- | ---: | ---: | ---: | ---: |"
    assert lines[2] == "| a\\|b | 1.50 s | 0 B | 1.0% | 1 |"
    assert len(lines) == 5


def test_html_table_parses(hot: pd.DataFrame) -> None:
    out = render_table(hot, format="html", title="<hot>")
    p = parse(out)
    assert p.th == ["name", "time_exc", "bytes_sent", "imbalance_pct", "visits"]
    assert p.td[:5] == ["main", "1.50 s", "0 B", "1.0%", "1"]
    assert len(p.td) == 15
    assert "<caption>&lt;hot&gt;</caption>" in out


def test_csv_keeps_raw_values_and_writes_file(hot: pd.DataFrame, tmp_path) -> None:
    target = tmp_path / "sub" / "hot.csv"
    out = render_table(hot, format="csv", path=str(target))
    assert target.read_text() == out
    back = pd.read_csv(io.StringIO(out))
    # the header names each column's unit
    assert list(back.columns) == ["name", "time_exc [s]", "bytes_sent [B]", "imbalance_pct [%]", "visits [count]"]
    assert back["time_exc [s]"].tolist() == [1.5, 0.0123, 4.5e-6]
    assert back["bytes_sent [B]"].tolist() == [0, 4096, 3 * 1024**2]


def test_vertex_set_keeps_vertex_ids() -> None:
    pag = perflow.PAG.from_literal(
        {
            "name": "main",
            "metrics": {"time_exc": [1.0, 3.0]},
            "children": [{"name": "work", "metrics": {"time_exc": [2.0, 2.0]}}],
        }
    )
    out = render_table(pag.vertices.sort_by("time_exc"), columns=["vertex", "name", "time_exc", "time_inc"])
    lines = out.splitlines()
    assert lines[0] == "time_exc, time_inc: sum over 2 processes"  # how the values aggregate, said once
    assert lines[1].split() == ["vertex", "name", "time_exc", "time_inc"]
    assert lines[3].split() == ["0", "main", "4.00", "s", "8.00", "s"]
    assert lines[4].split() == ["1", "work", "4.00", "s", "4.00", "s"]
    csv = render_table(pag.vertices.sort_by("time_exc", agg="max"), columns=["name", "time_exc"], format="csv")
    assert csv.splitlines() == ["name,time_exc (max over 2 processes) [s]", "main,3.0", "work,2.0"]
    edges = render_table(pag.vertices.in_edges(), format="csv")
    assert edges.splitlines() == ["src,dst,src_name,dst_name", "0,1,main,work"]


def test_errors_name_the_problem(hot: pd.DataFrame) -> None:
    with pytest.raises(PassError, match=r"no column 'time_inc' \(setting columns='time_inc'\).*name, time_exc"):
        render_table(hot, columns=["name", "time_inc"])
    with pytest.raises(PassError, match="no column 'wait'.*sort_by"):
        render_table(hot, sort_by="wait")
    with pytest.raises(PassError, match="unknown format 'latex'"):
        render_table(hot, format="latex")
    with pytest.raises(PassError, match="cannot make a table from a int"):
        render_table(3)


def test_styled_table(hot: pd.DataFrame) -> None:
    st = styled_table(hot, caption="hot")
    html = st.to_html()
    assert "12.3 ms" in html and "4.00 KiB" in html
    assert "background-color" in html  # the time column is shaded
    with pytest.raises(PassError, match="no column 'nope'"):
        styled_table(hot, gradient=["nope"])


def test_report_text_markdown_html(hot: pd.DataFrame, tmp_path) -> None:
    tree = "1.00 s main\n└─ 600 ms solve\n"
    sections = {"Hot spots": hot, "Note": "rank 3 is slow", "Tree": tree}
    txt = report(sections, title="Run 1", format="text")
    lines = txt.splitlines()
    assert lines[:2] == ["Run 1", "====="]
    assert "Hot spots" in lines and "---------" in lines
    assert "rank 3 is slow" in lines and "└─ 600 ms solve" in lines
    md = report(sections, format="markdown")
    assert md.startswith("# perflow report\n")
    assert "## Hot spots" in md and "| main | 1.50 s |" in md
    assert "```\n1.00 s main\n└─ 600 ms solve\n```" in md
    out = tmp_path / "r.html"
    html = report([("Hot spots", hot), {"title": "Raw", "html": "<b>bold</b>"}], format="html", path=str(out))
    assert out.read_text() == html
    p = parse(html)
    assert p.h2 == ["Hot spots", "Raw"]
    assert p.td[:2] == ["main", "1.50 s"]
    assert "<b>bold</b>" in html


def test_report_keeps_styler_in_html(hot: pd.DataFrame) -> None:
    st = styled_table(hot)
    html = report({"Styled": st}, format="html")
    assert "background-color" in html and "12.3 ms" in html
    md = report({"Styled": st}, format="markdown")
    assert "| solve | 12.3 ms |" in md


def test_report_figures(hot: pd.DataFrame, tmp_path) -> None:
    df = pd.DataFrame({"process": [0, 1], "computation": [1.0, 2.0], "wait": [0.5, 0.0]})
    fig = plot_breakdown(df)
    html = report({"Breakdown": fig, "Table": hot}, format="html")
    p = parse(html)
    assert len(p.imgs) == 1 and p.imgs[0].startswith("data:image/png;base64,")
    md_path = tmp_path / "doc.md"
    md = report({"Breakdown": fig}, format="markdown", path=str(md_path))
    png = tmp_path / "doc_files" / "fig-1-breakdown.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "![Breakdown](doc_files/fig-1-breakdown.png)" in md
    assert "[figure: Breakdown]" in report({"Breakdown": fig}, format="text")


def test_report_errors(hot: pd.DataFrame) -> None:
    with pytest.raises(PassError, match="cannot put a ndarray in a report"):
        report({"x": np.zeros(3)})
    with pytest.raises(PassError, match="unknown format 'pdf'"):
        report({"x": hot}, format="pdf")
    with pytest.raises(PassError, match="declared a figure but is a str"):
        report([{"title": "f", "figure": "not a figure"}])


def test_registered_with_tags() -> None:
    for name in ("render_table", "styled_table", "report"):
        spec = get_pass(name)
        assert spec.tags == ("report",)
    spec = get_pass("render_table")
    assert {s.name for s in spec.settings} >= {"format", "columns", "units", "path"}
    assert "Unit per column" in spec.setting("units").doc


def test_units_declared_by_analysis_passes_are_used() -> None:
    """hotspot/imbalance/breakdown record their columns' units in df.attrs; tables format them."""
    import perflow
    from perflow.passes.breakdown import breakdown
    from perflow.passes.hotspot import hotspot
    from perflow.passes.imbalance import imbalance

    lit = {"name": "main", "metrics": {"time_exc": [0.004, 0.006, 0.008, 0.010]}}
    pag = perflow.PAG.from_literal(lit)
    text = render_table(hotspot(pag), format="text")
    assert "28.0 ms" in text and "10.0 ms" in text  # sum and max, in seconds
    imb = render_table(imbalance(pag), format="text")
    assert "42.9%" in imb and "3.00 ms" in imb  # percent imbalance, imbalance time (the worked example x 1e-3)
    assert "28.0 ms" in render_table(breakdown(pag, by="total"), format="text")
    # an explicit `units` setting wins over the declared ones
    assert "0.028" in render_table(hotspot(pag), format="text", units={"value": ""})
