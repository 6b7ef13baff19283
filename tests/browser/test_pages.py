"""The HTML pages in a real browser: no console errors, the timeline zooms, the tree expands, tables sort."""

from __future__ import annotations

from pathlib import Path

import pytest

import perflow
from perflow.cli.main import main
from perflow.passes.critical_path import critical_path
from perflow.passes.html_timeline import timeline_html
from perflow.passes.waitstates import wait_states

STATUS = "Bokeh.documents[0].get_model_by_name('pf-timeline-status')"
RANGE = "Bokeh.documents[0].get_model_by_name('pf-timeline-x')"


def _ready(page) -> None:
    page.wait_for_function(f"window.Bokeh !== undefined && Bokeh.documents.length > 0 && {STATUS}.text.length > 0")


def _x_range(page) -> list[float]:
    return page.evaluate(f"[{RANGE}.start, {RANGE}.end]")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``perflow run critical_path --output DIR`` on a synthetic trace with late senders."""
    d = tmp_path_factory.mktemp("run")
    pag = perflow.synthetic.trace(nprocs=8, iterations=30, late_sender=0.1, seed=2)
    pag.save(d / "trace.pag")
    assert main(["-q", "run", "critical_path", "--input", str(d / "trace.pag"), "--output", str(d / "out")]) == 0
    return d / "out"


def test_run_page(open_page, run_dir: Path) -> None:
    page = open_page(run_dir / "index.html")
    pg = page.page
    _ready(pg)
    # the sections of the run are there: timeline, call tree, the report, tables, the PNG figure, steps
    heads = pg.locator("h2").all_inner_texts()
    for h in ("Interactive timeline", "Call tree (input)", "report", "summary", "timeline", "Steps"):
        assert h in heads, heads
    assert pg.locator("img.pf-fig").count() == 1
    assert pg.evaluate("document.querySelector('img.pf-fig').naturalWidth") > 100
    assert 'script src="http' not in (run_dir / "index.html").read_text()  # nothing from the network
    page.screenshot("run-page")

    # zoom the timeline with the mouse wheel: the visible range shrinks, the status follows, instances appear
    x0, x1 = _x_range(pg)
    status0 = pg.evaluate(f"{STATUS}.text")
    pg.locator("#timeline").scroll_into_view_if_needed()
    box = pg.locator("#timeline .bk-Figure").last.bounding_box()  # the rows (the strip above has no tools)
    pg.mouse.move(box["x"] + box["width"] * 0.4, box["y"] + box["height"] * 0.6)
    for _ in range(4):
        pg.mouse.wheel(0, -300)
        pg.wait_for_timeout(150)
    pg.wait_for_function(f"{RANGE}.end - {RANGE}.start < {0.5 * (x1 - x0)}")
    z0, z1 = _x_range(pg)
    assert x0 <= z0 < z1 <= x1 and (z1 - z0) < 0.5 * (x1 - x0)
    status1 = pg.evaluate(f"{STATUS}.text")
    assert status1 != status0 and f"{z0:.4f}"[:5] in status1
    drawn = pg.evaluate(f"{STATUS}.tags[3]")
    assert drawn > 0  # a small trace: every instance in view is drawn
    page.screenshot("run-page-zoomed")

    # expand a collapsed node of the call tree
    closed = pg.locator(".pf-calltree details:not([open])").first
    vid = closed.get_attribute("data-v")
    child = pg.locator(f".pf-calltree details[data-v='{vid}'] > :is(details, .leaf)").first
    assert not child.is_visible()
    closed.locator(":scope > summary").click()
    assert pg.locator(f".pf-calltree details[data-v='{vid}']").get_attribute("open") is not None
    assert child.is_visible()
    # the aggregation choice: "max" shows the max columns only
    first_sum = pg.locator(".pf-calltree summary .c[data-a='sum']").first
    first_max = pg.locator(".pf-calltree summary .c[data-a='max']").first
    assert first_sum.is_visible() and not first_max.is_visible()
    pg.select_option(".pf-tree-box select", "max")
    assert first_max.is_visible() and not first_sum.is_visible()
    page.screenshot("run-page-tree")

    # sort the profile table by a time column (units: 1.5 ms < 2 s), both directions
    table = pg.locator("#" + pg.locator("h2", has_text="profile").locator("..").get_attribute("id") + " table")
    th = table.locator("th", has_text="time").first
    col = th.evaluate("(h) => h.cellIndex")
    th.click()
    vals = table.evaluate(f"(t) => Array.from(t.tBodies[0].rows).map((r) => parseFloat(r.cells[{col}].dataset.v))")
    assert vals == sorted(vals, reverse=True) and len(vals) > 1
    th.click()
    vals = table.evaluate(f"(t) => Array.from(t.tBodies[0].rows).map((r) => parseFloat(r.cells[{col}].dataset.v))")
    assert vals == sorted(vals)
    assert page.errors == []


def test_timeline_level_of_detail(open_page, tmp_path: Path) -> None:
    """Zoomed out: the summary only; zoomed in: the instances, fewer than the cap, and a finer level."""
    pag = perflow.synthetic.trace(nprocs=16, iterations=60, late_sender=0.1, seed=3)
    out = tmp_path / "timeline.html"
    timeline_html(pag, wait_states(pag), critical_path(pag)["segments"], max_shown=300, path=str(out))
    page = open_page(out)
    pg = page.page
    _ready(pg)
    assert pg.evaluate(f"{STATUS}.tags[2]") == 0  # level 0: the whole trace in one tile
    assert pg.evaluate(f"{STATUS}.tags[3]") == 0  # too many instances in view: the summary only
    page.screenshot("timeline-zoomed-out")
    x0, x1 = _x_range(pg)
    box = pg.locator(".bk-Figure").last.bounding_box()
    pg.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.5)
    for _ in range(12):
        pg.mouse.wheel(0, -300)
        pg.wait_for_timeout(100)
    pg.wait_for_function(f"{STATUS}.tags[3] > 0")
    z0, z1 = _x_range(pg)
    assert (z1 - z0) < (x1 - x0) / 8
    assert pg.evaluate(f"{STATUS}.tags[2]") == 3  # the finest level
    assert 0 < pg.evaluate(f"{STATUS}.tags[3]") <= 300
    page.screenshot("timeline-zoomed-in")
    assert page.errors == []
