"""cProfile / pstats files (Python's ``cProfile``, ``profile.dump_stats``).

A pstats file is a marshalled dict ``{(file, line, func): (cc, nc, tt, ct,
callers)}`` where ``callers`` maps each caller to the statistics of the calls
it made: ``(nc, cc, tt, ct)`` (a call count for the pure-Python ``profile``
module: its times are then shared by calls). The file is decoded by
:mod:`perflow.readers._marshal`, which checks every count against the bytes
left before allocating (``marshal.loads`` does not: a damaged 1 KB file can
make it allocate gigabytes), so files written by Python 2 are read too;
non-finite statistics are a FormatError naming the function. It records a caller->callee *graph*, not
calling contexts, so the calling-context tree is an approximation:

* roots are functions nobody calls (when a set of functions is only reachable
  through a cycle, the one with the most inclusive time starts a root);
* a vertex for ``g`` under context ``... -> f`` gets the statistics of the
  edge ``f -> g`` scaled by the share ``w`` of ``f``'s total that belongs to
  the context of ``f``; the share of the new context is ``w * ct(f->g) /
  ct(g)`` (call counts when ``g`` has no time). At depth 1 the numbers are
  exact; deeper they assume a function behaves the same whatever called its
  caller (the usual gprof assumption);
* an edge back to a function already on the path (recursion, a cycle) is not
  expanded: its exclusive time and calls are folded into that ancestor
  (``time_exc`` clamped to ``time_inc``), so a cycle never loops and the
  totals are kept;
* expansion stops after ``max_vertices`` vertices (default 100,000).

Several files (a directory, a glob, or a list) are one process each: the
process is the last integer in the file name (``rank3.pstats`` -> 3) when
those are distinct, else the sorted position. Times are seconds already.
"""

from __future__ import annotations

import glob as _glob
import logging
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import FormatError
from ..kinds import VertexKind, classify_region
from ..pag.pag import PAG
from . import _marshal
from ._common import MetricRows, TreeBuilder, build_profile, head_bytes

FORMAT = "cprofile"
DESCRIPTION = "Python cProfile/pstats files (one, or a directory/glob of one per rank)"

log = logging.getLogger(__name__)

Func = tuple[str, int, str]
_LEAVE = object()


def detect(path: Path) -> bool:
    """A file whose marshalled content starts as a dict keyed by (file, line, name) tuples."""
    files = _files(path) if path.is_dir() else [path]
    if not files:
        return False
    head = head_bytes(files[0], 16)
    # marshal: '{' dict (0x7b, or 0xfb with the ref flag) followed by a tuple key ('(' 0x28/0xa8 or ')' small tuple)
    return len(head) >= 2 and head[0] in (0x7B, 0xFB) and head[1] in (0x28, 0xA8, 0x29, 0xA9)


def _files(path: Path | str) -> list[Path]:
    p = Path(path)
    if p.is_dir():
        cand = sorted(x for x in p.iterdir() if x.is_file() and x.suffix in (".pstats", ".prof", ".pstat", ".cprof"))
        if not cand:
            cand = sorted(x for x in p.iterdir() if x.is_file() and head_bytes(x, 1) in (b"{", b"\xfb"))
        return cand
    if any(c in str(path) for c in "*?[") and not p.exists():
        return [Path(x) for x in sorted(_glob.glob(str(path)))]
    return [p]


def _load(f: Path) -> dict[Func, tuple[Any, ...]]:
    try:
        data = f.read_bytes()
    except OSError as exc:
        raise FormatError(f, f"cannot read: {exc}") from exc
    if not data:
        raise FormatError(f, "empty file, not a pstats file")
    stats = _marshal.loads(data, f)  # bounded: counts are checked before anything is allocated
    if not isinstance(stats, dict):
        raise FormatError(f, f"not a pstats file: holds a {type(stats).__name__}, expected a dict")
    return {_func(f, k): _entry(f, k, v) for k, v in stats.items()}


def _func(f: Path, k: Any) -> Func:
    """A (file, line, name) key; Python 2 files hold byte strings."""
    if isinstance(k, tuple) and len(k) == 3:
        file, line, name = (x.decode("utf-8", "replace") if isinstance(x, bytes) else x for x in k)
        if isinstance(file, str) and isinstance(name, str) and isinstance(line, int) and not isinstance(line, bool):
            return file, line, name
    raise FormatError(f, f"not a pstats file: unexpected function key {str(k)[:80]}")


def _num(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _entry(f: Path, k: Any, v: Any) -> tuple[Any, ...]:
    """(cc, nc, tt, ct, callers) with callers' edges as (nc, cc, tt, ct) tuples of finite numbers."""
    if not (isinstance(v, tuple) and len(v) == 5 and isinstance(v[4], dict) and all(_num(x) for x in v[:4])):
        raise FormatError(f, f"not a pstats file: bad statistics {str(v)[:80]} for {str(k)[:80]}")
    cc, nc, tt, ct, callers = v
    edges = {}
    for c, e in callers.items():
        if _num(e):  # the pure-Python profile module records call counts only: share the times by calls
            share = e / nc if nc else 0.0
            e = (e, e, tt * share, ct * share)
        elif not (isinstance(e, tuple) and len(e) == 4 and all(_num(x) for x in e)):
            raise FormatError(f, f"bad caller statistics {str(e)[:80]} for {str(k)[:80]}")
        edges[_func(f, c)] = e
    return cc, nc, tt, ct, edges


def _name(func: Func) -> tuple[str, str, int, str]:
    file, line, name = func
    kind = classify_region(name, "python")
    if file == "~":
        file = ""
    return name, file, int(line), kind.value if kind is not VertexKind.FUNCTION else VertexKind.PYTHON.value


def _expand(
    stats: dict[Func, tuple[Any, ...]], tree: TreeBuilder, rows: MetricRows, proc: int, max_vertices: int
) -> None:
    callees: dict[Func, list[tuple[Func, tuple[float, ...]]]] = {f: [] for f in stats}
    has_caller: set[Func] = set()
    for g, (_cc, _nc, _tt, _ct, callers) in stats.items():
        for f, edge in callers.items():
            if f in callees:
                callees[f].append((g, edge))
                if f != g:
                    has_caller.add(g)
    roots = [f for f in stats if f not in has_caller]
    seen: set[Func] = set()
    budget = [max_vertices]
    truncated = [False]

    def visit_root(r: Func) -> None:
        cc, nc, tt, ct, _ = stats[r]
        name, file, line, kind = _name(r)
        v = tree.add(-1, r, name, file=file, line=line, kind=kind)
        acc = {v: [ct, tt, nc]}
        # iterative DFS over (vertex, func, share); _LEAVE entries take a function off the current path
        onpath: dict[Func, int] = {r: v}
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
                    continue
                gname, gfile, gline, gkind = _name(g)
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
                share = w * (ect / gct if gct > 0 else (enc / stats[g][1] if stats[g][1] else 0.0))
                stack.append((_LEAVE, g))
                stack.append((cv, g, share))
        for vid, (inc, exc, visits) in acc.items():
            rows.add(vid, proc, 0, "time_inc", inc)
            rows.add(vid, proc, 0, "time_exc", min(exc, inc))
            rows.add(vid, proc, 0, "visits", visits)

    for r in sorted(roots, key=lambda f: -stats[f][3]):
        visit_root(r)
    while len(seen) < len(stats):  # functions only reachable through a cycle
        rest = [f for f in stats if f not in seen]
        visit_root(max(rest, key=lambda f: stats[f][3]))
    if truncated[0]:
        log.warning("cProfile: calling-context tree truncated at %d vertices (max_vertices)", max_vertices)


def read(path: Path | str | Sequence[Path | str], *, max_vertices: int = 100_000, **options: Any) -> PAG:
    """Read one pstats file, or several (one per process).

    Parameters
    ----------
    path : path-like, glob pattern or list of paths
        A pstats file, a directory of them, a glob such as ``"run/rank*.pstats"``.
    max_vertices : int
        Stop expanding the calling-context tree after this many vertices.

    Returns
    -------
    PAG
    """
    if options:
        raise TypeError(f"the cProfile reader takes max_vertices only (got {', '.join(options)})")
    files = [Path(p) for p in path] if isinstance(path, list | tuple) else _files(path)
    if not files:
        raise FormatError(path, "no pstats files found")
    nums = [re.findall(r"\d+", f.stem) for f in files]
    ranks = [int(n[-1]) if n else -1 for n in nums]
    if len(files) == 1 or -1 in ranks or len(set(ranks)) != len(ranks):
        ranks = list(range(len(files)))
    tree = TreeBuilder()
    rows = MetricRows()
    for f, r in zip(files, ranks):
        _expand(_load(f), tree, rows, r, max_vertices)
    attrs = {"nprocs": len(files), "approximation": "calling contexts derived from the caller->callee graph"}
    return build_profile(tree, rows, attrs=attrs, complete=False)
