"""A collapsible call tree with metric columns and a choice of aggregation over processes (HTML).

As in hpcviewer or Hatchet's tree view: every vertex is a line with its inclusive and exclusive
metrics in columns; the aggregation across processes (sum, mean, max, min) is chosen in the page
(all four are computed in numpy and embedded; a select box shows one set). Vertices with children
are ``<details>`` elements, so expanding a node needs no script. Children are sorted by the first
metric's sum, largest first; vertices below ``threshold`` of the largest value are left out (their
ancestors always stay).

>>> fragment = calltree_html(pag)        # doctest: +SKIP
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np

from perflow.sdk import PAG
from perflow.sdk.profile import grouped
from perflow.sdk.render import format_value, guess_unit

from ._treeview import LEVELS, level_of, tree_view

__all__ = ["calltree_html", "AGGREGATIONS"]

AGGREGATIONS = ("sum", "mean", "max", "min")

TREE_CSS = """
.pf-calltree{font-family:monospace;font-size:13px}
.pf-calltree .hdr,.pf-calltree summary,.pf-calltree .leaf{display:flex;align-items:center;padding:1px 0}
.pf-calltree .hdr{font-weight:bold;border-bottom:1px solid #ccc}
.pf-calltree details>details,.pf-calltree details>.leaf{margin-left:1.2em}
.pf-calltree .leaf{padding-left:1.1em}
.pf-calltree .nm{flex:1;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.pf-calltree .c{width:8.5em;text-align:right;flex:none}
.pf-calltree .c[data-a]{display:none}
.pf-calltree summary{cursor:pointer;list-style:none}
.pf-calltree summary::-webkit-details-marker{display:none}
.pf-calltree summary .nm::before{content:'\\25B8  ';color:#888}
.pf-calltree details[open]>summary .nm::before{content:'\\25BE  '}
"""

TREE_JS = """
function pfAgg(sel){
  const tree = sel.closest('.pf-tree-box').querySelector('.pf-calltree');
  tree.dataset.agg = sel.value;
  tree.querySelectorAll('.c[data-a]').forEach((c) => { c.style.display = c.dataset.a === sel.value ? 'block' : 'none'; });
}
document.querySelectorAll('.pf-tree-box select').forEach(pfAgg);
"""


def _metrics(pag: PAG, metrics: Sequence[str] | None) -> list[str]:
    if metrics:
        return [m for m in metrics if m in pag.metric_names] if hasattr(pag, "metric_names") else list(metrics)
    names = list(pag.metrics.columns)
    first = [m for m in ("time_inc", "time_exc") if m in names]
    rest = [m for m in names if m not in first]
    return (first + rest)[:6]


def calltree_html(
    pag: PAG,
    *,
    metrics: Sequence[str] | None = None,
    threshold: float = 0.001,
    max_vertices: int = 3000,
    open_depth: int = 2,
) -> str:
    """The call tree of ``pag`` as an HTML fragment (with its style; the page adds :data:`TREE_JS`).

    Parameters
    ----------
    pag : PAG
    metrics : list of str, optional
        Metric columns (default: ``time_inc``, ``time_exc``, then the others, at most 6).
    threshold : float
        Leave out vertices whose first metric (sum) is below this fraction of the largest.
    max_vertices : int
        At most this many lines (the largest first, with their ancestors).
    open_depth : int
        Levels unfolded when the page opens.
    """
    cols = _metrics(pag, metrics)
    if not cols:
        return "<p>(the PAG has no metrics)</p>"
    stats = {m: grouped(pag, m).stats() for m in cols}
    units = {m: (pag.metric_info[m].unit if m in pag.metric_info else guess_unit(m)) for m in cols}
    first = stats[cols[0]]["sum"]
    thr = threshold
    if (first > 0).sum() > max_vertices:  # raise the threshold until few enough lines remain
        top = np.sort(np.abs(first))[::-1]
        thr = max(thr, float(top[max_vertices - 1]) / max(float(top[0]), 1e-300))
    tv = tree_view(
        pag,
        None,
        who="calltree_html",
        metric=cols[0],
        agg="sum",
        depth=None,
        threshold=thr,
        expand=None,
        collapse=None,
        sort=True,
    )
    esc = html.escape
    n_procs = len(pag.processes)
    head = "".join(
        f'<span class="c" title="{esc(m)} ({a} over {n_procs} processes)" data-a="{a}">{esc(m)}</span>'
        for m in cols
        for a in AGGREGATIONS
    )
    parts = [
        '<div class="pf-tree-box">',
        '<label>aggregate over processes: <select onchange="pfAgg(this)">'
        + "".join(f'<option value="{a}"{" selected" if a == "sum" else ""}>{a}</option>' for a in AGGREGATIONS)
        + "</select></label>",
        f'<div class="pf-calltree" data-agg="sum"><div class="hdr"><span class="nm">call path</span>{head}</div>',
    ]
    vmax = max(float(np.abs(first).max()) if len(first) else 0.0, 1e-300)
    open_stack: list[int] = []
    for v, d, _ in tv.walk():
        while open_stack and open_stack[-1] >= d:
            open_stack.pop()
            parts.append("</details>")
        colour = LEVELS[level_of(abs(float(first[v])) / vmax)][2]
        cells = "".join(
            f'<span class="c" data-a="{a}"'
            + (f' style="color:{colour}"' if m == cols[0] else "")
            + f">{esc(format_value(float(stats[m][a][v]), units[m]))}</span>"
            for m in cols
            for a in AGGREGATIONS
        )
        name = esc(str(tv.name[v]))
        body = f'<span class="nm" title="{esc(tv.location(v))}">{name}</span>{cells}'
        if tv.children.get(v):
            parts.append(f'<details data-v="{v}"{" open" if d < open_depth else ""}><summary>{body}</summary>')
            open_stack.append(d)
        else:
            parts.append(f'<div class="leaf" data-v="{v}">{body}</div>')
    parts.extend("</details>" for _ in open_stack)
    parts.append("</div></div>")
    return "\n".join(parts)
