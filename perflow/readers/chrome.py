"""Chrome Trace Event JSON (viztracer, the PyTorch profiler, PerfFlowAspect ``.pfw``, perflow's own writer).

Accepted layouts: a JSON object with ``traceEvents``, a bare JSON array, an
unterminated array (PerfFlowAspect writes ``[`` then one event per line and
may never close it), and newline-delimited events. One file, or several (a
directory, a glob or a list: one file per rank).

What is read
------------
* ``X`` (complete) events and ``B``/``E`` pairs (matched per thread, innermost
  first) become region instances; ``ts``/``dur`` are microseconds and become
  seconds since the earliest event of the run. Instances that overlap without
  nesting (rounding in the tool) are clipped to their parent. ``B`` events
  never closed are closed at the thread's last time stamp.
* Flow events (``s``/``f``) whose category is ``message`` (what
  :func:`perflow.writers.chrome.to_chrome` writes) become a send at the flow's
  start and a receive at its end (``args.bytes``, ``args.tag``); other flows
  are ignored, as are instant, counter, async and sample events.
* ``M`` metadata: ``process_name`` may give the rank (see below).
* Region names of the form ``func (file.py:12)`` (viztracer) give the
  function name, file and line; MPI call names give the MPI paradigm, PyTorch
  GPU categories (``kernel``, ``gpu_memcpy``...) the CUDA one.

Processes and threads
---------------------
In one file, each ``pid`` is a process: when every process name holds a rank
(``"rank 3"``, ``"Rank 3"``) that number is the process, else pids in
increasing order are processes ``0..P-1``. With one file per rank, the file is
the process (the last integer in its name, else its position) and each
distinct (pid, tid) in it a thread. Threads are numbered ``0..T-1`` per
process in order of ``tid`` (a ``tid`` equal to the ``pid``, the main thread,
first). ``attrs["pid_map"]``/``attrs["tid_map"]`` record the mapping.

The result is ``build_pag(raw, infer_collectives=True)``: MPI collectives are
recognised from call names (``MPI_Allreduce``...).
"""

from __future__ import annotations

import glob as _glob
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._inflate import inflate
from ..errors import FormatError, TraceError
from ..kinds import P2P, mpi_class
from ..pag.pag import PAG
from ..trace.raw import RawTrace
from ._chrome_nest import nest_intervals, pair_begin_end
from ._common import build_trace, clean_text, head_bytes, reader_errors
from ._values import MAX_SECONDS, Damage, Values

FORMAT = "chrome"
DESCRIPTION = "Chrome Trace Event JSON (viztracer, PyTorch profiler, PerfFlowAspect .pfw), one file or one per rank"

_SUFFIXES = (".json", ".pfw", ".trace", ".gz")
_RANK_RE = re.compile(r"rank\D{0,3}(\d+)", re.IGNORECASE)
_SRC_RE = re.compile(r"^(.*\S) \((.+):(\d+)\)$")


def detect(path: Path) -> bool:
    """JSON whose first event-looking object has ``ph`` and ``ts`` (or an object with ``traceEvents``)."""
    files = _files(path) if path.is_dir() else [path]
    if not files or not files[0].is_file():
        return False
    head = head_bytes(files[0], 4096)
    if head[:2] == b"\x1f\x8b":
        import zlib

        try:
            head = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, 4096)
        except zlib.error:
            return False
    h = head.lstrip()
    if h[:1] == b"{":
        return b'"traceEvents"' in head or (b'"ph"' in head and (b'"ts"' in head or b'"name"' in head))
    if h[:1] == b"[":
        return b'"ph"' in head
    return False


#: orjson releases before this one recurse without limit on deeply nested input and crash the interpreter
_ORJSON_SAFE = (3, 9, 15)


def _orjson() -> Any:
    try:
        import orjson
    except ImportError:
        return None
    try:
        version = tuple(int(x) for x in orjson.__version__.split(".")[:3])
    except ValueError:
        return None
    return orjson if version >= _ORJSON_SAFE else None


def _fast_loads(s: str) -> Any:
    """orjson when a safe version is installed (several times faster on large traces), else the standard library."""
    orjson = _orjson()
    return orjson.loads(s) if orjson is not None else json.loads(s)


def _files(path: Path | str) -> list[Path]:
    p = Path(path)
    if p.is_dir():
        return sorted(x for x in p.iterdir() if x.is_file() and x.suffix in _SUFFIXES)
    if any(c in str(path) for c in "*?[") and not p.exists():
        return [Path(x) for x in sorted(_glob.glob(str(path)))]
    return [p]


def _load_events(f: Path) -> list[dict[str, Any]]:
    try:
        raw = f.read_bytes()
    except OSError as exc:
        raise FormatError(f, f"cannot read: {exc}") from None
    if f.suffix == ".gz" or raw[:2] == b"\x1f\x8b":
        raw = inflate(raw, "gzip", f)  # bounded: a bomb is refused, not inflated
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(f, f"not UTF-8 text ({exc.reason})", where=f"byte {exc.start}") from None
    s = text.strip()
    if not s:
        raise FormatError(f, "empty file")
    try:
        try:
            doc = _fast_loads(s)
        except ValueError:
            try:
                doc = json.loads(s)
            except json.JSONDecodeError as first:
                doc = _salvage(f, s, first)
    except RecursionError:
        raise FormatError(f, "JSON nested deeper than the parser's limit (damaged, or not a Chrome trace)") from None
    if isinstance(doc, dict):
        if "traceEvents" in doc:
            doc = doc["traceEvents"]
        elif "ph" in doc:
            doc = [doc]
        else:
            raise FormatError(f, "JSON object without 'traceEvents': not a Chrome trace")
    if not isinstance(doc, list):
        raise FormatError(f, f"expected a list of events, found a {type(doc).__name__}")
    return doc


def _salvage(f: Path, s: str, first: json.JSONDecodeError) -> Any:
    """Unterminated arrays and newline-delimited events; otherwise the original error."""
    if s.startswith("["):
        body = s[1:].rstrip().rstrip(",").rstrip()
        if body.endswith("]"):
            body = body[:-1]
        try:
            return json.loads("[" + body.rstrip().rstrip(",") + "]")
        except json.JSONDecodeError:
            pass
    events = []
    for i, line in enumerate(s.splitlines(), 1):
        t = line.strip().rstrip(",").strip()
        if t in ("", "[", "]"):
            continue
        if t.startswith("["):
            t = t[1:].strip()
        try:
            events.append(json.loads(t))
        except json.JSONDecodeError as exc:
            if i == 1 and not t.startswith("{"):
                break
            raise FormatError(f, f"invalid JSON ({exc.msg})", where=f"line {i}, column {exc.colno}") from None
    if not events:
        raise FormatError(f, f"invalid JSON ({first.msg})", where=f"line {first.lineno}, column {first.colno}")
    return events


def _frame(events: list[Any], f: Path) -> pd.DataFrame:
    ev = [e for e in events if isinstance(e, dict)]
    if len(ev) != len(events):
        raise FormatError(
            f,
            "an event is not a JSON object",
            where=f"event {next(i for i, e in enumerate(events) if not isinstance(e, dict))}",
        )
    for e in ev:  # lone surrogates escaped before pandas sees them (pandas 3's text columns are Arrow UTF-8)
        for k in ("name", "cat"):
            v = e.get(k)
            if isinstance(v, str):
                e[k] = clean_text(v)
    df = pd.DataFrame.from_records(ev, columns=["ph", "name", "cat", "pid", "tid", "ts", "dur", "id", "args", "bp"])
    df["order"] = np.arange(len(df))
    return df


def _num(col: pd.Series, f: Path, what: str) -> np.ndarray:
    out = pd.to_numeric(col, errors="coerce")
    if out.isna().any():
        i = int(np.flatnonzero(out.isna().to_numpy())[0])
        raise FormatError(f, f"event {i} has a missing or non-numeric '{what}' ({col.iloc[i]!r})", where=f"event {i}")
    return out.to_numpy(dtype=np.float64)


def _ids(col: pd.Series) -> np.ndarray:
    """pid/tid values (ints, or strings for some tools) as sortable keys."""
    num = pd.to_numeric(col, errors="coerce")
    a = num.to_numpy(dtype=np.float64, na_value=np.nan)
    if not np.isnan(a).any() and np.all(np.abs(a) < 2.0**62) and np.all(a == np.round(a)):
        return num.to_numpy().astype(np.int64).astype(object)
    return np.asarray(
        [
            x
            if isinstance(x, int | np.integer)
            else (int(x) if isinstance(x, float) and np.isfinite(x) and x == int(x) else str(x))
            for x in col.tolist()
        ],
        dtype=object,
    )


def read(path: Path | str | Sequence[Path | str], **options: Any) -> PAG:
    """Read Chrome trace JSON into a trace-backed PAG.

    Parameters
    ----------
    path : path-like, glob pattern or list of paths
        One file (all ranks, by pid), or a directory/glob/list of one file per rank.

    Returns
    -------
    PAG
    """
    if options:
        raise TypeError(f"the Chrome trace reader takes no options (got {', '.join(options)})")
    files = [Path(p) for p in path] if isinstance(path, list | tuple) else _files(path)
    if not files:
        raise FormatError(path, "no Chrome trace files found")
    nums = [re.findall(r"\d+", f.stem) for f in files]
    ranks = [int(n[-1]) if n else -1 for n in nums]
    if len(files) == 1 or -1 in ranks or len(set(ranks)) != len(ranks):
        ranks = list(range(len(files)))
    frames = []
    names: dict[tuple[int, Any], str] = {}
    for fi, (f, r) in enumerate(zip(files, ranks)):
        with reader_errors(f, "Chrome trace"):
            df = _frame(_load_events(f), f)
        df["file"] = fi
        df["rank"] = r
        df["src"] = str(f)
        frames.append(df)
    df = pd.concat(frames, ignore_index=True)
    df["ph"] = df["ph"].astype(str)
    df["pid_k"] = _ids(df["pid"].fillna(0))
    df["tid_k"] = _ids(df["tid"].fillna(0))
    meta = df[df["ph"] == "M"]
    for fi, pid, name, args in zip(meta["file"], meta["pid_k"], meta["name"], meta["args"]):
        if name == "process_name" and isinstance(args, dict):
            names[(fi, pid)] = clean_text(str(args.get("name", "")))
    src = files[0] if len(files) == 1 else files[0].parent
    with reader_errors(src, "Chrome trace"):
        try:
            return _build(df, files, ranks, names)
        except TraceError as exc:
            raise FormatError(src, f"inconsistent events: {exc}") from None


def _locations(df: pd.DataFrame, files: list[Path], ranks: list[int], names: dict[tuple[int, Any], str]):  # type: ignore[no-untyped-def]
    keys = df[["file", "pid_k", "tid_k"]].drop_duplicates()
    proc: dict[tuple[int, Any], int] = {}
    if len(files) > 1:
        for fi, pid in keys[["file", "pid_k"]].drop_duplicates().itertuples(index=False):
            proc[(fi, pid)] = ranks[fi]
    else:
        pids = sorted({p for p in keys["pid_k"]}, key=lambda x: (isinstance(x, str), x))
        nm = [names.get((0, p), "") for p in pids]
        found = [_RANK_RE.search(n) for n in nm]
        if pids and all(found) and len({int(m[1]) for m in found}) == len(pids):
            proc = {(0, p): int(m[1]) for p, m in zip(pids, found)}
        else:
            proc = {(0, p): i for i, p in enumerate(pids)}
    thr: dict[tuple[int, Any, Any], int] = {}
    per_proc: dict[int, list[tuple[int, Any, Any]]] = {}
    for fi, pid, tid in keys.itertuples(index=False):
        per_proc.setdefault(proc[(fi, pid)], []).append((fi, pid, tid))
    for _p, lst in per_proc.items():
        lst.sort(
            key=lambda k: (
                k[2] != k[1],
                isinstance(k[2], str),
                str(k[1]),
                k[2] if not isinstance(k[2], str) else 0,
                str(k[2]),
            )
        )
        for i, k in enumerate(lst):
            thr[k] = i
    return proc, thr


def _map_locations(frame: pd.DataFrame, proc: dict, thr: dict) -> pd.DataFrame:  # type: ignore[type-arg]
    """Add ``process`` and ``thread`` columns to rows keyed by (file, pid_k, tid_k) (NaN when unknown)."""
    keys = pd.DataFrame(
        [(f, p, t, proc[(f, p)], i) for (f, p, t), i in thr.items()],
        columns=["file", "pid_k", "tid_k", "process", "thread"],
    )
    out = frame.drop(columns=[c for c in ("process", "thread") if c in frame.columns])
    out = out.reset_index().merge(keys, on=["file", "pid_k", "tid_k"], how="left").set_index("index")
    return out


def _build(df: pd.DataFrame, files: list[Path], ranks: list[int], names: dict[tuple[int, Any], str]) -> PAG:
    src = str(files[0]) if len(files) == 1 else str(files[0].parent)
    span = df[df["ph"].isin(["X", "B", "E"])].copy()
    if span.empty:
        raise FormatError(src, "no duration events (ph X, B or E): nothing to build a trace from")
    proc, thr = _locations(span, files, ranks, names)
    span = _map_locations(span, proc, thr)
    bad_ts = span["ts"].isna()
    if bad_ts.any():
        i = int(span.index[bad_ts.to_numpy()][0])
        raise FormatError(
            df["src"].iat[i],
            f"event {int(df['order'].iat[i])} ({df['ph'].iat[i]}) has no 'ts'",
            where=f"event {int(df['order'].iat[i])}",
        )
    ts = _num(span["ts"], Path(src), "ts")
    _check_times(span, ts, df)
    t0 = float(ts.min())
    span["t"] = ts - t0  # microseconds until the nesting is done
    loc_keys = span[["process", "thread"]].drop_duplicates().sort_values(["process", "thread"]).reset_index(drop=True)
    loc_index = {(p, t): i for i, (p, t) in enumerate(loc_keys.itertuples(index=False))}
    span["loc"] = [loc_index[k] for k in zip(span["process"], span["thread"])]
    # complete events
    x = span[span["ph"] == "X"]
    dur = pd.to_numeric(x["dur"], errors="coerce").fillna(0.0).to_numpy(dtype=np.float64)
    _event_values(x, df).column(dur, "dur", lo=0.0, hi=MAX_SECONDS * 1e6)
    xs, xe = x["t"].to_numpy(), x["t"].to_numpy() + dur
    # begin/end pairs, per location in stream order (stable by time, then file order)
    be = span[span["ph"].isin(["B", "E"])].sort_values(["loc", "t", "order"], kind="stable")
    bs, bend, bidx, unmatched = pair_begin_end(
        be["loc"].to_numpy(np.int64), be["t"].to_numpy(), (be["ph"] == "B").to_numpy()
    )
    bnames = be["name"].to_numpy(dtype=object)[bidx]
    bcats = be["cat"].to_numpy(dtype=object)[bidx]
    loc = np.r_[x["loc"].to_numpy(np.int64), be["loc"].to_numpy(np.int64)[bidx]]
    start = np.r_[xs, bs]
    end = np.r_[xe, bend]
    name = np.r_[x["name"].to_numpy(dtype=object), bnames]
    cat = np.r_[x["cat"].to_numpy(dtype=object), bcats]
    rid, regions = _regions(name, cat)
    order = np.lexsort((-end, start, loc))
    ev_loc, ev_t, ev_k, ev_r = nest_intervals(loc[order], start[order], end[order], rid[order])
    damage = Damage()
    p2p = _messages(df, span, proc, thr, loc_index, t0, ev_loc, ev_t, damage)
    ev_t = ev_t * 1e-6
    p2p["time"] = p2p["time"] * 1e-6
    t0 *= 1e-6
    locs = pd.DataFrame(
        {
            "process": loc_keys["process"],
            "thread": loc_keys["thread"],
            "name": [names.get((0, None), "") or f"rank {p} thread {t}" for p, t in loc_keys.itertuples(index=False)],
            "type": "cpu",
        }
    )
    nprocs = int(loc_keys["process"].max()) + 1
    raw = RawTrace(
        locations=locs,
        regions=regions,
        region_events={
            "location": ev_loc.astype(np.int32),
            "time": ev_t,
            "kind": ev_k.astype(np.int8),
            "region": ev_r.astype(np.int32),
        },
        p2p_events=p2p,
        comms={0: np.arange(nprocs)},
        comm_names={0: "MPI_COMM_WORLD"},
        attrs={"source": src, "time_offset": t0, "unmatched_end_events": int(unmatched)},
    )
    pag = build_trace(raw, src, damage=damage, infer_collectives=True, close_open=True)
    pag.attrs["pid_map"] = {str(k[1]): v for k, v in proc.items()}
    pag.attrs["tid_map"] = {f"{k[1]}/{k[2]}": v for k, v in thr.items()}
    return pag


class _EventValues(Values):
    """Value checks of events from one or several files: an error names the event's own file and number."""

    def __init__(self, rows: pd.DataFrame, df: pd.DataFrame) -> None:
        super().__init__(df["src"].iat[0])
        self.rows, self.df = rows, df

    def fail(self, record: str, message: str) -> Any:
        i = int(record)
        row = self.rows.index[i]
        order = int(self.df["order"].iat[row])
        raise FormatError(
            self.df["src"].iat[row],
            f"event {order} ({self.df['ph'].iat[row]} {clean_text(str(self.df['name'].iat[row]))!r}): {message}",
            where=f"event {order}",
        )

    def column(self, x: Any, field: str, record: Any = str, **kw: Any) -> np.ndarray:  # type: ignore[override]
        return super().column(x, field, str, **kw)


def _event_values(rows: pd.DataFrame, df: pd.DataFrame) -> _EventValues:
    return _EventValues(rows, df)


def _check_times(span: pd.DataFrame, ts: np.ndarray, df: pd.DataFrame) -> None:
    """Time stamps finite and not isolated from the rest of the run (a ts of -1e18 would collapse every duration)."""
    chk = _event_values(span, df)
    chk.column(ts, "ts", lo=None)
    chk.span(ts, str, unit=1e-6, field="ts")


def _regions(name: np.ndarray, cat: np.ndarray) -> tuple[np.ndarray, pd.DataFrame]:
    key = pd.MultiIndex.from_arrays(
        [pd.Series(name).fillna("<unnamed>").astype(str), pd.Series(cat).fillna("").astype(str)]
    )
    codes, uniq = pd.factorize(key)
    rows = []
    for n, c in uniq:
        n, c = clean_text(n), clean_text(c)
        cl = c.lower()
        file, line = "", 0
        m = _SRC_RE.match(n)
        if m:  # viztracer: "func (file.py:12)"
            n, file, line = m[1], m[2], int(m[3])
        par = (
            "mpi"
            if mpi_class(n)
            else (
                "cuda"
                if cl in ("kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime")
                else ("python" if "python" in cl or file.endswith(".py") else "user")
            )
        )
        rows.append({"name": n, "role": "function", "paradigm": par, "file": file, "line": line, "module": c})
    return codes.astype(np.int64), pd.DataFrame(rows, columns=["name", "role", "paradigm", "file", "line", "module"])


def _messages(df, span, proc, thr, loc_index, t0, ev_loc, ev_t, damage) -> dict[str, np.ndarray]:  # type: ignore[no-untyped-def]
    fl = df[df["ph"].isin(["s", "f"]) & (df["cat"] == "message")].copy()
    cols = ("location", "time", "kind", "peer", "comm", "tag", "bytes", "request", "pos")
    empty = {c: np.zeros(0) for c in cols}  # times in microseconds since t0 until the caller converts
    if fl.empty:
        return empty
    fl = _map_locations(fl, proc, thr).dropna(subset=["process", "thread"])
    if fl.empty:
        return empty
    fl["process"] = fl["process"].astype(np.int64)
    lk = pd.DataFrame([(p, t, i) for (p, t), i in loc_index.items()], columns=["process", "thread", "loc"])
    fl = fl.merge(lk.astype(np.int64), on=["process", "thread"], how="left")
    fl["loc"] = fl["loc"].fillna(-1).astype(np.int64)
    fl["t"] = pd.to_numeric(fl["ts"], errors="coerce").to_numpy(dtype=np.float64) - t0
    fl["key"] = fl["id"].astype(str) + "@" + fl["file"].astype(str)
    s = fl[fl["ph"] == "s"].drop_duplicates("key")
    f = fl[fl["ph"] == "f"].drop_duplicates("key")
    m = s.merge(f, on="key", suffixes=("_s", "_f"))
    damage.add("message flows without a start or an end dropped", len(s) + len(f) - 2 * len(m))
    good = (m["loc_s"] >= 0) & (m["loc_f"] >= 0) & m["t_s"].notna() & m["t_f"].notna()
    damage.add("message flows without a time stamp or outside every thread's events dropped", int((~good).sum()))
    m = m[good]
    if m.empty:
        return empty

    def arg(col: pd.Series, k: str) -> np.ndarray:
        vals = [a.get(k, 0) if isinstance(a, dict) else 0 for a in col]
        bad = [i for i, v in enumerate(vals) if isinstance(v, bool) or not isinstance(v, int | float)]
        if bad:
            raise FormatError(
                m["src_s"].iat[bad[0]], f"message flow {m['key'].iat[bad[0]]!r}: args.{k} is not a number"
            )
        src = m["src_s"].iat[0]
        return Values(src).int_column(
            np.asarray(vals, dtype=np.float64), f"args.{k}", lambda i: f"flow {m['key'].iat[i]!r}", lo=None
        )

    nb = arg(m["args_s"], "bytes")
    tag = arg(m["args_s"], "tag")
    loc = np.r_[m["loc_s"].to_numpy(), m["loc_f"].to_numpy()].astype(np.int64)
    t = np.r_[m["t_s"].to_numpy(), m["t_f"].to_numpy()]
    kind = np.r_[np.full(len(m), int(P2P.SEND)), np.full(len(m), int(P2P.RECV))]
    peer = np.r_[m["process_f"].to_numpy(), m["process_s"].to_numpy()].astype(np.int64)
    # pos: a send follows the region events at its time (it is issued inside the call it starts),
    # a receive precedes them (it completes inside the call that ends then)
    pos = np.zeros(len(loc), dtype=np.int64)
    for li in np.unique(loc):
        lo, hi = np.searchsorted(ev_loc, [li, li + 1])
        sel = loc == li
        tt = ev_t[lo:hi]
        right = np.searchsorted(tt, t[sel], side="right")
        left = np.searchsorted(tt, t[sel], side="left")
        pos[sel] = lo + np.where(kind[sel] == int(P2P.SEND), right, left)
    order = np.lexsort((pos, loc))
    out = {
        "location": loc,
        "time": t,
        "kind": kind,
        "peer": peer,
        "comm": np.zeros(len(loc)),
        "tag": np.r_[tag, tag],
        "bytes": np.r_[nb, nb],
        "request": np.full(len(loc), -1),
        "pos": pos,
    }
    return {k: np.asarray(v)[order] for k, v in out.items()}
