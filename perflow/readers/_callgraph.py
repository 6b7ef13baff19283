"""Calling-context trees from caller->callee graphs (cProfile, gprof, gprof2dot).

Those tools record, per function, its totals and, per caller, the share of
them that caller's calls account for -- a *graph*, not calling contexts. The
statistics come here in pstats' shape: ``{func: (cc, nc, tt, ct, callers)}``
where ``cc``/``nc`` are the primitive/total calls, ``tt`` the own time, ``ct``
the inclusive time and ``callers`` maps each caller to the statistics of the
calls it made, ``(nc, cc, tt, ct)``. The tree is an approximation:

* roots are functions nobody calls (when a set of functions is only reachable
  through a cycle, the one with the most inclusive time starts a root);
* a vertex for ``g`` under context ``... -> f`` gets the statistics of the
  edge ``f -> g`` scaled by the share ``w`` of ``f``'s total that belongs to
  the context of ``f``; the share of the new context is ``w * ct(f->g) /
  ct(g)`` (``g``'s primitive, non-recursive, calls when it has no time). At depth 1 the numbers are
  exact; deeper they assume a function behaves the same whatever called its
  caller (the usual gprof assumption);
* an edge back to a function already on the path (recursion, a cycle) is not
  expanded: its exclusive time and calls are folded into that ancestor
  (``time_exc`` clamped to ``time_inc``), so a cycle never loops and the
  totals are kept;
* expansion stops after ``max_vertices`` vertices: the first call edge that
  finds no room left ends the walk (the vertices made so far keep their
  statistics; recursive edges of the ones not yet walked are not folded).
  A dense graph (every function calling every other) thus costs
  ``O(max_vertices + edges)``, not ``max_vertices x fan-out``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable
from typing import Any

from ._common import MetricRows, TreeBuilder

__all__ = ["expand_call_graph", "Stats"]

log = logging.getLogger(__name__)
_LEAVE = object()  # a stack marker: the function after it leaves the current path

#: ``{func: (cc, nc, tt, ct, {caller: (nc, cc, tt, ct)})}``
Stats = dict[Hashable, tuple[Any, ...]]


def expand_call_graph(
    stats: Stats,
    tree: TreeBuilder,
    rows: MetricRows,
    proc: int,
    *,
    max_vertices: int,
    label: Callable[[Any], tuple[str, str, int, str]],
    what: str,
) -> None:
    """Add the calling-context tree of ``stats`` to ``tree`` and its metrics to ``rows`` (process ``proc``).

    ``label(func)`` gives a vertex's ``(name, file, line, kind)``; ``what``
    names the source in the warning about a truncated tree. Metrics written:
    ``time_inc``, ``time_exc``, ``visits``.
    """
    callees: dict[Any, list[tuple[Any, tuple[float, ...]]]] = {f: [] for f in stats}
    roots = []
    for g, (_cc, _nc, _tt, _ct, callers) in stats.items():
        for f, edge in callers.items():
            out = callees.get(f)
            if out is not None:
                out.append((g, edge))
        if not any(f != g and f in callees for f in callers):
            roots.append(g)
    labels: dict[Any, tuple[str, str, int, str]] = {}

    def label_of(f: Any) -> tuple[str, str, int, str]:
        got = labels.get(f)
        if got is None:
            got = labels[f] = label(f)
        return got

    seen: set[Any] = set()
    budget = [max_vertices]
    truncated = [False]

    def visit_root(r: Any) -> None:
        cc, nc, tt, ct, _ = stats[r]
        name, file, line, kind = label_of(r)
        v = tree.add(-1, r, name, file=file, line=line, kind=kind)
        acc = {v: [ct, tt, nc]}
        # iterative DFS over (vertex, func, share); a _LEAVE entry takes its function off the current
        # path (one path dict, not a copy per entry: a deep chain stays linear in memory)
        onpath: dict[Any, int] = {r: v}
        stack: list[tuple[Any, ...]] = [(v, r, 1.0)]
        seen.add(r)
        while stack:
            item = stack.pop()
            if item[0] is _LEAVE:
                del onpath[item[1]]
                continue
            pv, f, w = item
            if f != r:
                onpath[f] = pv
            for g, (enc, _ecc, ett, ect) in callees[f]:
                if g in onpath:
                    if onpath[g] == v:
                        continue  # a root's statistics are its totals: they hold the recursive calls already
                    a = acc.setdefault(onpath[g], [0.0, 0.0, 0.0])
                    a[1] += ett * w
                    a[2] += enc * w
                    continue
                if budget[0] <= 0:
                    truncated[0] = True
                    stack.clear()  # the walk ends here: the vertices on the stack stay leaves
                    break
                gname, gfile, gline, gkind = label_of(g)
                n0 = len(tree)
                cv = tree.add(pv, g, gname, file=gfile, line=gline, kind=gkind)
                if len(tree) > n0:
                    budget[0] -= 1
                a = acc.setdefault(cv, [0.0, 0.0, 0.0])
                a[0] += ect * w
                a[1] += ett * w
                a[2] += enc * w
                seen.add(g)
                gct = stats[g][3]
                calls = stats[g][0] or stats[g][1]  # the primitive calls: the contexts partition those
                share = w * (ect / gct if gct > 0 else (min(enc / calls, 1.0) if calls else 0.0))
                stack.append((_LEAVE, g))
                stack.append((cv, g, share))
        for vid, (inc, exc, visits) in acc.items():
            rows.add(vid, proc, 0, "time_inc", inc)
            rows.add(vid, proc, 0, "time_exc", min(exc, inc))
            rows.add(vid, proc, 0, "visits", visits)

    for r in sorted(roots, key=lambda f: -stats[f][3]):
        visit_root(r)
    if len(seen) < len(stats):  # functions only reachable through a cycle, by inclusive time
        for f in sorted((f for f in stats if f not in seen), key=lambda f: -stats[f][3]):
            if f not in seen:
                visit_root(f)
    if truncated[0]:
        log.warning("%s: calling-context tree truncated at %d vertices (max_vertices)", what, max_vertices)
