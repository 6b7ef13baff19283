"""HPCToolkit v4 databases (``meta.db``, ``profile.db``, ``cct.db``, ``trace.db``).

Vertices are the entry points ("main thread", ...), function and loop
contexts of the meta.db context tree; source-line and instruction contexts are
folded into their enclosing function or loop, and sibling frames of the same
function or loop (calls from different source lines) are one vertex.

* profile: ``time_inc`` is the ``execution``-scope value of the vertex's own
  context, ``time_exc`` its ``function``-scope value less that of the loops
  directly inside it (without a ``function`` scope: the ``point`` values of
  the contexts folded into the vertex), for CPUTIME or REALTIME, in seconds;
  other metrics give ``<name>_exc``/``<name>_inc`` the same way. Processes are RANK identifiers,
  threads THREAD identifiers of the profiles' identifier tuples.
* trace: each trace line (one per application thread) is a sequence of
  samples (time, context). A change of context between consecutive samples
  leaves the frames (entry points, functions, loops) of the old context's path
  that are not on the new one and enters the new ones, at the new sample's
  time; context 0 (thread not running) has no frames. Frames still open at the
  end are left at the trace's last time stamp. Times are seconds since the
  first time stamp of the database. The events form a RawTrace built with
  ``build_pag(raw, infer_collectives=True)``: a sampled trace has no message
  events, so the PAG has MPI call intervals but no messages.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...errors import FormatError, TraceError
from ...kinds import classify_region, mpi_class
from ...pag.pag import PAG, MetricInfo
from ...trace.raw import RawTrace
from .._common import MetricRows, TreeBuilder, build_profile, build_trace
from .v4meta import Blob, Context, Meta, read_meta, read_profiles

__all__ = ["read_v4"]

_MODULE_SUFFIX = re.compile(r"^(.*\S) \[([^\]]+)\]$")
_FRAME_LEXICAL = (-1, 0, 1)  # entry point, function, loop


def _frame_name(c: Context) -> tuple[str, str, str]:
    """(name, role, module) of a frame context."""
    if c.lexical == -1:
        return c.name, "root", ""
    if c.lexical == 1:
        return f"Loop@{Path(c.file).name}:{c.line}", "loop", c.module
    m = _MODULE_SUFFIX.match(c.name)
    name, module = (m[1], m[2]) if m else (c.name or "<unknown function>", c.module)
    return name, "function", module


class _Tree:
    """Frame contexts, their frame parents and paths."""

    def __init__(self, meta: Meta) -> None:
        self.ctx = {c.ctx: c for c in meta.contexts}
        # frame (vertex) context of each context: itself for frames, else the nearest frame ancestor
        self.frame_of: dict[int, int] = {}
        for c in meta.contexts:  # parents come before children in meta order
            if c.lexical in _FRAME_LEXICAL:
                self.frame_of[c.ctx] = c.ctx
            else:
                self.frame_of[c.ctx] = self.frame_of.get(c.parent, 0)
        self.frame_parent = {
            c.ctx: (self.frame_of.get(c.parent, 0) if c.parent else 0)
            for c in meta.contexts
            if c.lexical in _FRAME_LEXICAL
        }

    def path(self, ctx: int) -> tuple[int, ...]:
        out = []
        f = self.frame_of.get(ctx, 0)
        while f:  # context ids are unique and parents come first (read_meta checks): the chain ends
            out.append(f)
            f = self.frame_parent.get(f, 0)
        return tuple(reversed(out))


def _metric_columns(meta: Meta) -> dict[int, tuple[str, str]]:
    """propMetricId -> (column base, 'inc'|'exc'|'point'): execution, function and point scopes.

    ``exc`` ("function" scope) is used for exclusive values when present, else
    ``point`` values are folded into their frame.
    """
    names = {n for n, _ in meta.metrics.values()}
    time_name = next((n for n in names if n.upper().startswith("CPUTIME")), None) or next(
        (n for n in names if n.upper().startswith("REALTIME")), None
    )
    has_function = {n for n, sc in meta.metrics.values() if sc == "function"}
    out = {}
    for mid, (name, scope) in meta.metrics.items():
        which = {"point": "point", "function": "exc", "execution": "inc"}.get(scope)
        if which is None or (which == "point" and name in has_function):
            continue
        base = "time" if name == time_name else re.sub(r"\W+", "_", name).strip("_")
        out[mid] = (base, which)
    return out


def _time_factor(meta: Meta) -> float:
    for n, _ in meta.metrics.values():
        u = n.upper()
        if u.startswith(("CPUTIME", "REALTIME")):
            return 1e-6 if "(USEC)" in u else (1e-3 if "(MSEC)" in u else 1.0)
    return 1.0


def _profile(d: Path, meta: Meta, tree: _Tree) -> PAG:
    profiles = [p for p in read_profiles(d / "profile.db", meta.kinds) if not p.summary]
    cols = _metric_columns(meta)
    tb = TreeBuilder()
    vid: dict[int, int] = {}
    for c in meta.contexts:
        if c.lexical not in _FRAME_LEXICAL:
            continue
        name, role, module = _frame_name(c)
        parent = vid.get(tree.frame_parent.get(c.ctx, 0), -1)
        kind = "root" if role == "root" else classify_region(name, role).value
        # contexts with the same frame under the same parent vertex (calls from different lines) merge
        vid[c.ctx] = tb.add(
            parent, (name, role, c.file, c.line), name, kind=kind, file=c.file, line=c.line, module=module
        )
    # context id -> vertex (-1: none), as sorted keys (ids are arbitrary u32s: no table indexed by id)
    keys = np.array(sorted(tree.ctx), dtype=np.int64)
    kvid = np.array([vid.get(tree.frame_of.get(int(k), 0), -1) for k in keys], dtype=np.int64)

    def lut(c: np.ndarray) -> np.ndarray:
        c = np.asarray(c, dtype=np.int64)
        if not len(keys):
            return np.full(len(c), -1, dtype=np.int64)
        pos = np.clip(np.searchsorted(keys, c), 0, len(keys) - 1)
        return np.where(keys[pos] == c, kvid[pos], -1)

    rows = MetricRows()
    factor = _time_factor(meta)
    for p in profiles:
        proc = p.ids.get("RANK", p.index - 1)
        thr = p.ids.get("THREAD", 0)
        ok = p.ctx > 0
        ctxs, mets, vals = p.ctx[ok], p.metric[ok], p.value[ok]
        for mid, (base, which) in cols.items():
            sel = mets == mid
            if not sel.any():
                continue
            c = ctxs[sel]
            v = vals[sel] * (factor if base == "time" else 1.0)
            if which == "point":  # fold into the enclosing frame
                vv = lut(c)
                good = vv >= 0
                rows.add_arrays(f"{base}_exc", vv[good], proc, thr, v[good])
                continue
            # only at a frame's own context
            keep = np.array([tree.frame_of.get(int(x), 0) == int(x) for x in c], dtype=bool)
            c, v = c[keep], v[keep]
            rows.add_arrays(f"{base}_{which}", lut(c), proc, thr, v)
            if which == "exc":  # a loop's function-scope value is inside its enclosing frame's: take it out
                lp = np.array([tree.ctx[int(x)].lexical == 1 for x in c], dtype=bool)
                par = np.array([tree.frame_parent.get(int(x), 0) for x in c[lp]], dtype=np.int64)
                ok = par > 0
                rows.add_arrays(f"{base}_exc", lut(par[ok]), proc, thr, -v[lp][ok])
    info = {}
    for base, which in {(b_, "exc" if w == "point" else w) for b_, w in cols.values()}:
        if base != "time":
            col = f"{base}_{which}"
            info[col] = MetricInfo(col, "", "inclusive" if which == "inc" else "exclusive", f"HPCToolkit {base}")
    procs = {p.ids.get("RANK", p.index - 1) for p in profiles}
    attrs: dict[str, Any] = {"nprocs": len(procs), "title": meta.title, "layout": "v4"}
    return build_profile(tb, rows, info=info, attrs=attrs, complete=True, source=d)


def _trace(d: Path, meta: Meta, tree: _Tree) -> PAG:
    profiles = read_profiles(d / "profile.db", meta.kinds)
    b = Blob(d / "trace.db", b"trce")
    _sz, p = b.section(0)
    p_traces, n_traces, sz_trace = b.u64(p), b.u32(p + 8), b.u8(p + 0x0C)
    t_min, t_max = b.u64(p + 0x10), b.u64(p + 0x18)
    if n_traces * max(sz_trace, 1) > len(b.data):
        raise FormatError(b.path, f"announces {n_traces} trace lines, more than the file can hold", where=f"offset {p}")
    elem = np.dtype([("t", "<u8"), ("ctx", "<u4")])
    regions: dict[tuple[str, str, str, int], int] = {}
    region_rows: list[dict[str, Any]] = []
    frame_region: dict[int, int] = {}

    def region_of(f: int) -> int:
        r = frame_region.get(f)
        if r is None:
            c = tree.ctx[f]
            name, role, module = _frame_name(c)
            key = (name, role, c.file, c.line)
            r = regions.get(key)
            if r is None:
                r = regions[key] = len(region_rows)
                region_rows.append(
                    {
                        "name": name,
                        "role": role,
                        "paradigm": "mpi" if mpi_class(name) else "user",
                        "file": c.file,
                        "line": max(c.line, 0),
                        "module": module,
                    }
                )
            frame_region[f] = r
        return r

    lines = []
    for i in range(n_traces):
        h = p_traces + i * sz_trace
        prof, start, end = b.u32(h), b.u64(h + 8), b.u64(h + 0x10)
        if end < start or (end - start) % 12:
            raise FormatError(b.path, f"trace line {i}: bad extent {start}..{end}", where=f"offset {h}")
        if prof >= len(profiles):
            raise FormatError(
                b.path, f"trace line {i} refers to profile {prof}; profile.db has {len(profiles)}", where=f"offset {h}"
            )
        el = b.array(start, elem, (end - start) // 12)
        ids = profiles[prof].ids
        lines.append((ids.get("RANK", prof - 1), ids.get("THREAD", 0), el))
    lines.sort(key=lambda x: (x[0], x[1]))
    t0 = min([t_min] + [int(el["t"][0]) for _, _, el in lines if len(el)])
    t_end = max([t_max] + [int(el["t"][-1]) for _, _, el in lines if len(el)])
    loc_rows, ev_loc, ev_t, ev_k, ev_r = [], [], [], [], []
    for li, (proc, thr, el) in enumerate(lines):
        loc_rows.append({"process": proc, "thread": thr, "name": f"rank {proc} thread {thr}", "type": "cpu"})
        prev: tuple[int, ...] = ()
        times = (el["t"].astype(np.int64) - t0) * 1e-9
        if len(times) > 1 and np.any(np.diff(times) < 0):
            raise FormatError(b.path, f"trace line {li}: time stamps go backwards")
        for t, c in zip(times.tolist(), el["ctx"].tolist()):
            if c and c not in tree.ctx:
                raise FormatError(
                    b.path, f"trace line {li}: sample refers to context {c}, which meta.db does not define"
                )
            cur = tree.path(c) if c else ()
            k = 0
            while k < len(prev) and k < len(cur) and prev[k] == cur[k]:
                k += 1
            for f in reversed(prev[k:]):
                ev_loc.append(li), ev_t.append(t), ev_k.append(1), ev_r.append(region_of(f))
            for f in cur[k:]:
                ev_loc.append(li), ev_t.append(t), ev_k.append(0), ev_r.append(region_of(f))
            prev = cur
        t_last = (t_end - t0) * 1e-9
        for f in reversed(prev):
            ev_loc.append(li), ev_t.append(t_last), ev_k.append(1), ev_r.append(region_of(f))
    nprocs = len({x[0] for x in lines})
    raw = RawTrace(
        locations=pd.DataFrame(loc_rows, columns=["process", "thread", "name", "type"]),
        regions=pd.DataFrame(region_rows, columns=["name", "role", "paradigm", "file", "line", "module"]),
        region_events={
            "location": np.asarray(ev_loc, np.int32),
            "time": np.asarray(ev_t, np.float64),
            "kind": np.asarray(ev_k, np.int8),
            "region": np.asarray(ev_r, np.int32),
        },
        comms={0: np.arange(nprocs)},
        comm_names={0: "MPI_COMM_WORLD"},
        attrs={"source": str(d), "creator": "HPCToolkit", "title": meta.title},
    )
    try:
        pag = build_trace(raw, d / "trace.db", infer_collectives=True)
    except TraceError as exc:
        raise FormatError(d / "trace.db", f"inconsistent trace: {exc}") from None
    pag.attrs["layout"] = "v4"
    return pag


def read_v4(d: Path, mode: str = "auto") -> PAG:
    """Read a v4 database directory; ``mode`` is ``"auto"``, ``"profile"`` or ``"trace"``."""
    meta = read_meta(d / "meta.db")
    tree = _Tree(meta)
    has_trace = (d / "trace.db").is_file()
    if mode == "trace" and not has_trace:
        raise FormatError(d, "no trace.db in this database (measure with hpcrun -t for traces)")
    if mode == "trace" or (mode == "auto" and has_trace):
        return _trace(d, meta, tree)
    if not (d / "profile.db").is_file():
        raise FormatError(d, "no profile.db in this database")
    return _profile(d, meta, tree)
