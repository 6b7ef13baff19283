"""Findings name the user's code: a candidate in library code is said of the code that calls the library.

A root cause, a hotspot or any finding about a call path in a system library, the kernel's
``[vdso]``, the MPI library or perflow's recorder is about the innermost caller that is the
user's code (:func:`perflow.sdk.profile.code_vertices`, one definition for every finding):
its ``vertex`` and ``call_path`` become that code's, and its line says which library code
below it the time was in (``through __clock_gettime/[vdso] (library code it calls, 92% of
it)``). Root causes and hotspots of one table that then name the same code add up (their
costs, waiting and gains are disjoint call paths' own); the costliest keeps its table row,
so the leaf stays one click away. The tables and the call tree keep every call path.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from perflow.sdk import PAG
from perflow.sdk.profile import code_vertices

from .reading import Candidate
from .shapes import cause_text, hotspot_text

__all__ = ["fold_library"]

#: Kinds whose candidates of one table add up when they name the same code (their costs are the call
#: paths' own: exclusive time, delay costs); the others (an imbalance, a wait) name the code, the costliest kept.
ADDITIVE = ("root cause", "hotspot")


def fold_library(found: list[Candidate], pag: PAG) -> list[Candidate]:
    """``found`` with the candidates in library code said of the user's code calling it (a new list)."""
    vt = pag.vertex_table
    n = len(vt)
    code = code_vertices(pag)
    moved = [c for c in found if 0 <= c.vertex < n and code[c.vertex] != c.vertex]
    if not moved:
        return list(found)
    names = vt["name"].astype(str).to_numpy()
    parent = vt["parent"].to_numpy(dtype=np.int64)
    paths = pag.call_paths()
    groups: dict[tuple, list[Candidate]] = {}
    out: list[Candidate | tuple] = []
    for c in found:
        v = int(code[c.vertex]) if 0 <= c.vertex < n else c.vertex
        if _additive(c) and v >= 0:
            key = (c.kind, c.output, c.lead, v)
            if key not in groups:
                out.append(key)
            groups.setdefault(key, []).append(c)
        else:
            out.append(_renamed(c, v, names, parent, paths) if v != c.vertex else c)
    return [
        _combined(groups[item], int(item[3]), names, parent, paths) if isinstance(item, tuple) else item for item in out
    ]


def _additive(c: Candidate) -> bool:
    """A delay cost or an exclusive time: the call path's own (a backtracked excess is per process, not)."""
    return c.kind in ADDITIVE and (c.kind == "hotspot" or math.isfinite(c.amount))


def _below(leaf: int, code: int, names: np.ndarray, parent: np.ndarray) -> str:
    """The names from ``code``'s callee down to ``leaf`` (``__clock_gettime/[vdso]``)."""
    chain = []
    v = leaf
    while v >= 0 and v != code:
        chain.append(str(names[v]))
        v = int(parent[v])
    return "/".join(reversed(chain))


def _through(c: Candidate, code: int, names: np.ndarray, parent: np.ndarray, share: float) -> str:
    pct = f", {100 * share:.0f}% of it" if 0 < share < 1 else ""
    return f"through {_below(c.vertex, code, names, parent)} (library code it calls{pct})"


def _renamed(c: Candidate, v: int, names: np.ndarray, parent: np.ndarray, paths: object) -> Candidate:
    """One candidate said of the code ``v`` calling the library it is in."""
    through = _through(c, v, names, parent, 1.0)
    return replace(c, vertex=v, call_path=str(paths.iat[v]), what=f"{c.what}; {through}")


def _sum(xs: list[float]) -> float:
    ok = [x for x in xs if math.isfinite(x)]
    return float(sum(ok)) if ok else math.nan


def _combined(group: list[Candidate], v: int, names: np.ndarray, parent: np.ndarray, paths: object) -> Candidate:
    """The candidates of one table naming the code ``v``, as one (the costliest's row and ranks first)."""
    if len(group) == 1 and group[0].vertex == v:
        return group[0]
    group = sorted(group, key=lambda c: -c.cost)
    first = group[0]
    cost = float(sum(c.cost for c in group))
    lib = [c for c in group if c.vertex != v]
    if lib:
        top = max(lib, key=lambda c: c.cost)
        through = "; " + _through(top, v, names, parent, sum(c.cost for c in lib) / cost if cost > 0 else 1.0)
    else:  # (the same code twice in one table: nothing in a library to say)
        through = ""
    procs: list[int] = []
    for c in group:
        procs += [p for p in c.processes if p not in procs]
    explains: dict[str, float] = {}
    for c in group:
        for k, a in c.explains.items():
            explains[k] = explains.get(k, 0.0) + a
    amount = _sum([c.amount for c in group])
    out = replace(
        first,
        cost=cost,
        vertex=v,
        call_path=str(paths.iat[v]),
        processes=procs,
        gain=_sum([c.gain for c in group]),
        amount=amount,
        explains=explains,
    )
    if first.kind == "root cause":
        out.tail = f"{first.tail}{through}"
        out.what, out.short = cause_text(amount, explains, first.lead, out.tail)
    elif first.kind == "hotspot" and math.isfinite(amount):
        out.share = _sum([c.share for c in group])
        out.what = f"{hotspot_text(out.share, amount)}{through}"
    else:
        out.what = f"{first.what}{through}"
    return out
