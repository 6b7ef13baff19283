"""Write a trace-backed PAG as Chrome Trace Event JSON (opens in Perfetto UI and chrome://tracing).

* every region instance is a complete event (``ph: "X"``) on ``pid`` =
  process, ``tid`` = thread, with ``cat`` = the vertex kind and
  ``args.vertex`` = the vertex id;
* every matched message is a flow (``ph: "s"`` at the send on the sender's
  thread, ``ph: "f"``, ``bp: "e"`` at the receive on the receiver's thread),
  category ``message``, with ``args.bytes`` and ``args.tag``;
* ``annotations`` (e.g. wait states found by an analysis pass) are async
  events (``ph: "b"``/``"e"``, category ``annotation``) on the same
  process and thread, so that they show as extra tracks without breaking the
  nesting of the region events;
* ``M`` events name the processes (``rank N``) and threads.

Collective byte counts are not written (Chrome traces have no place for them).

Times are written in microseconds (``ts``, ``dur``); :mod:`perflow.readers.chrome`
reads the file back into the same region instances and messages.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._atomic import atomic_path
from ..errors import PAGError
from ..pag.pag import PAG

__all__ = ["to_chrome", "chrome_events"]

_US = 1e6
_ANNOTATION_COLUMNS = ("process", "thread", "start", "end", "name")


def _records(df: pd.DataFrame) -> str:
    """A frame as JSON records without the enclosing brackets ('' when empty)."""
    if df.empty:
        return ""
    return df.to_json(orient="records", double_precision=15)[1:-1]


def chrome_events(pag: PAG, annotations: pd.DataFrame | None = None) -> list[str]:
    """The trace's events as JSON fragments (comma-joined records per event kind)."""
    tr = pag.trace
    if tr is None:
        raise PAGError("to_chrome needs a trace-backed PAG (read from a trace, or built with TraceBuilder/synthetic)")
    iv = tr.intervals
    names = pag.vertex_table["name"].astype(str).to_numpy()
    kinds = pag.vertex_table["kind"].astype(str).to_numpy()
    v = iv["vertex"].to_numpy()
    enter = iv["enter"].to_numpy(dtype=np.float64)
    parts = []
    x = pd.DataFrame(
        {
            "ph": "X",
            "name": names[v],
            "cat": kinds[v],
            "pid": iv["process"].to_numpy(np.int64),
            "tid": iv["thread"].to_numpy(np.int64),
            "ts": enter * _US,
            "dur": (iv["leave"].to_numpy(dtype=np.float64) - enter) * _US,
            "args": [{"vertex": int(k)} for k in v],
        }
    )
    parts.append(_records(x))
    msg = tr.messages
    if len(msg):
        ids = np.arange(len(msg))
        args = [{"bytes": int(b), "tag": int(t)} for b, t in zip(msg["bytes"].to_numpy(), msg["tag"].to_numpy())]
        s = pd.DataFrame(
            {
                "ph": "s",
                "name": "message",
                "cat": "message",
                "id": ids,
                "pid": msg["send_process"].to_numpy(np.int64),
                "tid": msg["send_thread"].to_numpy(np.int64),
                "ts": msg["send_time"].to_numpy(np.float64) * _US,
                "args": args,
            }
        )
        f = pd.DataFrame(
            {
                "ph": "f",
                "bp": "e",
                "name": "message",
                "cat": "message",
                "id": ids,
                "pid": msg["recv_process"].to_numpy(np.int64),
                "tid": msg["recv_thread"].to_numpy(np.int64),
                "ts": msg["recv_time"].to_numpy(np.float64) * _US,
            }
        )
        parts += [_records(s), _records(f)]
    if annotations is not None and len(annotations):
        missing = [c for c in _ANNOTATION_COLUMNS if c not in annotations.columns]
        if missing:
            raise PAGError(
                f"annotations lack the columns {missing}; need {list(_ANNOTATION_COLUMNS)} (+ optional args)"
            )
        a = annotations.reset_index(drop=True)
        ids = np.arange(len(a))
        extra = a["args"].tolist() if "args" in a.columns else [{} for _ in ids]
        base = {
            "cat": "annotation",
            "name": a["name"].astype(str).to_numpy(),
            "id": ids,
            "pid": a["process"].to_numpy(np.int64),
            "tid": a["thread"].to_numpy(np.int64),
        }
        b = pd.DataFrame(
            {
                "ph": "b",
                **base,
                "ts": a["start"].to_numpy(np.float64) * _US,
                "args": [x if isinstance(x, dict) else {"value": x} for x in extra],
            }
        )
        e = pd.DataFrame({"ph": "e", **base, "ts": a["end"].to_numpy(np.float64) * _US})
        parts += [_records(b), _records(e)]
    locs = iv[["process", "thread"]].drop_duplicates()
    meta: list[dict[str, Any]] = []
    for p in sorted(set(locs["process"].tolist())):
        meta.append({"ph": "M", "name": "process_name", "pid": int(p), "args": {"name": f"rank {int(p)}"}})
        meta.append({"ph": "M", "name": "process_sort_index", "pid": int(p), "args": {"sort_index": int(p)}})
    for p, t in locs.itertuples(index=False):
        meta.append(
            {"ph": "M", "name": "thread_name", "pid": int(p), "tid": int(t), "args": {"name": f"thread {int(t)}"}}
        )
    parts.append(json.dumps(meta)[1:-1])
    return [p for p in parts if p]


def to_chrome(pag: PAG, path: str | os.PathLike[str], *, annotations: pd.DataFrame | None = None) -> Path:
    """Write a trace-backed PAG as a Chrome trace JSON file.

    Parameters
    ----------
    pag : PAG
        A PAG with a trace (``pag.trace`` is not None).
    path : path-like
        The output file (``.json``).
    annotations : pandas.DataFrame, optional
        Extra intervals to show, one row each: ``process``, ``thread``,
        ``start``, ``end`` (seconds), ``name`` and optionally ``args`` (a dict).

    Returns
    -------
    Path
        The file written.
    """
    out = Path(path)
    body = ",".join(chrome_events(pag, annotations))
    other = {k: v for k, v in pag.attrs.items() if isinstance(v, str | int | float | bool)}

    with atomic_path(out) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        fh.write('{"traceEvents":[')
        fh.write(body)
        fh.write('],"displayTimeUnit":"ns","otherData":')
        fh.write(json.dumps({"generator": "perflow", **other}))
        fh.write("}")
    return out
