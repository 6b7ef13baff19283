"""The top-down tree: in the terminal, as Graphviz DOT source, and as a collapsible HTML page.

>>> print(tree_text(pag, metric="time_inc", depth=3, threshold=0.01))      # doctest: +SKIP
time_inc (sum over 8 processes)
1.00 s main
├─ 600 ms solve
│  └─ 400 ms MPI_Allreduce
└─ 300 ms io

All three share the selection settings: ``metric`` and ``agg`` (the value
shown, aggregated across processes; every rendering says how, e.g.
``time_inc (sum over 8 processes)`` as the first line), ``depth`` (deepest level shown, roots
are 0), ``threshold`` (hide vertices whose value is below this fraction of
the largest one; ancestors of shown vertices are always kept so that a hot
leaf is never lost), ``expand`` (vertices shown with their whole subtree
whatever depth and threshold say) and ``collapse`` (vertices whose subtree
is folded; ``[+N]`` tells how many vertices are hidden). Patterns are globs
on the name (``"MPI_*"``), call paths when they contain ``/``, or vertex ids.
Children are sorted by value, largest first (``sort=False``: by vertex id).
"""

from __future__ import annotations

import html
from typing import Any

import pandas as pd

from perflow.sdk import PAG, PassError, VertexSet, pass_
from perflow.sdk.profile import (
    LEVELS,
    TreeText,
    TreeView,
    format_tree_value,
    level_of,
    metric_values,
    repeated_siblings,
    tree_lines,
    tree_view,
)
from perflow.sdk.render import guess_unit, write_text

__all__ = ["tree_text", "tree_dot", "tree_html"]

TreeInput = PAG | VertexSet | pd.DataFrame


def _fmt(tv: TreeView, v: int, units: bool, precision: int) -> str:
    return format_tree_value(float(tv.value[v]), tv.unit, units, precision)


def _view(data: Any, pag: PAG | None, who: str, **kw: Any) -> TreeView:
    return tree_view(data, pag, who=who, **kw)


@pass_(version="3", tags=("report",))
def tree_text(
    data: TreeInput,
    pag: PAG | None = None,
    *,
    metric: str | list[str] = "time_inc",
    agg: str = "sum",
    process: int | None = None,
    depth: int | None = None,
    threshold: float = 0.0,
    expand: list[str | int] | None = None,
    collapse: list[str | int] | None = None,
    sort: bool = True,
    show_file: bool = False,
    color: bool = False,
    units: bool = True,
    precision: int = 3,
    ascii: bool = False,  # noqa: A002
    max_lines: int = 2000,
    header: bool = True,
    path: str | None = None,
) -> str:
    """The calling-context tree as indented text lines: ``<value> <name> [file:line]``.

    The first line says what the values are and how they aggregate over
    processes (``time_inc (sum over 8 processes)``; ``header=False`` leaves it out).

    Lines are drawn with box-drawing characters (``├─``, ``└─``, ``│``), or
    ``|-``, `` `-``, ``|`` with ``ascii=True``. With ``color=True`` the value
    is coloured by its magnitude relative to the largest value with ANSI
    escape codes: >= 90% bold red, >= 70% red, >= 50% yellow, >= 30% green,
    >= 10% cyan, else blue.

    Parameters
    ----------
    data : PAG or VertexSet or DataFrame
        A PAG (the whole tree), a VertexSet (its vertices and their ancestors),
        a table with ``vertex``, ``parent``, ``name`` and ``metric`` columns, or a
        table with a ``vertex`` column (an analysis result) together with ``pag``.
    pag : PAG, optional
        The PAG of a table of vertices.
    metric : str or list of str
        The value shown; several metrics are shown side by side as columns (the first one
        selects, sorts and colours).
    agg : str
        Aggregation across processes: sum, mean, max, min, std, median, count.
    process : int, optional
        Show one process's values (its threads summed) instead of an aggregation.
    depth : int, optional
        Deepest level shown (roots are level 0).
    threshold : float
        Hide vertices below this fraction of the largest value (0 keeps all).
    expand : list of str, optional
        Vertices shown with their whole subtree (globs, call paths or ids).
    collapse : list of str, optional
        Vertices whose subtrees are folded into a ``[+N]`` marker.
    sort : bool
        Children by decreasing value (else by vertex id).
    show_file : bool
        Append ``file:line`` when known.
    color : bool
        ANSI colours by magnitude.
    units : bool
        Format values with the metric's unit (``12.3 ms``); else plain numbers with ``precision`` decimals.
    precision : int
        Significant digits (with units) or decimals (without).
    ascii : bool
        Use ASCII instead of box-drawing characters.
    max_lines : int
        Stop after this many vertices (a last line says how many were left out).
    header : bool
        Start with a line naming the metric and its aggregation over processes.
    path : str, optional
        Also write the text to this file (without colour codes).

    Returns
    -------
    str
        One line per shown vertex, ending with a newline.
    """
    metrics = [metric] if isinstance(metric, str) else list(metric)
    if not metrics:
        raise PassError("tree_text: metric names no metric")
    tv = _view(
        data,
        pag,
        "tree_text",
        metric=metrics[0],
        agg=agg,
        process=process,
        depth=depth,
        threshold=threshold,
        expand=expand,
        collapse=collapse,
        sort=sort,
    )
    columns = []
    if len(metrics) > 1:
        if not isinstance(data, PAG | VertexSet):
            raise PassError("tree_text: several metrics need a PAG or a VertexSet as input")
        src = data if isinstance(data, PAG) else data.pag
        for m in metrics[1:]:
            info = src.metric_info.get(m)
            unit = info.unit if info is not None and info.unit in ("s", "bytes") else guess_unit(m)
            columns.append((m, metric_values(src, m, agg, process, "tree_text"), unit))
    plain, colored = tree_lines(
        tv,
        columns=columns,
        show_file=show_file,
        color=color,
        units=units,
        precision=precision,
        ascii=ascii,
        max_lines=max_lines,
        header=header,
    )
    text = "\n".join(plain) + ("\n" if plain else "")
    write_text(text, path)
    return TreeText("\n".join(colored) + ("\n" if colored else "") if color else text)


def _dot_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


@pass_(version="2", tags=("report",))
def tree_dot(
    data: TreeInput,
    pag: PAG | None = None,
    *,
    metric: str = "time_inc",
    agg: str = "sum",
    depth: int | None = None,
    threshold: float = 0.0,
    expand: list[str | int] | None = None,
    collapse: list[str | int] | None = None,
    sort: bool = True,
    show_file: bool = False,
    cmap: str = "YlOrRd",
    rankdir: str = "TB",
    precision: int = 3,
    name: str = "pag",
    path: str | None = None,
) -> str:
    """The calling-context tree as Graphviz DOT source: vertices sized and coloured by a metric.

    Node ``v<id>`` is labelled ``name`` and the formatted value (and
    ``file:line`` with ``show_file``); its fill colour comes from ``cmap`` at
    ``value / max`` and its font size grows from 10 to 22 points with the
    square root of that ratio. Edges run from parent to child. Render with
    ``dot -Tsvg tree.dot -o tree.svg``.

    Parameters
    ----------
    data : PAG or VertexSet or DataFrame
        As in :func:`tree_text`.
    pag : PAG, optional
        The PAG of a table of vertices.
    metric, agg, depth, threshold, expand, collapse, sort, show_file, precision
        As in :func:`tree_text`.
    cmap : str
        Matplotlib colormap for the fill colours.
    rankdir : str
        Graphviz layout direction: TB (top-down) or LR (left to right).
    name : str
        Graph name.
    path : str, optional
        Also write the DOT source to this file.

    Returns
    -------
    str
        ``digraph name { ... }``.
    """
    tv = _view(
        data,
        pag,
        "tree_dot",
        metric=metric,
        agg=agg,
        depth=depth,
        threshold=threshold,
        expand=expand,
        collapse=collapse,
        sort=sort,
    )
    import matplotlib
    from matplotlib.colors import to_hex

    cm = matplotlib.colormaps[cmap]
    repeated = repeated_siblings(tv)
    out = [
        f"digraph {_dot_str(name)} {{",
        f"  rankdir={rankdir};",
        f"  label={_dot_str(tv.header)}; labelloc=t;",
        '  node [shape=box, style="rounded,filled", fontname="Helvetica"];',
        '  edge [color="#777777"];',
    ]
    edges = []
    for v, _, _ in tv.walk():
        r = tv.ratio(v)
        label = f"{tv.name[v]}\n{_fmt(tv, v, True, precision)}"
        if tv.collapsed[v] and tv.hidden[v]:
            label += f" [+{int(tv.hidden[v])}]"
        if (show_file or v in repeated) and tv.location(v):
            label += f"\n{tv.location(v)}"
        fill = to_hex(cm(0.1 + 0.8 * r))
        font = "white" if r > 0.7 else "black"
        size = 10 + 12 * r**0.5
        out.append(
            f"  v{v} [label={_dot_str(label)}, fillcolor={_dot_str(fill)}, fontcolor={font}, fontsize={size:.1f}];"
        )
        edges.extend(f"  v{v} -> v{c};" for c in tv.children.get(v, []))
    text = "\n".join(out + edges + ["}"]) + "\n"
    write_text(text, path)
    return text


_PAGE_CSS = "body{font-family:sans-serif;margin:1.5em}"
_CSS = """
.pf-tree{font-family:monospace;font-size:13px}
.pf-tree details,.pf-tree .leaf{margin-left:1.4em}
.pf-tree>details,.pf-tree>.leaf{margin-left:0}
.pf-tree summary{cursor:pointer;white-space:nowrap}
.pf-tree .leaf{white-space:nowrap;padding-left:1.1em}
.pf-tree .val{display:inline-block;min-width:6em;text-align:right;font-weight:bold}
.pf-tree .bar{display:inline-block;width:60px;height:8px;background:#eee;margin:0 6px}
.pf-tree .bar span{display:block;height:8px}
.pf-tree .loc{color:#888;margin-left:0.6em}
.pf-tree .more{color:#888;margin-left:0.4em}
"""
_JS = (
    "<p><button onclick=\"document.querySelectorAll('.pf-tree details').forEach(d=>d.open=true)\">expand all</button> "
    "<button onclick=\"document.querySelectorAll('.pf-tree details').forEach(d=>d.open=false)\">collapse all</button></p>"
)


@pass_(version="2", tags=("report",))
def tree_html(
    data: TreeInput,
    pag: PAG | None = None,
    *,
    metric: str = "time_inc",
    agg: str = "sum",
    depth: int | None = None,
    threshold: float = 0.0,
    expand: list[str | int] | None = None,
    collapse: list[str | int] | None = None,
    sort: bool = True,
    show_file: bool = True,
    open_depth: int = 2,
    precision: int = 3,
    title: str = "perflow: top-down view",
    fragment: bool = False,
    path: str | None = None,
) -> str:
    """The calling-context tree as a self-contained, collapsible HTML page.

    Each vertex with shown children is a ``<details>`` element whose
    ``<summary>`` holds the value (coloured by magnitude as in
    :func:`tree_text`), a bar proportional to the value, the name and
    ``file:line``; leaves are ``<div class="leaf">``. CSS and the two
    expand/collapse-all buttons are inline: the page downloads nothing.

    Parameters
    ----------
    data : PAG or VertexSet or DataFrame
        As in :func:`tree_text`.
    pag : PAG, optional
        The PAG of a table of vertices.
    metric, agg, depth, threshold, expand, collapse, sort, show_file, precision
        As in :func:`tree_text`.
    open_depth : int
        Levels shown unfolded when the page opens (0: only the roots' summaries).
    title : str
        Page title and heading.
    fragment : bool
        Return only the ``<div class="pf-tree">`` (with its style), for embedding in a report.
    path : str, optional
        Also write the page to this file.

    Returns
    -------
    str
        An HTML document (or fragment).
    """
    tv = _view(
        data,
        pag,
        "tree_html",
        metric=metric,
        agg=agg,
        depth=depth,
        threshold=threshold,
        expand=expand,
        collapse=collapse,
        sort=sort,
    )
    repeated = repeated_siblings(tv)
    esc = html.escape
    parts = ['<div class="pf-tree">', f'<p class="pf-head">{esc(tv.header)}</p>']
    open_stack: list[int] = []  # depths of open <details>
    for v, d, _ in tv.walk():
        while open_stack and open_stack[-1] >= d:
            open_stack.pop()
            parts.append("</details>")
        r = tv.ratio(v)
        colour = LEVELS[level_of(r)][2]
        loc = tv.location(v) if show_file or v in repeated else ""
        more = f'<span class="more">[+{int(tv.hidden[v])}]</span>' if tv.collapsed[v] and tv.hidden[v] else ""
        body = (
            f'<span class="val" style="color:{colour}">{esc(_fmt(tv, v, True, precision))}</span>'
            f'<span class="bar"><span style="width:{100 * r:.1f}%;background:{colour}"></span></span>'
            f'<span class="name">{esc(str(tv.name[v]))}</span>{more}'
            + (f'<span class="loc">{esc(loc)}</span>' if loc else "")
        )
        if tv.children.get(v):
            parts.append(f"<details{' open' if d < open_depth else ''}><summary>{body}</summary>")
            open_stack.append(d)
        else:
            parts.append(f'<div class="leaf">{body}</div>')
    parts.extend("</details>" for _ in open_stack)
    parts.append("</div>")
    tree = "\n".join(parts)
    if fragment:
        text = f"<style>{_CSS}</style>\n{tree}\n"
    else:
        text = (
            f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{esc(title)}</title>'
            f"<style>{_PAGE_CSS}{_CSS}</style></head>\n<body>\n<h1>{esc(title)}</h1>\n"
            f"{_JS}\n{tree}\n</body></html>\n"
        )
    write_text(text, path)
    return text
