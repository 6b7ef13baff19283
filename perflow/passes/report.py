"""Report passes: tables as text, Markdown, HTML or CSV, and documents assembled from sections.

>>> from perflow.passes.report import render_table, report
>>> print(render_table(hot, format="text"))                   # doctest: +SKIP
>>> doc = report({"Hot spots": hot, "Notes": "rank 3 is slow"}, format="html", path="out/report.html")

Numbers are shown with units chosen from the column names (seconds as
s/ms/us, bytes as KiB/MiB, percentages; see :mod:`perflow.sdk.render`), or from
the ``units`` setting. Nothing is printed; files are written only when the
``path`` setting is given.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from perflow.sdk import EdgeSet, Figure, ParallelEdgeSet, ParallelVertexSet, PassError, VertexSet, output_path, pass_
from perflow.sdk.render import (
    as_frame,
    column_units,
    format_value,
    render_frame,
    require_columns,
    select_rows,
    slug,
    write_bytes,
    write_text,
)
from perflow.sdk.render import render_table as table_text

__all__ = ["render_table", "styled_table", "report"]

TableInput = pd.DataFrame | pd.Series | VertexSet | EdgeSet | ParallelVertexSet | ParallelEdgeSet


@pass_(version="1", tags=("report",))
def render_table(
    data: TableInput,
    *,
    format: str = "text",  # noqa: A002 - the natural setting name
    columns: list[str] | None = None,
    sort_by: str | None = None,
    ascending: bool = False,
    max_rows: int | None = None,
    units: dict[str, str] | None = None,
    auto_units: bool = True,
    digits: int = 3,
    title: str | None = None,
    path: str | None = None,
) -> str:
    """Render a table as aligned text, Markdown, an HTML ``<table>`` or CSV.

    Text columns are left-aligned and numbers right-aligned; numbers are
    formatted by unit (seconds as s/ms/us/ns, bytes as B/KiB/MiB/GiB,
    percentages). CSV keeps the raw, unformatted values. A VertexSet or
    EdgeSet is rendered through its ``to_frame()``; a named index (vertex ids)
    becomes a column.

    Parameters
    ----------
    data : DataFrame or VertexSet or EdgeSet or ParallelVertexSet or ParallelEdgeSet
        The table.
    format : str
        ``"text"``, ``"markdown"``, ``"html"`` or ``"csv"``.
    columns : list of str, optional
        Columns to show, in this order (default: all).
    sort_by : str, optional
        Sort rows by this column (largest first unless ``ascending``).
    ascending : bool
        Sort order for ``sort_by``.
    max_rows : int, optional
        Show at most this many rows (a last line says how many were left out).
    units : dict of str to str, optional
        Unit per column: ``"s"``, ``"bytes"``, ``"%"`` (values in percent), ``"ratio"``
        (fractions shown as percent), ``"count"`` or ``""`` (plain number).
    auto_units : bool
        Guess the unit of the other columns from their names (``time_*`` in seconds, ``*bytes*``, ...).
    digits : int
        Significant digits of scaled numbers.
    title : str, optional
        A caption above the table.
    path : str, optional
        Also write the rendering to this file.

    Returns
    -------
    str
        The rendered table.
    """
    text = table_text(
        data,
        format,
        columns=columns,
        sort_by=sort_by,
        ascending=ascending,
        max_rows=max_rows,
        units=units,
        auto_units=auto_units,
        digits=digits,
        title=title,
    )
    write_text(text, path)
    return text


@pass_(version="1", tags=("report",))
def styled_table(
    data: TableInput,
    *,
    columns: list[str] | None = None,
    sort_by: str | None = None,
    ascending: bool = False,
    max_rows: int | None = None,
    units: dict[str, str] | None = None,
    digits: int = 3,
    gradient: list[str] | None = None,
    cmap: str = "YlOrRd",
    caption: str | None = None,
) -> Any:
    """A pandas ``Styler`` of a table for notebooks: unit-formatted numbers and colour gradients.

    Parameters
    ----------
    data : DataFrame or VertexSet or EdgeSet or ParallelVertexSet or ParallelEdgeSet
        The table.
    columns, sort_by, ascending, max_rows, units, digits
        As in :func:`render_table`.
    gradient : list of str, optional
        Numeric columns shaded by value (default: the first time column, if any).
    cmap : str
        Matplotlib colormap of the shading.
    caption : str, optional
        Table caption.

    Returns
    -------
    pandas.io.formats.style.Styler
    """
    who = "styled_table"
    df = select_rows(as_frame(data, who), columns, sort_by, ascending, who)
    if max_rows is not None:
        df = df.iloc[: max(int(max_rows), 0)]
    df = df.reset_index(drop=True)
    u = column_units(df, units)
    if gradient is None:
        gradient = [c for c in df.columns if u[c] == "s" and pd.api.types.is_numeric_dtype(df[c].dtype)][:1]
    require_columns(df, gradient, who, setting="gradient")
    numeric_cols = [
        c
        for c in df.columns
        if pd.api.types.is_numeric_dtype(df[c].dtype) and not pd.api.types.is_bool_dtype(df[c].dtype)
    ]
    styler = df.style.hide(axis="index").format(
        {c: (lambda x, _u=u[c]: format_value(x, _u, digits=digits)) for c in numeric_cols}
    )
    if gradient:
        styler = styler.background_gradient(cmap=cmap, subset=list(gradient))
    if caption:
        styler = styler.set_caption(caption)
    return styler


# ---------------------------------------------------------------------- documents
def _is_figure(x: Any) -> bool:

    return isinstance(x, Figure)


def _png(fig: Any, dpi: int) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    return buf.getvalue()


_KINDS = ("text", "pre", "html", "table", "figure")


def _normalise_sections(sections: Any) -> list[tuple[str, str, Any]]:
    """(title, kind, content) triples from a mapping, a list of pairs/dicts/values, or one value."""
    items: list[tuple[str, Any]]
    if isinstance(sections, Mapping) and not any(k in sections for k in ("content", *_KINDS)):
        items = [(str(k), v) for k, v in sections.items()]
    elif isinstance(sections, Sequence) and not isinstance(sections, str):
        items = []
        for s in sections:
            if isinstance(s, tuple) and len(s) == 2 and isinstance(s[0], str):
                items.append(s)
            elif isinstance(s, Mapping):
                items.append((str(s.get("title", "")), s))
            else:
                items.append(("", s))
    else:
        items = [("", sections)]
    out = []
    for title, c in items:
        if isinstance(c, Mapping) and any(k in c for k in ("content", *_KINDS)):
            kind = next((k for k in _KINDS if k in c), None)
            out.append((title, *_classify(c["content"])) if kind is None else (title, kind, c[kind]))
        else:
            out.append((title, *_classify(c)))
    return out


def _classify(c: Any) -> tuple[str, Any]:
    if isinstance(c, str):
        return ("pre" if "\n" in c.strip("\n") else "text"), c
    if _is_figure(c):
        return "figure", c
    if type(c).__name__ == "Styler" and hasattr(c, "to_html"):  # a styled_table result
        return "table", c
    if isinstance(c, pd.DataFrame | pd.Series) or hasattr(c, "to_frame"):
        return "table", c
    raise PassError(
        f"report: cannot put a {type(c).__name__} in a report; give a DataFrame, a set, a str or a matplotlib Figure"
    )


@pass_(version="1", tags=("report",))
def report(
    sections: dict[str, Any] | list[Any],
    *,
    title: str = "perflow report",
    format: str = "markdown",  # noqa: A002
    max_rows: int | None = 50,
    units: dict[str, str] | None = None,
    digits: int = 3,
    dpi: int = 100,
    path: str | None = None,
) -> str:
    """Assemble titled sections (tables, text, figures) into one text, Markdown or HTML document.

    Each section is a table (DataFrame, VertexSet, EdgeSet, ..., or a Styler
    from :func:`styled_table`, kept styled in HTML), a text
    (a one-line ``str`` is a paragraph, a multi-line ``str`` such as a tree
    from :func:`perflow.passes.tree.tree_text` is kept preformatted), a matplotlib
    Figure, or an explicit ``{"title": ..., "text"|"pre"|"html"|"table"|"figure": ...}``
    dict (``"html"`` fragments are inserted as is in HTML documents and
    preformatted elsewhere).

    Figures are embedded in HTML as inline PNG images (the document is
    self-contained). In Markdown and text they are written as PNG files into
    ``<path stem>_files/`` when ``path`` is given and linked; without a path,
    Markdown embeds them as data URIs and text shows a placeholder.

    Parameters
    ----------
    sections : dict or list
        ``{"Section title": content, ...}`` or a list of ``(title, content)``
        pairs, section dicts or bare contents.
    title : str
        Document title.
    format : str
        ``"text"``, ``"markdown"`` or ``"html"``.
    max_rows : int, optional
        Rows shown per table.
    units : dict of str to str, optional
        Units of table columns (see :func:`render_table`).
    digits : int
        Significant digits of scaled numbers.
    dpi : int
        Resolution of embedded figures.
    path : str, optional
        Write the document to this file.

    Returns
    -------
    str
        The document.
    """
    who = "report"
    if format not in ("text", "markdown", "html"):
        raise PassError(f"{who}: unknown format {format!r}; choose one of text, markdown, html")
    items = _normalise_sections(sections)
    target = output_path(path)
    files_dir = target.with_name(target.stem + "_files") if target is not None else None
    parts: list[str] = []
    esc = html.escape
    if format == "html":
        parts.append(f"<h1>{esc(title)}</h1>")
    elif format == "markdown":
        parts.append(f"# {title}\n")
    else:
        parts.append(f"{title}\n{'=' * len(title)}\n")
    for i, (sec_title, kind, c) in enumerate(items):
        if sec_title:
            if format == "html":
                parts.append(f"<h2>{esc(sec_title)}</h2>")
            elif format == "markdown":
                parts.append(f"## {sec_title}\n")
            else:
                parts.append(f"{sec_title}\n{'-' * len(sec_title)}\n")
        parts.append(_render_section(kind, c, format, i, sec_title, files_dir, max_rows, units, digits, dpi, who))
    if format == "html":
        body = "\n".join(parts)
        doc = (
            '<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
            f"<title>{esc(title)}</title><style>{_CSS}</style></head>\n<body>\n{body}\n</body></html>\n"
        )
    else:
        doc = "\n".join(p.rstrip("\n") + "\n" for p in parts)
    write_text(doc, target)
    return doc


_CSS = (
    "body{font-family:sans-serif;margin:2em;max-width:70em}"
    "table.perflow-table{border-collapse:collapse;margin:0.5em 0}"
    "table.perflow-table th,table.perflow-table td{border-bottom:1px solid #ddd;padding:2px 8px;font-family:monospace}"
    "pre{background:#f6f6f6;padding:0.5em}"
)


def _render_section(
    kind: str,
    c: Any,
    fmt: str,
    i: int,
    sec_title: str,
    files_dir: Path | None,
    max_rows: int | None,
    units: dict[str, str] | None,
    digits: int,
    dpi: int,
    who: str,
) -> str:
    esc = html.escape
    if kind == "table":
        if type(c).__name__ == "Styler":
            if fmt == "html":
                return c.to_html()
            c = c.data
        return render_frame(as_frame(c, who), fmt, units=units, digits=digits, max_rows=max_rows, who=who)
    if kind == "figure":
        if not _is_figure(c):
            raise PassError(f"{who}: section {sec_title or i!r} is declared a figure but is a {type(c).__name__}")
        png = _png(c, dpi)
        alt = sec_title or f"figure {i + 1}"
        if fmt == "html":
            return f'<img alt="{esc(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'
        if files_dir is not None:
            f = files_dir / f"fig-{i + 1}-{slug(alt)}.png"
            write_bytes(png, f)
            rel = f"{files_dir.name}/{f.name}"
            return f"![{alt}]({rel})" if fmt == "markdown" else f"[figure: {alt} -> {rel}]"
        if fmt == "markdown":
            return f"![{alt}](data:image/png;base64,{base64.b64encode(png).decode()})"
        return f"[figure: {alt}]"
    text = str(c)
    if kind == "html":
        return text if fmt == "html" else f"```\n{text}\n```" if fmt == "markdown" else text
    if kind == "pre":
        if fmt == "html":
            return f"<pre>{esc(text)}</pre>"
        return f"```\n{text.rstrip()}\n```" if fmt == "markdown" else text
    return f"<p>{esc(text)}</p>" if fmt == "html" else text
