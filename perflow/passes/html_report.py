"""One self-contained HTML page for a run: findings first, then the timeline, the profile, the outputs.

``perflow run FLOW --output DIR`` writes ``DIR/index.html`` with :func:`run_page`, and
``perflow view`` builds the same page for a trace or profile. Everything is inline (styles,
scripts, Bokeh's JavaScript, PNG figures as data URIs, the data compressed): the page works
offline and can be mailed. Its sections, in order:

1. **Findings**: the run's top problems ranked by cost, one line each, linked to their evidence
   (:mod:`perflow.passes.html_findings`);
2. **Timeline** of a trace, with the wait states and the critical path among the outputs
   (:mod:`perflow.passes.html_timeline`);
3. **Profile**: the metric, call and system trees linked as in Cube, with top-down, bottom-up
   and flat views and the source (:mod:`perflow.passes.html_tree`);
4. every **output**:

   ==========================================  ==================================================
   value                                       in the page
   ==========================================  ==================================================
   Markdown text (a flow's report)             rendered HTML (markdown-it), its tables sortable
   an HTML document or fragment                inline (a document in an ``<iframe srcdoc>``)
   DataFrame, Series, vertex/edge set          a sortable table, 25 rows a page, numbers with
                                               units; rows past 500 are in its CSV file
   matplotlib Figure                           an inline PNG
   PAG                                         its profile panes (and timeline, for a trace)
   dict, list, number                          JSON
   ==========================================  ==================================================

5. the **steps** of the run.
"""

from __future__ import annotations

import html
import json
import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from perflow.sdk import PAG, pass_
from perflow.sdk.render import current_file, write_text
from perflow.sdk.trace import waits_for

from ._htmlparts import MAX_ROWS, figure_html, markdown_html, table_html
from .findings import findings as findings_pass
from .html_findings import findings_html
from .html_timeline import bokeh_js, timeline_section
from .html_tree import PANES_JS, profile_html, web_asset

__all__ = ["run_page", "report_page", "output_html", "table_html", "markdown_html", "figure_html", "find_overlays"]

log = logging.getLogger(__name__)


def _is_trace_pag(v: Any) -> bool:
    return isinstance(v, PAG) and getattr(v, "trace", None) is not None and len(v.trace.intervals) > 0


def find_overlays(values: Mapping[str, Any]) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """Wait states and critical-path segments among a run's outputs (by their columns), if any."""
    waits = path = None
    for name, v in values.items():
        if not isinstance(v, pd.DataFrame) or not {"process", "start", "end"} <= set(v.columns):
            continue
        if waits is None and {"kind", "amount"} <= set(v.columns):
            waits = v
        elif path is None and ("segment" in name or "path" in name):
            path = v
    return waits, path


def _trace_waits(pag: PAG, waits: pd.DataFrame | None) -> pd.DataFrame | None:
    """The wait states to show: the run's own table, else the PAG's (computed once per PAG; None when it cannot)."""
    if waits is not None or not _is_trace_pag(pag):
        return waits
    try:
        return waits_for(pag, "report_page")
    except Exception as exc:  # a trace the wait analysis cannot read: the page shows no wait states
        log.debug("report page: no wait states: %s", exc)
        return None


def _slug(name: str, n: int) -> str:
    return f"out-{n}-" + (re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-").lower() or "value")


def _section(name: str, value: Any, aid: str, folder: Path | None, fold: bool = False) -> str | None:
    """One output as a section; a table is folded (``<details>``) under a run's report (``fold``).

    With the ``folder`` the outputs were written to, a table links its CSV file and a figure
    embeds its PNG file (rendered once).
    """
    esc = html.escape
    safe = name.replace("/", "_").replace("\\", "_").lstrip(".") or "output"
    # the files of this run's outputs (still under their temporary names while the set is being written)
    csv = f"{safe}.csv" if folder is not None and current_file(folder / f"{safe}.csv") is not None else None
    if isinstance(value, str):
        t = value.lstrip()
        if t[:15].lower().startswith(("<!doctype", "<html")):
            body = f'<iframe class="pf-doc" srcdoc="{esc(value)}"></iframe>'
        elif t.startswith("<"):
            body = value
        else:
            body = markdown_html(value)
    elif isinstance(value, pd.DataFrame | pd.Series) or (hasattr(value, "to_frame") and hasattr(value, "_ids")):
        body = table_html(value, table_id=f"tbl-{aid}", csv=csv)
        if fold:
            n = len(value) if hasattr(value, "__len__") else 0
            return (
                f'<details class="pf-out" id="{aid}"><summary>{esc(name)} '
                f'<span class="pf-more">table, {n:,} row{"s" if n != 1 else ""}</span></summary>\n{body}\n</details>'
            )
    elif hasattr(value, "savefig"):
        png = current_file(folder / f"{safe}.png") if folder is not None else None
        body = figure_html(value, name, png.read_bytes() if png is not None else None)
    elif isinstance(value, PAG):
        return None
    elif type(value).__name__ == "Styler":
        body = value.to_html()
    elif value is None or isinstance(value, dict | list | tuple | bool | int | float | np.integer | np.floating):
        body = f"<pre>{esc(json.dumps(value, indent=2, default=str))}</pre>"
    else:
        body = f"<pre>{esc(repr(value))}</pre>"
    return f'<section id="{aid}"><h2>{esc(name)}</h2>\n{body}\n</section>'


def run_page(
    outputs: Mapping[str, Any] | Sequence[tuple[str, Any]],
    *,
    title: str = "perflow report",
    subtitle: str = "",
    steps: pd.DataFrame | None = None,
    pag: Any = None,
    timeline: bool = True,
    findings: pd.DataFrame | None = None,
    folder: str | None = None,
) -> str:
    """The HTML page of a run (see the module docstring).

    Parameters
    ----------
    outputs : mapping or list of (name, value)
        The values to show, in order.
    title, subtitle : str
        Heading and the line below it (e.g. the flow's summary).
    steps : DataFrame, optional
        The run's steps (status, seconds), shown last.
    pag : PAG, optional
        The run's input PAG: its profile panes and, for a trace, its timeline (with the wait
        states and critical path found among ``outputs``).
    timeline : bool
        Include the interactive timeline of a trace.
    findings : DataFrame, optional
        The ``findings`` pass's table (computed here when not given).
    folder : str, optional
        The folder the outputs were written to (``perflow run --output``): tables link their
        ``NAME.csv`` and figures embed their ``NAME.png``.
    """
    items = [(str(k), v) for k, v in (outputs.items() if isinstance(outputs, Mapping) else outputs)]
    esc = html.escape
    pags = [(n, v) for n, v in items if isinstance(v, PAG)]
    if pag is not None and all(p is not pag for _, p in pags):
        pags.insert(0, ("input", pag))
    main = pags[0][1] if pags else None
    values = dict(items)
    waits, path = find_overlays(values)
    waits = _trace_waits(main, waits) if main is not None else waits
    if findings is None:
        findings = findings_pass(values, main)
    anchors: list[tuple[str, str]] = []
    parts: list[str] = []
    ids = {name: _slug(name, i) for i, (name, _) in enumerate(items)}
    head_js = ""
    has_timeline = timeline and main is not None and _is_trace_pag(main)
    has_panes = main is not None and len(main.metric_names) > 0
    fh = findings_html(findings, tables={n: f"tbl-{a}" for n, a in ids.items()}, timeline=has_timeline, panes=has_panes)
    parts.append(f'<section id="findings"><h2>Findings</h2>\n{fh}\n</section>')
    anchors.append(("findings", "findings"))
    if has_timeline:
        from bokeh.embed import components  # Bokeh is heavy: imported when a timeline is drawn

        sec = timeline_section(main, waits, path, reuse=[v for _, v in items])  # the static figure's columns
        script, div = components(sec.model)
        head_js = bokeh_js([sec.model])
        n_emb = sec.embedded
        note = (
            f'<p class="pf-note">{n_emb["instances"]:,} of {n_emb["of_instances"]:,} instances embedded (the longest); '
            "the summary beneath shows every instance. Wheel: zoom; drag: pan; box: zoom to processes and time.</p>"
        )
        parts.append(
            f'<section id="timeline"><h2>Timeline</h2>\n{sec.html(div)}\n{note}\n'
            f"<script>{web_asset('timeline.js')}</script>\n{script}\n</section>"
        )
        anchors.append(("timeline", "timeline"))
    if has_panes:
        label = pags[0][0]
        parts.append(
            f'<section id="profile"><h2>Profile{"" if label == "input" else f" ({esc(label)})"}</h2>\n'
            f"{profile_html(main, waits)}\n<script>{web_asset(PANES_JS)}</script>\n</section>"
        )
        anchors.append(("profile", "profile"))
    fold = any(isinstance(v, str) and re.match(r"#{1,6} \S", v.lstrip("\n")) for _, v in items)  # a report shows them
    where = Path(folder) if folder else None
    for name, value in items:
        sec_html = _section(name, value, ids[name], where, fold)
        if sec_html is not None:
            parts.append(sec_html)
            anchors.append((ids[name], name))
    if steps is not None and len(steps):
        st = steps.reset_index()
        anchors.append(("steps", "steps"))
        table = table_html(st, units={"start": "s", "seconds": "s"}, table_id="tbl-steps")
        parts.append(f'<section id="steps"><h2>Steps</h2>\n{table}\n</section>')
    toc = " ".join(f'<a href="#{a}">{esc(n)}</a>' for a, n in anchors)
    body = "\n".join(parts)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{esc(title)}</title>\n{head_js}\n<style>{web_asset('page.css')}</style></head>\n<body>\n"
        f"<h1>{esc(title)}</h1>\n"
        + (f'<p class="pf-sub">{esc(subtitle)}</p>\n' if subtitle else "")
        + f'<nav class="pf-toc">{toc}</nav>\n{body}\n<script>{web_asset("page.js")}</script>\n</body></html>\n'
    )


@pass_(version="2", tags=("report",), role="page")
def report_page(
    outputs: dict[str, Any],
    pag: Any = None,
    steps: pd.DataFrame | None = None,
    findings: pd.DataFrame | None = None,
    *,
    title: str = "perflow report",
    subtitle: str = "",
    timeline: bool = True,
    folder: str | None = None,
    path: str | None = None,
) -> str:
    """The self-contained HTML page of a run's values (what ``index.html`` holds; see :func:`run_page`).

    Parameters
    ----------
    outputs : dict
        Values by name, shown in order.
    pag : PAG, optional
        The run's input: its profile panes and, for a trace, the interactive timeline.
    steps : DataFrame, optional
        The run's steps table.
    findings : DataFrame, optional
        The run's findings (the ``findings`` pass; computed when not given).
    title, subtitle : str
        Heading and the line below it.
    timeline : bool
        Include the interactive timeline of a trace.
    folder : str, optional
        The folder the run's outputs were written to: tables link their CSV files there,
        figures embed their PNG files from there.
    path : str, optional
        Also write the page there.

    Returns
    -------
    str
        The HTML document.
    """
    page = run_page(
        outputs,
        title=title,
        subtitle=subtitle,
        steps=steps,
        pag=pag,
        timeline=timeline,
        findings=findings,
        folder=folder,
    )
    write_text(page, path)
    return page


@pass_(version="1", tags=("report",), role="fragment")
def output_html(value: Any, *, name: str = "", max_rows: int = 20) -> str:
    """One value as an HTML fragment for a notebook: a Markdown report rendered, a figure as PNG, a table.

    A findings table (the ``findings`` pass) shows as its numbered lines.

    Parameters
    ----------
    value : any
        A report (str), a table, a figure or anything with ``_repr_html_``.
    name : str
        The figure's alternative text.
    max_rows : int
        Rows shown of a table.

    Returns
    -------
    str
        The fragment.
    """
    if isinstance(value, str):
        if value.lstrip()[:15].lower().startswith(("<!doctype", "<html")):
            return f"<p>an HTML document ({len(value):,} characters): <code>result.save(DIR)</code> writes it</p>"
        return markdown_html(value)
    if isinstance(value, pd.DataFrame) and value.attrs.get("table") == "findings":
        return findings_html(value)
    if isinstance(value, pd.DataFrame | pd.Series) or (hasattr(value, "to_frame") and hasattr(value, "_ids")):
        return table_html(value, max_rows=max_rows)
    if hasattr(value, "savefig"):
        return figure_html(value, name)
    if hasattr(value, "_repr_html_"):
        return str(value._repr_html_())
    return f"<pre>{html.escape(repr(value)[:2000])}</pre>"


_ = MAX_ROWS  # re-exported for callers that size their tables like the page
