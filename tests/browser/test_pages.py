"""The HTML pages in a real browser: findings first and linked, the linked panes, the views, the timeline."""

from __future__ import annotations

from pathlib import Path

import pytest

import perflow
from perflow.cli.main import main
from perflow.passes.critical_path import critical_path
from perflow.passes.html_report import run_page
from perflow.passes.html_timeline import timeline_html
from perflow.passes.waitstates import wait_states

RANGE = "Bokeh.documents[0].get_model_by_name('pf-timeline-x')"
STATUS = "document.getElementById('pf-timeline-status').dataset"


def _ready(page) -> None:
    page.wait_for_function(
        "(document.getElementById('pf-timeline') === null || document.getElementById('pf-timeline').dataset.ready)"
        " && (document.getElementById('pf-panes') === null || document.getElementById('pf-panes').dataset.ready)"
    )


def _x_range(page) -> list[float]:
    return page.evaluate(f"[{RANGE}.start, {RANGE}.end]")


def _row_text(page, key: str) -> list[str]:
    """The inclusive and exclusive values shown on a call-view row."""
    return page.locator(f"#pf-calls .pf-call-row[data-key='{key}'] .pf-val").all_inner_texts()


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
    heads = pg.locator("h2").all_inner_texts()
    assert heads[:3] == ["Findings", "Timeline", "Profile"] and "report" in heads and "Steps" in heads
    assert 'script src="http' not in (run_dir / "index.html").read_text()  # nothing from the network
    page.screenshot("run-page")

    # ---- the findings link to their evidence: the call path in the panes, the timeline zoomed
    first = pg.locator("ol.pf-findings li").first
    vertex = int(first.get_attribute("data-vertex"))
    first.locator("a[data-go='tree']").click()
    assert pg.evaluate("window.pfPanes.state.sel.v") is not None
    sel = pg.locator("#pf-calls .pf-call-row.pf-sel")
    assert sel.get_attribute("data-v") == str(vertex)
    name = sel.locator(".pf-nm").inner_text()
    assert name in pg.locator("#pf-system-title").inner_text()  # its distribution over the system tree
    assert pg.locator("#pf-system .pf-sys-row").count() == 8
    x0, x1 = _x_range(pg)
    t0, t1 = float(first.get_attribute("data-t0")), float(first.get_attribute("data-t1"))
    first.locator("a[data-go='timeline']").click()
    pg.wait_for_function(f"{RANGE}.end - {RANGE}.start < {0.5 * (x1 - x0)}")
    z0, z1 = _x_range(pg)
    assert z0 <= t0 and t1 <= z1 and (z1 - z0) <= 5 * (t1 - t0) + 1e-9
    pg.evaluate(f"{RANGE}.start = {x0}; {RANGE}.end = {x1};")

    # ---- Cube's links: a metric colours the call tree, a call path shows its distribution
    assert pg.locator("#pf-calls .pf-call-row[data-key='t0']").count() == 1
    total_time = _row_text(pg, "t0")[0]
    wait = pg.locator("#pf-metrics .pf-metric-row[data-m*='late_sender']")
    if wait.count() == 0:  # folded under its category: open it
        pg.locator("#pf-metrics .pf-metric-row[data-m='time/p2p'] .pf-tog").click()
    pg.locator("#pf-metrics .pf-metric-row[data-m='time/p2p/late_sender']").click()
    assert "Late Sender" in pg.locator("#pf-call-title").inner_text()
    assert _row_text(pg, "t0")[0] != total_time  # the root's value is now its Late Sender time
    page.screenshot("run-page-late-sender")
    # a call path that waits: its distribution over the system tree names where it waits most
    pg.locator("#pf-calls .pf-call-row", has_text="exchange").locator(".pf-tog").click()  # unfold it
    waiting = pg.locator("#pf-calls .pf-call-row", has_text="MPI_Waitall")
    assert waiting.locator(".pf-val").nth(1).inner_text()  # the call that waits has exclusive Late Sender time
    waiting.click()
    info = pg.locator("#pf-dist-info").inner_text()
    assert info.startswith("min ") and " on rank " in info
    pg.select_option("#pf-agg", "max")
    assert "max over 8 locations" in pg.locator("#pf-call-title").inner_text()
    pg.select_option("#pf-agg", "sum")

    # ---- bottom-up: functions first, their callers below them
    pg.locator("#pf-metrics .pf-metric-row[data-m='time']").click()
    pg.locator("#pf-panes .pf-tabs button[data-view='bottom']").click()
    keys = pg.locator("#pf-calls .pf-call-row").evaluate_all("(rs) => rs.map((r) => r.dataset.key)")
    assert all(k.startswith("b") and "/" not in k for k in keys)
    names = pg.locator("#pf-calls .pf-call-row .pf-nm").all_inner_texts()
    mpi = next(i for i, n in enumerate(names) if n.startswith("MPI_Waitall"))
    pg.locator("#pf-calls .pf-call-row").nth(mpi).locator(".pf-tog").click()
    callers = pg.locator(f"#pf-calls .pf-call-row[data-key^='{keys[mpi]}/'] .pf-nm").all_inner_texts()
    assert callers == ["exchange"]  # MPI_Waitall is called from exchange
    page.screenshot("run-page-bottom-up")
    # ---- flat: each function once, with its inclusive and exclusive time summed over its call paths
    pg.locator("#pf-panes .pf-tabs button[data-view='flat']").click()
    flat = pg.locator("#pf-calls .pf-call-row .pf-nm").all_inner_texts()
    assert len(flat) == len(set(flat)) and "compute" in flat
    pg.locator("#pf-panes .pf-tabs button[data-view='top']").click()

    # ---- the timeline: wheel zoom, colour per function, process filter, overlays, one tooltip
    x0, x1 = _x_range(pg)
    pg.locator("#timeline").scroll_into_view_if_needed()
    box = pg.locator("#timeline .bk-Figure").last.bounding_box()
    pg.mouse.move(box["x"] + box["width"] * 0.4, box["y"] + box["height"] * 0.6)
    for _ in range(4):
        pg.mouse.wheel(0, -300)
        pg.wait_for_timeout(150)
    pg.wait_for_function(f"{RANGE}.end - {RANGE}.start < {0.5 * (x1 - x0)}")
    assert int(pg.evaluate(f"{STATUS}.shown")) > 0  # a small trace: every instance in view is drawn
    pg.mouse.move(box["x"] + box["width"] * 0.41, box["y"] + box["height"] * 0.6)
    tip = pg.locator("#pf-timeline-tip")
    pg.wait_for_function("document.getElementById('pf-timeline-tip').style.display === 'block'")
    assert "duration" in tip.inner_text() or "mostly" in tip.inner_text()
    docs = (run_dir / "index.html").read_text().split("const docs_json = '", 1)[1].split("';", 1)[0]
    assert '"HoverTool"' not in docs  # no Bokeh tooltips: the page's one tooltip follows the mouse
    pg.locator("input[name='pf-tl-color'][value='region']").check()  # its summary is decoded when asked for
    pg.wait_for_function("window.pfTimeline.color === 'region'")
    assert pg.locator(".pf-tl-legend [data-color='region']").is_visible()
    pg.fill("#pf-tl-procs", "0-1, 3")
    pg.press("#pf-tl-procs", "Enter")
    pg.wait_for_function("document.getElementById('pf-timeline-status').textContent.includes('3 of 8 rows')")
    assert pg.evaluate("Bokeh.documents[0].get_model_by_name('pf-timeline-y').start") == 2.5
    pg.locator("input[data-overlay='path']").uncheck()
    assert pg.evaluate("window.pfTimeline.show.path") is False
    page.screenshot("run-page-timeline-filtered")

    # ---- a long table pages through its rows; sorting keeps working
    seg = pg.locator("details#out-4-segments")
    seg.locator("summary").click()
    table = seg.locator("table")
    visible = table.evaluate("(t) => Array.from(t.tBodies[0].rows).filter((r) => r.style.display !== 'none').length")
    assert visible == 25
    seg.locator(".pf-next").click()
    assert "rows 26" in seg.locator(".pf-page").inner_text()
    th = table.locator("th", has_text="end").first
    col = th.evaluate("(h) => h.cellIndex")
    th.click()
    vals = table.evaluate(f"(t) => Array.from(t.tBodies[0].rows).map((r) => parseFloat(r.cells[{col}].dataset.v))")
    assert vals == sorted(vals, reverse=True) and len(vals) > 25
    assert page.errors == []


def test_profile_page_with_source(open_page, tmp_path: Path) -> None:
    """A profile (no trace): no timeline; selecting a call path shows its source lines."""
    src = tmp_path / "solve.c"
    src.write_text("".join(f"line {i}\n" for i in range(1, 41)))
    lit = {
        "name": "main", "file": str(src), "line": 3, "metrics": {"time_exc": [0.1, 0.1]},
        "children": [{"name": "solve", "file": str(src), "line": 20, "metrics": {"time_exc": [0.3, 0.1]}}],
    }  # fmt: skip
    out = tmp_path / "page.html"
    out.write_text(run_page({}, pag=perflow.PAG.from_literal(lit), title="profile"))
    page = open_page(out)
    pg = page.page
    _ready(pg)
    assert pg.locator("h2").all_inner_texts()[:2] == ["Findings", "Profile"]
    pg.locator("#pf-calls .pf-call-row[data-key='t1']").click()
    assert pg.locator("#pf-source .pf-src-line.pf-hl").inner_text().endswith("line 20")
    assert pg.locator("#pf-source .pf-src-line").count() == 13  # six lines each side
    assert pg.locator("#pf-system .pf-sys-row .pf-val").all_inner_texts() == ["300 ms", "100 ms"]
    assert page.errors == []


def test_timeline_level_of_detail(open_page, tmp_path: Path) -> None:
    """Zoomed out: the summary only; zoomed in: the instances, fewer than the cap, and a finer level."""
    pag = perflow.synthetic.trace(nprocs=16, iterations=60, late_sender=0.1, seed=3)
    out = tmp_path / "timeline.html"
    timeline_html(pag, wait_states(pag), critical_path(pag)["segments"], max_shown=300, path=str(out))
    page = open_page(out)
    pg = page.page
    _ready(pg)
    assert pg.evaluate(f"{STATUS}.level") == "0"  # level 0: the whole trace in one tile
    assert pg.evaluate(f"{STATUS}.shown") == "0"  # too many instances in view: the summary only
    page.screenshot("timeline-zoomed-out")
    x0, x1 = _x_range(pg)
    box = pg.locator(".bk-Figure").last.bounding_box()
    pg.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.5)
    for _ in range(12):
        pg.mouse.wheel(0, -300)
        pg.wait_for_timeout(100)
    pg.wait_for_function(f"{STATUS}.shown > 0")
    z0, z1 = _x_range(pg)
    assert (z1 - z0) < (x1 - x0) / 8
    assert pg.evaluate(f"{STATUS}.level") == "3"  # the finest level
    assert 0 < int(pg.evaluate(f"{STATUS}.shown")) <= 300
    page.screenshot("timeline-zoomed-in")
    assert page.errors == []
