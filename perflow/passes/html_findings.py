"""The page's first section: the findings, one line each, linked to their evidence below.

Each line says what costs how much, where in the code (``file:line``), on which ranks and, when a
what-if replay predicted it, what fixing it gains; then links to the evidence: the timeline
zoomed to the finding's longest instance, the call path selected in the profile panes, and the
row of the table it was read from (see :func:`perflow.passes.findings.findings`).
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping

import pandas as pd

from perflow.sdk.render import format_value

from .findings import COST_NOTE
from .whatif import GAIN

__all__ = ["findings_html"]


def findings_html(
    table: pd.DataFrame | None,
    *,
    tables: Mapping[str, str] | None = None,
    timeline: bool = False,
    panes: bool = False,
) -> str:
    """The findings as an ordered list with links (an HTML fragment, without its heading).

    Parameters
    ----------
    table : DataFrame
        The ``findings`` pass's table.
    tables : mapping, optional
        Output name -> the id of its table in the page (the "table row" links).
    timeline, panes : bool
        Whether the page has the timeline and the profile panes (their links).
    """
    esc = html.escape
    if table is None or not len(table):
        return "<p>No findings: no table of the run points to a problem, and the input shows none.</p>"
    tables = dict(tables or {})
    items = []
    for _, r in table.iterrows():
        attrs = {}
        links = []
        v = int(r["vertex"])
        t0, t1 = float(r["t0"]), float(r["t1"])
        if timeline and math.isfinite(t0) and math.isfinite(t1):
            attrs.update({"data-t0": repr(t0), "data-t1": repr(t1)})
            links.append('<a href="#timeline" data-go="timeline">timeline</a>')
        if panes and v >= 0:
            attrs["data-vertex"] = str(v)
            links.append('<a href="#profile" data-go="tree">call tree</a>')
        out = str(r["output"] or "")
        if out in tables and int(r["row"]) >= 0:
            attrs.update({"data-table": tables[out], "data-row": str(int(r["row"]))})
            links.append(f'<a href="#{esc(tables[out])}" data-go="row">{esc(out)} row</a>')
        procs = str(r["processes"] or "")
        if procs:
            attrs["data-procs"] = procs
        a = "".join(f' {k}="{esc(val)}"' for k, val in attrs.items())
        cls = ' class="pf-context"' if bool(r["context"]) else ""
        gain = (
            f'<span class="pf-gain" title="predicted by a what-if replay">gain {esc(format_value(r[GAIN], "s"))}</span>'
            if pd.notna(r[GAIN])
            else ""
        )
        where = str(r["where"])
        src = str(r["source"] or "")
        name = where[: -len(src) - 3] if src and where.endswith(f"({src})") else where
        place = f'<span class="pf-where" title="{esc(str(r["call_path"]))}">{esc(name)}</span>' + (
            f' <code class="pf-src">{esc(src)}</code>' if src else ""
        )
        on = f" on rank{'s' if any(c in procs for c in ',-') or ' and ' in procs else ''} {esc(procs)}" if procs else ""
        items.append(
            f'<li{cls}{a}><span class="pf-cost" title="{esc(COST_NOTE)}">{esc(format_value(r["cost"], "s"))}</span>'
            f"{gain}{place}{on}: {esc(str(r['what']))}"
            + (f'<span class="pf-ev">{"".join(links)}</span>' if links else "")
            + "</li>"
        )
    gains = table[GAIN].notna().any()
    note = COST_NOTE + (
        "; gain: the runtime a what-if replay predicts fixing it saves"
        if gains
        else "; no gains predicted (a what-if replay of the trace predicts them, as a gain [s] column of a table)"
    )
    return f'<ol class="pf-findings">{"".join(items)}</ol>\n<p class="pf-note">{esc(note)}.</p>'
