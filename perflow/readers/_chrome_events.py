"""The Chrome trace reader's event kinds: processes and threads, region names, message flows, value checks.

:mod:`perflow.readers.chrome` assembles the trace's tables from these:

* :func:`locations` and :func:`map_locations`: the (process, thread) of each
  (file, pid, tid), as the reader's docstring describes;
* :func:`region_table`: region definitions from event names and categories
  (viztracer's ``func (file.py:12)``, MPI calls, PyTorch GPU categories);
* :func:`messages`: ``s``/``f`` flow events of category ``message`` as sends
  and receives placed among the region events;
* :class:`EventValues` and :func:`check_times`: value checks whose errors
  name the event's own file and number.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import FormatError
from ..kinds import P2P, mpi_class
from ._common import clean_text
from ._values import Values

__all__ = ["locations", "map_locations", "region_table", "messages", "EventValues", "event_values", "check_times"]

RANK_RE = re.compile(r"rank\D{0,3}(\d+)", re.IGNORECASE)
SRC_RE = re.compile(r"^(.*\S) \((.+):(\d+)\)$")


def locations(df: pd.DataFrame, files: list[Path], ranks: list[int], names: dict[tuple[int, Any], str]):  # type: ignore[no-untyped-def]
    keys = df[["file", "pid_k", "tid_k"]].drop_duplicates()
    proc: dict[tuple[int, Any], int] = {}
    if len(files) > 1:
        for fi, pid in keys[["file", "pid_k"]].drop_duplicates().itertuples(index=False):
            proc[(fi, pid)] = ranks[fi]
    else:
        pids = sorted({p for p in keys["pid_k"]}, key=lambda x: (isinstance(x, str), x))
        nm = [names.get((0, p), "") for p in pids]
        found = [RANK_RE.search(n) for n in nm]
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


def map_locations(frame: pd.DataFrame, proc: dict, thr: dict) -> pd.DataFrame:  # type: ignore[type-arg]
    """Add ``process`` and ``thread`` columns to rows keyed by (file, pid_k, tid_k) (NaN when unknown)."""
    keys = pd.DataFrame(
        [(f, p, t, proc[(f, p)], i) for (f, p, t), i in thr.items()],
        columns=["file", "pid_k", "tid_k", "process", "thread"],
    )
    out = frame.drop(columns=[c for c in ("process", "thread") if c in frame.columns])
    out = out.reset_index().merge(keys, on=["file", "pid_k", "tid_k"], how="left").set_index("index")
    return out


class EventValues(Values):
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


def event_values(rows: pd.DataFrame, df: pd.DataFrame) -> EventValues:
    return EventValues(rows, df)


def check_times(span: pd.DataFrame, ts: np.ndarray, df: pd.DataFrame) -> None:
    """Time stamps finite and not isolated from the rest of the run (a ts of -1e18 would collapse every duration)."""
    chk = event_values(span, df)
    chk.column(ts, "ts", lo=None)
    chk.span(ts, str, unit=1e-6, field="ts")


def region_table(name: np.ndarray, cat: np.ndarray) -> tuple[np.ndarray, pd.DataFrame]:
    key = pd.MultiIndex.from_arrays(
        [pd.Series(name).fillna("<unnamed>").astype(str), pd.Series(cat).fillna("").astype(str)]
    )
    codes, uniq = pd.factorize(key)
    rows = []
    for n, c in uniq:
        n, c = clean_text(n), clean_text(c)
        cl = c.lower()
        file, line = "", 0
        m = SRC_RE.match(n)
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


def messages(df, span, proc, thr, loc_index, t0, ev_loc, ev_t, damage) -> dict[str, np.ndarray]:  # type: ignore[no-untyped-def]
    fl = df[df["ph"].isin(["s", "f"]) & (df["cat"] == "message")].copy()
    cols = ("location", "time", "kind", "peer", "comm", "tag", "bytes", "request", "pos")
    empty = {c: np.zeros(0) for c in cols}  # times in microseconds since t0 until the caller converts
    if fl.empty:
        return empty
    fl = map_locations(fl, proc, thr).dropna(subset=["process", "thread"])
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
