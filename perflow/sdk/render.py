"""The SDK for output: input coercion, unit formatting, tables in every format, files written by policy.

Numbers are formatted by their column's unit and headers say how a column
aggregates over processes, through :mod:`perflow.units` (one definition for
tables, trees, sets and reports): an analysis pass declares its columns'
units in ``df.attrs["units"]`` and aggregations in ``df.attrs["aggregates"]``;
declared units win over guesses from the column name, an explicit ``units``
setting wins over both. A long table with ``value`` and ``unit`` columns
(one metric per row, like ``pop_metrics``) has each value formatted by its
row's unit. A table's ``df.attrs["note"]`` is printed under it. Text, Markdown and HTML renderings format numbers;
CSV keeps the raw values and puts the unit in the header
(``time_exc (sum over 8 processes) [s]``). When every aggregated column
aggregates the same way, text, Markdown and HTML say it once, in the title
line (``time_exc, time_inc: sum over 8 processes``). Long text is cut at a word
boundary by :func:`shorten_end`, as the terminal's tables cut it; a figure becomes
PNG bytes with :func:`figure_png` (for a page or a notebook).
"""

from __future__ import annotations

import html
import io
import logging
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from .._atomic import current_file
from .._atomic import write_bytes as atomic_write_bytes
from .._atomic import write_text as atomic_write_text
from ..errors import PassError
from ..flow.terminal import shorten_end
from ..flow.writes import output_path
from ..pag.pag import PAG
from ..pag.tabular import as_frame, numeric, require_columns
from ..units import aggregate_label, column_labels, column_units, format_column, format_value, guess_unit

__all__ = [
    "as_frame",
    "require_columns",
    "numeric",
    "guess_unit",
    "format_value",
    "format_column",
    "column_units",
    "column_labels",
    "aggregate_label",
    "render_frame",
    "render_table",
    "select_rows",
    "write_text",
    "write_bytes",
    "current_file",
    "figure_png",
    "slug",
    "shorten_end",
    "declare_aggregates",
    "TABLE_FORMATS",
]

log = logging.getLogger(__name__)

TABLE_FORMATS = ("text", "markdown", "html", "csv")


def declare_aggregates(
    df: pd.DataFrame,
    pag: PAG,
    columns: dict[str, str] | list[str],
    agg: str = "sum",
    *,
    across: str = "locations",
) -> None:
    """Record in ``df.attrs["aggregates"]`` how ``columns`` aggregate over the PAG's processes or threads.

    ``columns`` is a list (all aggregated with ``agg``) or a dict of column to
    aggregation. ``across="locations"``: over every (process, thread);
    ``"processes"``: over processes, each one's threads summed first.
    """
    per = columns if isinstance(columns, dict) else {c: agg for c in columns}
    nproc = len(pag.processes)
    nloc = len(pag.locations) if across == "locations" else nproc
    labels = dict(df.attrs.get("aggregates", {}) or {})
    labels.update({c: aggregate_label(a, nproc, nloc) for c, a in per.items() if c in df.columns})
    df.attrs["aggregates"] = labels


def _is_numeric(s: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s.dtype)


def _md_escape(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def render_frame(
    df: pd.DataFrame,
    fmt: str = "text",
    *,
    units: Mapping[str, str] | None = None,
    auto_units: bool = True,
    digits: int = 3,
    title: str | None = None,
    max_rows: int | None = None,
    who: str = "render_table",
) -> str:
    """Render a DataFrame as aligned text, Markdown, an HTML table or CSV.

    Parameters
    ----------
    df : pandas.DataFrame
        The table (its index is not shown; see :func:`as_frame`).
    fmt : {"text", "markdown", "html", "csv"}
        Output format.
    units : mapping of str to str, optional
        Unit per column (overrides the guess from the column name).
    auto_units : bool
        Guess units from column names.
    digits : int
        Significant digits of scaled numbers.
    title : str, optional
        A caption (text: a first line; Markdown: bold line; HTML: ``<caption>``; CSV: ignored).
    max_rows : int, optional
        Show at most this many rows, then a line saying how many were left out.
    """
    if fmt not in TABLE_FORMATS:
        raise PassError(f"{who}: unknown format {fmt!r}; choose one of {', '.join(TABLE_FORMATS)}")
    n_total = len(df)
    if max_rows is not None and n_total > max_rows:
        df = df.iloc[: max(int(max_rows), 0)]
    more = n_total - len(df)
    if fmt == "csv":
        out = df.copy(deep=False)
        out.columns = column_labels(df, units, auto=auto_units, with_unit=True)
        return out.to_csv(index=False, lineterminator="\n")
    u = column_units(df, units, auto_units)
    declared = df.attrs.get("aggregates", {}) or {}
    aggs = {str(c): declared[str(c)] for c in df.columns if declared.get(str(c))}
    if len(set(aggs.values())) == 1:  # one aggregation for all: a line above the table says it
        cols = [str(c) for c in df.columns]
        said = f"{', '.join(aggs)}: {next(iter(aggs.values()))}"
        title = f"{title} ({said})" if title else said
    else:
        cols = column_labels(df, units, auto=auto_units)
    cells = [format_column(df[c], u[c], digits=digits) for c in df.columns]
    if "unit" in df.columns and "value" in df.columns and not u.get("value"):  # a long table: one unit per row
        i = list(df.columns).index("value")
        cells[i] = [
            format_value(v, str(un), digits=digits) if un == un else format_value(v, "", digits=digits)
            for v, un in zip(df["value"].tolist(), df["unit"].tolist())
        ]
    right = [_is_numeric(df[c]) for c in df.columns]
    rows = list(zip(*cells)) if cells else [() for _ in range(len(df))]
    note = f"... {more} more row{'s' if more != 1 else ''}" if more else ""
    said = str(df.attrs.get("note", "") or "")  # what a pass wants read with its table (e.g. fit quality)
    if said:
        note = f"{note}\n{said}" if note else said
    if fmt == "text":
        widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(cols)]

        def line(vals: Iterable[str]) -> str:
            return "  ".join(v.rjust(w) if r else v.ljust(w) for v, w, r in zip(vals, widths, right)).rstrip()

        out = ([title] if title else []) + [line(cols), "  ".join("-" * w for w in widths)]
        out += [line(r) for r in rows] + ([note] if note else [])
        return "\n".join(out) + "\n"
    if fmt == "markdown":
        head = "| " + " | ".join(_md_escape(c) for c in cols) + " |"
        sep = "| " + " | ".join("---:" if r else ":---" for r in right) + " |"
        body = ["| " + " | ".join(_md_escape(v) for v in r) + " |" for r in rows]
        out = ([f"**{_md_escape(title)}**", ""] if title else []) + [head, sep] + body + (["", note] if note else [])
        return "\n".join(out) + "\n"
    esc = html.escape
    th = "".join(f'<th style="text-align:{"right" if r else "left"}">{esc(c)}</th>' for c, r in zip(cols, right))
    trs = [
        "<tr>"
        + "".join(f'<td style="text-align:{"right" if rr else "left"}">{esc(v)}</td>' for v, rr in zip(r, right))
        + "</tr>"
        for r in rows
    ]
    cap = f"<caption>{esc(title)}</caption>" if title else ""
    foot = f'<p class="perflow-more">{esc(note)}</p>' if note else ""
    return (
        f'<table class="perflow-table">{cap}<thead><tr>{th}</tr></thead><tbody>'
        + "".join(trs)
        + "</tbody></table>"
        + foot
        + "\n"
    )


_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def write_text(text: str, path: str | Path | None, *, setting: str = "path") -> Path | None:
    """Write ``text`` to ``path`` (creating parent folders, atomically) when a path is given.

    Under a flow run the path (the value of the pass's ``setting``) must be
    allowed by the run's write policy (:func:`perflow.flow.writes.output_path`).
    """
    p = output_path(path, setting=setting)
    if p is None:
        return None
    atomic_write_text(p, text)
    log.debug("wrote %s (%d characters)", p, len(text))
    return p


def write_bytes(data: bytes, path: str | Path | None, *, setting: str = "path") -> Path | None:
    """Write ``data`` to ``path`` as :func:`write_text` writes text (atomically, by the run's write policy)."""
    p = output_path(path, setting=setting)
    if p is None:
        return None
    atomic_write_bytes(p, data)
    log.info("wrote %s (%d bytes)", p, len(data))
    return p


def figure_png(fig: Any, *, dpi: float | None = None) -> bytes:
    """A figure as PNG bytes (tight bounding box; imports nothing: the figure renders itself)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi or fig.dpi, bbox_inches="tight")
    return buf.getvalue()


def select_rows(
    df: pd.DataFrame, columns: Iterable[str] | None, sort_by: str | None, ascending: bool, who: str
) -> pd.DataFrame:
    """``df`` with only ``columns`` (in that order) and sorted by ``sort_by``; errors name ``who``'s setting."""
    if columns:
        require_columns(df, columns, who, setting="columns")
        df = df[list(columns)]
    if sort_by:
        require_columns(df, [sort_by], who, setting="sort_by")
        df = df.sort_values(sort_by, ascending=ascending, kind="stable")
    return df


def render_table(
    data: Any,
    format: str = "text",  # noqa: A002 - the natural setting name
    *,
    columns: list[str] | None = None,
    sort_by: str | None = None,
    ascending: bool = False,
    max_rows: int | None = None,
    units: dict[str, str] | None = None,
    auto_units: bool = True,
    digits: int = 3,
    title: str | None = None,
    who: str = "render_table",
) -> str:
    """A table (DataFrame, Series, vertex or edge set) as aligned text, Markdown, an HTML ``<table>`` or CSV.

    What the ``render_table`` pass returns (see its settings: ``perflow passes
    render_table``); ``who`` is named in errors.
    """
    df = select_rows(as_frame(data, who), columns, sort_by, ascending, who)
    return render_frame(
        df, format, units=units, auto_units=auto_units, digits=digits, title=title, max_rows=max_rows, who=who
    )


def slug(text: str) -> str:
    """A file-name-safe version of ``text``."""
    return _SAFE.sub("-", text).strip("-").lower() or "item"
