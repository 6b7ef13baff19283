"""One self-contained HTML page for a run: its reports, tables, figures, call tree and timeline.

``perflow run FLOW --output DIR`` writes ``DIR/index.html`` with :func:`run_page`, and
``perflow view`` builds the same page for a trace or profile. Everything is inline (styles,
scripts, Bokeh's JavaScript, PNG figures as data URIs): the page works offline and can be mailed.

What each value becomes:

==========================================  ==================================================
value                                       in the page
==========================================  ==================================================
Markdown text (a flow's report)             rendered HTML (markdown-it), its tables sortable
an HTML document or fragment                inline (a document in an ``<iframe srcdoc>``)
DataFrame, Series, vertex/edge set          a sortable table, numbers formatted with units
matplotlib Figure                           an inline PNG
PAG                                         a collapsible call tree (sum/mean/max/min over
                                            processes, inclusive and exclusive columns) and,
                                            for a trace, the interactive timeline
dict, list, number                          JSON
==========================================  ==================================================

Tables sort on a click on their header: numbers by value (``1.5 ms`` < ``2 s``), text
alphabetically.
"""

from __future__ import annotations

import base64
import html
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from perflow.sdk import PAG, pass_
from perflow.sdk.mplfig import figure_png
from perflow.sdk.render import as_frame, column_units, format_column, write_text

from .html_timeline import timeline_model
from .html_tree import TREE_CSS, TREE_JS, calltree_html

__all__ = ["run_page", "report_page", "output_html", "table_html", "markdown_html", "figure_html", "find_overlays"]

log = logging.getLogger(__name__)

#: Rows shown per table in the page.
MAX_ROWS = 500

_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em 2em;color:#222}
h1{font-size:1.5em;margin-bottom:0.2em} h2{font-size:1.2em;border-bottom:1px solid #ddd;padding-bottom:2px;margin-top:1.6em}
.pf-sub{color:#666;margin-top:0}
nav.pf-toc a{margin-right:1em}
table.pf-sortable{border-collapse:collapse;margin:0.5em 0;font-size:13px}
table.pf-sortable th,table.pf-sortable td{border-bottom:1px solid #e3e3e3;padding:2px 8px}
table.pf-sortable th{cursor:pointer;background:#f4f4f4;user-select:none;position:sticky;top:0}
table.pf-sortable th[data-dir=asc]::after{content:' \\25B2'} table.pf-sortable th[data-dir=desc]::after{content:' \\25BC'}
table.pf-sortable td.n{text-align:right;font-family:monospace}
.pf-more{color:#666;font-size:12px}
img.pf-fig{max-width:100%;border:1px solid #eee}
pre{background:#f6f6f6;padding:0.5em;overflow:auto}
iframe.pf-doc{width:100%;height:600px;border:1px solid #ddd}
"""

# sort on a header click; numbers with units compare by value (data-v holds the raw number when known)
_SORT_JS = """
const pfUnits = {ns:1e-9, us:1e-6, '\\u00b5s':1e-6, ms:1e-3, s:1, B:1, KiB:1024, MiB:1048576, GiB:1073741824, '%':1};
function pfKey(td){
  if (td.dataset.v !== undefined) return parseFloat(td.dataset.v);
  const t = td.textContent.trim().replace(/,/g, '');
  const m = t.match(/^(-?[0-9.]+(?:e[-+]?[0-9]+)?)\\s*([a-zA-Z%\\u00b5]*)$/);
  if (m && (m[2] === '' || m[2] in pfUnits)) return parseFloat(m[1]) * (pfUnits[m[2]] || 1);
  return t.toLowerCase();
}
function pfSort(th){
  const table = th.closest('table'), body = table.tBodies[0], i = th.cellIndex;
  const dir = th.dataset.dir === 'desc' ? 'asc' : 'desc';
  table.querySelectorAll('th').forEach((h) => delete h.dataset.dir);
  th.dataset.dir = dir;
  const rows = Array.from(body.rows), k = new Map(rows.map((r) => [r, pfKey(r.cells[i])]));
  rows.sort((a, b) => { const x = k.get(a), y = k.get(b);
    const c = (typeof x === typeof y) ? (x < y ? -1 : x > y ? 1 : 0) : (typeof x === 'number' ? -1 : 1);
    return dir === 'asc' ? c : -c; });
  rows.forEach((r) => body.appendChild(r));
}
document.querySelectorAll('table.pf-sortable th').forEach((th) => th.addEventListener('click', () => pfSort(th)));
"""


def table_html(data: Any, *, title: str = "", max_rows: int = MAX_ROWS, units: Mapping[str, str] | None = None) -> str:
    """A sortable HTML table: numbers formatted with units (``data-v`` keeps the raw value for sorting)."""
    df = as_frame(data, "report page")
    n = len(df)
    df = df.iloc[:max_rows]
    u = column_units(df, units)
    esc = html.escape
    num = {c: pd.api.types.is_numeric_dtype(df[c].dtype) and not pd.api.types.is_bool_dtype(df[c].dtype) for c in df}
    head = "".join(
        f'<th title="{esc(u[c] or "")}">{esc(str(c))}{" (" + esc(u[c]) + ")" if u[c] in ("s", "bytes") else ""}</th>'
        for c in df.columns
    )
    cells = {c: format_column(df[c], u[c]) for c in df.columns}
    raw = {c: df[c].to_numpy(dtype=np.float64, na_value=np.nan) for c in df.columns if num[c]}
    rows = []
    for i in range(len(df)):
        tds = []
        for c in df.columns:
            if num[c]:
                v = raw[c][i]
                dv = f' data-v="{float(v)!r}"' if np.isfinite(v) else ""
                tds.append(f'<td class="n"{dv}>{esc(cells[c][i])}</td>')
            else:
                tds.append(f"<td>{esc(cells[c][i])}</td>")
        rows.append("<tr>" + "".join(tds) + "</tr>")
    cap = f"<caption>{esc(title)}</caption>" if title else ""
    more = f'<p class="pf-more">{n - len(df)} more rows in the CSV file</p>' if n > len(df) else ""
    return f'<table class="pf-sortable">{cap}<thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>{more}'


def markdown_html(text: str) -> str:
    """Markdown (a flow's report) as HTML; its tables become sortable."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    return md.render(text).replace("<table>", '<table class="pf-sortable">')


def figure_html(fig: Any, alt: str) -> str:

    data = base64.b64encode(figure_png(fig, dpi=110)).decode()
    return f'<img class="pf-fig" alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def _is_trace_pag(v: Any) -> bool:
    return isinstance(v, PAG) and v.trace is not None and v.trace.n_intervals > 0


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


def _section(name: str, value: Any, anchors: list[tuple[str, str]], parts: list[str], page: dict[str, Any]) -> None:
    esc = html.escape
    aid = f"out-{len(anchors)}"
    body: str | None = None
    if isinstance(value, str):
        t = value.lstrip()
        if t[:15].lower().startswith(("<!doctype", "<html")):
            body = f'<iframe class="pf-doc" srcdoc="{esc(value)}"></iframe>'
        elif t.startswith("<"):
            body = value
        else:
            body = markdown_html(value)
    elif isinstance(value, pd.DataFrame | pd.Series) or (hasattr(value, "to_frame") and hasattr(value, "_ids")):
        body = table_html(value)
    elif hasattr(value, "savefig"):
        body = figure_html(value, name)
    elif isinstance(value, PAG):
        page["pags"].append((name, value))
        return
    elif type(value).__name__ == "Styler":
        body = value.to_html()
    elif value is None or isinstance(value, dict | list | tuple | bool | int | float | np.integer | np.floating):
        body = f"<pre>{esc(json.dumps(value, indent=2, default=str))}</pre>"
    else:
        body = f"<pre>{esc(repr(value))}</pre>"
    anchors.append((aid, name))
    parts.append(f'<section id="{aid}"><h2>{esc(name)}</h2>\n{body}\n</section>')


def run_page(
    outputs: Mapping[str, Any] | Sequence[tuple[str, Any]],
    *,
    title: str = "perflow report",
    subtitle: str = "",
    steps: pd.DataFrame | None = None,
    pag: Any = None,
    timeline: bool = True,
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
        The run's input PAG: its call tree and, for a trace, its timeline (with the wait
        states and critical path found among ``outputs``).
    timeline : bool
        Include the interactive timeline of a trace.
    """
    items = list(outputs.items()) if isinstance(outputs, Mapping) else list(outputs)
    esc = html.escape
    anchors: list[tuple[str, str]] = []
    parts: list[str] = []
    page: dict[str, Any] = {"pags": []}
    for name, value in items:
        _section(str(name), value, anchors, parts, page)
    pags = list(page["pags"])
    if pag is not None and all(p is not pag for _, p in pags):
        pags.insert(0, ("input", pag))
    bokeh_head = ""
    first: list[tuple[str, str, str]] = []  # (anchor, name, html) shown before the outputs

    trace_pag = next((p for _, p in pags if _is_trace_pag(p)), None)
    if timeline and trace_pag is not None:
        from bokeh.embed import components
        from bokeh.resources import INLINE

        waits, path = find_overlays(dict(items))
        doc = timeline_model(trace_pag, waits, path, title="summary timeline: processes per category")
        script, div = components(doc.roots[0])
        bokeh_head = INLINE.render()
        first.append(("timeline", "interactive timeline", f"{div}\n{script}"))
    for i, (name, p) in enumerate(pags):
        first.append((f"tree-{i}", f"call tree ({name})", calltree_html(p)))
    parts[:0] = [f'<section id="{a}"><h2>{esc(n.capitalize())}</h2>\n{h}\n</section>' for a, n, h in first]
    anchors[:0] = [(a, n) for a, n, _ in first]
    if steps is not None and len(steps):
        st = steps.reset_index()
        anchors.append(("steps", "steps"))
        table = table_html(st, units={"start": "s", "seconds": "s"})
        parts.append(f'<section id="steps"><h2>Steps</h2>\n{table}\n</section>')
    toc = " ".join(f'<a href="#{a}">{esc(n)}</a>' for a, n in anchors)
    body = "\n".join(parts)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{esc(title)}</title>\n{bokeh_head}\n<style>{_CSS}{TREE_CSS}</style></head>\n<body>\n"
        f"<h1>{esc(title)}</h1>\n"
        + (f'<p class="pf-sub">{esc(subtitle)}</p>\n' if subtitle else "")
        + f'<nav class="pf-toc">{toc}</nav>\n{body}\n<script>{_SORT_JS}{TREE_JS}</script>\n</body></html>\n'
    )


@pass_(version="1", tags=("report",))
def report_page(
    outputs: dict[str, Any],
    pag: Any = None,
    steps: pd.DataFrame | None = None,
    *,
    title: str = "perflow report",
    subtitle: str = "",
    timeline: bool = True,
    path: str | None = None,
) -> str:
    """The self-contained HTML page of a run's values (what ``index.html`` holds; see :func:`run_page`).

    Parameters
    ----------
    outputs : dict
        Values by name, shown in order.
    pag : PAG, optional
        The run's input: its call tree and, for a trace, the interactive timeline.
    steps : DataFrame, optional
        The run's steps table.
    title, subtitle : str
        Heading and the line below it.
    timeline : bool
        Include the interactive timeline of a trace.
    path : str, optional
        Also write the page there.

    Returns
    -------
    str
        The HTML document.
    """
    page = run_page(outputs, title=title, subtitle=subtitle, steps=steps, pag=pag, timeline=timeline)
    write_text(page, path)
    return page


@pass_(version="1", tags=("report",))
def output_html(value: Any, *, name: str = "", max_rows: int = 20) -> str:
    """One value as an HTML fragment for a notebook: a Markdown report rendered, a figure as PNG, a table.

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
    if isinstance(value, pd.DataFrame | pd.Series) or (hasattr(value, "to_frame") and hasattr(value, "_ids")):
        return table_html(value, max_rows=max_rows)
    if hasattr(value, "savefig"):
        return figure_html(value, name)
    if hasattr(value, "_repr_html_"):
        return str(value._repr_html_())
    return f"<pre>{html.escape(repr(value)[:2000])}</pre>"
