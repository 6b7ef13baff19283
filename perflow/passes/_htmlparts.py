"""Pieces of the run page: sortable, paginated tables, Markdown and figures as HTML.

Tables format their numbers with units (:mod:`perflow.units`) and keep each raw number in
``data-v`` so that a click on a header sorts by value (``1.5 ms`` below ``2 s``); each row keeps
its position in the table as ``data-row`` (a finding's "table row" link). A table longer than a
page shows 25 rows at a time; at most ``max_rows`` rows are embedded, the rest is in the CSV
file written beside the page (linked when it is there).
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from perflow.sdk.render import as_frame, column_units, figure_png, format_column, format_value

__all__ = ["table_html", "markdown_html", "figure_html", "MAX_ROWS", "PAGE_ROWS"]

#: Rows embedded per table in the page.
MAX_ROWS = 500
#: Rows shown at a time (the page's script pages through the others).
PAGE_ROWS = 25


def table_html(
    data: Any,
    *,
    title: str = "",
    max_rows: int = MAX_ROWS,
    units: Mapping[str, str] | None = None,
    table_id: str = "",
    csv: str | None = None,
) -> str:
    """A sortable, paginated HTML table (see the module docstring).

    Parameters
    ----------
    data : DataFrame, Series or set
        The table.
    title : str
        A caption.
    max_rows : int
        Rows embedded.
    units : mapping, optional
        Unit per column (else the table's declared units, else guessed from the names).
    table_id : str
        The table's ``id`` (pagination and links need one).
    csv : str, optional
        The CSV file with every row, linked when rows are left out.
    """
    df = as_frame(data, "report page")
    n = len(df)
    shown = df.iloc[:max_rows]
    u = column_units(df, units)
    esc = html.escape
    num = {c: pd.api.types.is_numeric_dtype(df[c].dtype) and not pd.api.types.is_bool_dtype(df[c].dtype) for c in df}
    declared = df.attrs.get("aggregates", {}) or {}
    aggs = {str(c): declared[str(c)] for c in df.columns if declared.get(str(c))}
    one = len(set(aggs.values())) == 1
    head = []
    for c in df.columns:
        say = f" ({aggs[str(c)]})" if str(c) in aggs and not one else ""
        tip = " ".join(x for x in (u[c] and f"unit: {u[c]}", aggs.get(str(c), "")) if x)
        head.append(f'<th title="{esc(tip)}">{esc(str(c))}{esc(say)}</th>')
    cells = {c: format_column(shown[c], u[c]) for c in df.columns}
    if "unit" in df.columns and "value" in df.columns and not u.get("value"):  # one unit per row (pop metrics)
        cells["value"] = [format_value(v, str(un) if un == un else "") for v, un in zip(shown["value"], shown["unit"])]
    raw = {c: shown[c].to_numpy(dtype=np.float64, na_value=np.nan) for c in df.columns if num[c]}
    rows = []
    for i in range(len(shown)):
        tds = []
        for c in df.columns:
            if num[c]:
                v = raw[c][i]
                dv = f' data-v="{float(v)!r}"' if np.isfinite(v) else ""
                tds.append(f'<td class="n"{dv}>{esc(cells[c][i])}</td>')
            else:
                tds.append(f"<td>{esc(cells[c][i])}</td>")
        rows.append(f'<tr data-row="{i}">' + "".join(tds) + "</tr>")
    caption = title or ""
    if one and aggs:
        caption = (
            f"{caption} ({', '.join(aggs)}: {next(iter(aggs.values()))})"
            if caption
            else f"{', '.join(aggs)}: {next(iter(aggs.values()))}"
        )
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    paged = len(shown) > PAGE_ROWS
    tid = f' id="{esc(table_id)}"' if table_id else ""
    cls = "pf-sortable pf-paged" if paged and table_id else "pf-sortable"
    out = [
        f'<div class="pf-table"><table class="{cls}"{tid}>{cap}<thead><tr>{"".join(head)}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    ]
    if paged and table_id:
        out.append(
            f'<div class="pf-pager" data-for="{esc(table_id)}"><button class="pf-prev">\u2039 previous</button>'
            f'<span class="pf-page"></span><button class="pf-next">next \u203a</button></div>'
        )
    if n > len(shown):
        link = f' in <a href="{esc(csv)}">{esc(csv)}</a>' if csv else " (write the run with --output for the CSV file)"
        out.append(f'<p class="pf-more">{n - len(shown):,} more rows{link}: {n:,} in all.</p>')
    elif csv and paged:
        out.append(f'<p class="pf-more">the table as CSV: <a href="{esc(csv)}">{esc(csv)}</a></p>')
    note = str(df.attrs.get("note", "") or "")
    if note:
        out.append(f'<p class="pf-note">{esc(note)}</p>')
    out.append("</div>")
    return "".join(out)


def markdown_html(text: str) -> str:
    """Markdown (a flow's report) as HTML; its tables become sortable."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    return md.render(text).replace("<table>", '<table class="pf-sortable">')


def figure_html(fig: Any, alt: str, png: bytes | None = None) -> str:
    """A figure as an inline PNG (``png``: its bytes, already rendered to a file)."""
    if png is None:
        png = figure_png(fig, dpi=100)
    data = base64.b64encode(png).decode()
    return f'<img class="pf-fig" alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'
