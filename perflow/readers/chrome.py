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

This module reads the files and assembles the trace; the event kinds
(locations, region names, message flows, value checks) are read by
:mod:`perflow.readers._chrome_events`, the nesting by
:mod:`perflow.readers._chrome_nest`.
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
from ..pag.pag import PAG
from ..trace.raw import RawTrace
from ._chrome_events import check_times, event_values, locations, map_locations, messages, region_table
from ._chrome_nest import nest_intervals, pair_begin_end
from ._common import build_trace, clean_text, head_bytes, reader_errors
from ._values import MAX_SECONDS, Damage

FORMAT = "chrome"
DESCRIPTION = "Chrome Trace Event JSON (viztracer, PyTorch profiler, PerfFlowAspect .pfw), one file or one per rank"

_SUFFIXES = (".json", ".pfw", ".trace", ".gz")


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


def _build(df: pd.DataFrame, files: list[Path], ranks: list[int], names: dict[tuple[int, Any], str]) -> PAG:
    src = str(files[0]) if len(files) == 1 else str(files[0].parent)
    span = df[df["ph"].isin(["X", "B", "E"])].copy()
    if span.empty:
        raise FormatError(src, "no duration events (ph X, B or E): nothing to build a trace from")
    proc, thr = locations(span, files, ranks, names)
    span = map_locations(span, proc, thr)
    bad_ts = span["ts"].isna()
    if bad_ts.any():
        i = int(span.index[bad_ts.to_numpy()][0])
        raise FormatError(
            df["src"].iat[i],
            f"event {int(df['order'].iat[i])} ({df['ph'].iat[i]}) has no 'ts'",
            where=f"event {int(df['order'].iat[i])}",
        )
    ts = _num(span["ts"], Path(src), "ts")
    check_times(span, ts, df)
    t0 = float(ts.min())
    span["t"] = ts - t0  # microseconds until the nesting is done
    loc_keys = span[["process", "thread"]].drop_duplicates().sort_values(["process", "thread"]).reset_index(drop=True)
    loc_index = {(p, t): i for i, (p, t) in enumerate(loc_keys.itertuples(index=False))}
    span["loc"] = [loc_index[k] for k in zip(span["process"], span["thread"])]
    # complete events
    x = span[span["ph"] == "X"]
    dur = pd.to_numeric(x["dur"], errors="coerce").fillna(0.0).to_numpy(dtype=np.float64)
    event_values(x, df).column(dur, "dur", lo=0.0, hi=MAX_SECONDS * 1e6)
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
    rid, regions = region_table(name, cat)
    order = np.lexsort((-end, start, loc))
    ev_loc, ev_t, ev_k, ev_r = nest_intervals(loc[order], start[order], end[order], rid[order])
    damage = Damage()
    p2p = messages(df, span, proc, thr, loc_index, t0, ev_loc, ev_t, damage)
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
