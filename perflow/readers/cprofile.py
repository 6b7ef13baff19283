"""cProfile / pstats files (Python's ``cProfile``, ``profile.dump_stats``).

A pstats file is a marshalled dict ``{(file, line, func): (cc, nc, tt, ct,
callers)}`` where ``callers`` maps each caller to the statistics of the calls
it made: ``(nc, cc, tt, ct)`` (a call count for the pure-Python ``profile``
module: its times are then shared by calls). The file is decoded by
:mod:`perflow.readers._marshal`, which checks every count against the bytes
left before allocating (``marshal.loads`` does not: a damaged 1 KB file can
make it allocate gigabytes), so files written by Python 2 are read too;
non-finite statistics are a FormatError naming the function. It records a caller->callee *graph*, not
calling contexts, so the calling-context tree is an approximation, built by
:func:`perflow.readers._callgraph.expand_call_graph` (shared with the gprof
readers; its docstring says how; expansion stops after ``max_vertices``
vertices, default 100,000).

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
from ._callgraph import expand_call_graph
from ._common import MetricRows, TreeBuilder, build_profile, head_bytes
from ._values import Values, show

FORMAT = "cprofile"
DESCRIPTION = "Python cProfile/pstats files (one, or a directory/glob of one per rank)"

log = logging.getLogger(__name__)

Func = tuple[str, int, str]


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
    funcs: dict[Any, Func] = {}  # each distinct key checked once (a dense call graph repeats them per edge)
    return {_func(f, k, funcs): _entry(f, k, v, funcs) for k, v in stats.items()}


def _func(f: Path, k: Any, seen: dict[Any, Func] | None = None) -> Func:
    if seen is not None:
        got = seen.get(k) if isinstance(k, tuple) else None
        if got is not None:
            return got
        seen[k] = got = _func(f, k)
        return got
    """A (file, line, name) key; Python 2 files hold byte strings."""
    if isinstance(k, tuple) and len(k) == 3:
        file, line, name = (x.decode("utf-8", "replace") if isinstance(x, bytes) else x for x in k)
        if isinstance(file, str) and isinstance(name, str) and isinstance(line, int) and not isinstance(line, bool):
            return file, line, name
    raise FormatError(f, f"not a pstats file: unexpected function key {str(k)[:80]}")


def _num(x: Any) -> bool:
    """A finite int or float (not a bool)."""
    t = type(x)
    if t is int or t is float:
        return x - x == 0  # false for inf and nan; exact for ints
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _edge(e: Any) -> bool:
    """A caller edge ``(nc, cc, tt, ct)`` of finite numbers."""
    return type(e) is tuple and len(e) == 4 and _num(e[0]) and _num(e[1]) and _num(e[2]) and _num(e[3])


def _entry(f: Path, k: Any, v: Any, funcs: dict[Any, Func] | None = None) -> tuple[Any, ...]:
    """(cc, nc, tt, ct, callers) with callers' edges as (nc, cc, tt, ct) tuples of finite numbers."""
    if not (isinstance(v, tuple) and len(v) == 5 and isinstance(v[4], dict) and all(_num(x) for x in v[:4])):
        raise FormatError(f, f"not a pstats file: bad statistics {str(v)[:80]} for {str(k)[:80]}")
    cc, nc, tt, ct, callers = v
    chk = Values(f)
    rec = f"function {_label(k)}"
    _stats(chk, rec, cc, nc, tt, ct)
    edges = {}
    ok = None  # the last edge tuple checked (writers share one object between edges)
    for c, e in callers.items():
        if e is ok:
            pass
        elif _edge(e):
            _stats(chk, f"{rec}, called by {_label(c)}", e[1], e[0], e[2], e[3])
            ok = e
        elif _num(e):  # the pure-Python profile module records call counts only: share the times by calls
            chk.count(e, f"{rec}, called by {_label(c)}", "calls")
            share = e / nc if nc else 0.0
            e = (e, e, tt * share, ct * share)
        else:
            raise FormatError(f, f"bad caller statistics {str(e)[:80]} for {str(k)[:80]}")
        edges[_func(f, c, funcs)] = e
    return cc, nc, tt, ct, edges


def _label(k: Any) -> str:
    if isinstance(k, tuple) and len(k) == 3:
        return f"{str(k[2])[:80]!r} ({str(k[0])[-60:]}:{k[1]})"
    return repr(k)[:80]


def _stats(chk: Values, rec: str, cc: float, nc: float, tt: float, ct: float) -> None:
    """Calls are whole numbers >= 0, times seconds >= 0, the own time at most the inclusive time."""
    chk.count(cc, rec, "primitive calls")
    chk.count(nc, rec, "calls")
    chk.seconds(tt, rec, "own time")
    chk.seconds(ct, rec, "inclusive time")
    if tt > ct * (1 + 1e-6) + 1e-6:
        chk.fail(rec, f"own time {show(tt)} s exceeds the inclusive time {show(ct)} s")


def _name(func: Func) -> tuple[str, str, int, str]:
    file, line, name = func
    kind = classify_region(name, "python")
    if file == "~":
        file = ""
    return name, file, int(line), kind.value if kind is not VertexKind.FUNCTION else VertexKind.PYTHON.value


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
        expand_call_graph(_load(f), tree, rows, r, max_vertices=max_vertices, label=_name, what="cProfile")
    attrs = {"nprocs": len(files), "approximation": "calling contexts derived from the caller->callee graph"}
    return build_profile(
        tree, rows, attrs=attrs, complete=False, source=files[0] if len(files) == 1 else files[0].parent
    )
