"""Nsight Systems SQLite exports (``nsys export --type sqlite``): CUDA work, runtime API, NVTX and OS runtime.

Read with the standard library's :mod:`sqlite3` (read-only). One file, or
several (a directory, a glob or a list: e.g. one report per MPI rank, aligned
on their session start times).

What is read
------------
* ``CUPTI_ACTIVITY_KIND_KERNEL``, ``..._MEMCPY``, ``..._MEMSET``: device work
  on (device, stream) locations; kernels named by their demangled name
  (``kernel_names="short"`` or ``"mangled"`` for the others), copies
  ``[CUDA memcpy Host-to-Device]`` etc. with their bytes (``gpu_bytes``).
* ``CUPTI_ACTIVITY_KIND_RUNTIME``: CUDA runtime and driver calls on their host
  thread, named without nsys's version suffix (``cudaMalloc_v3020`` is
  ``cudaMalloc``; nsys's duplicate "CUDA backtrace" rows are skipped); a call and the
  work with its correlation id are linked. Calls that wait for the device are
  those named as such (``cudaDeviceSynchronize``, a blocking ``cudaMemcpy``,
  ...: :func:`perflow.readers._gputrace.is_waiting_call`) and those that
  ``CUPTI_ACTIVITY_KIND_SYNCHRONIZATION`` lists.
* ``NVTX_EVENTS``: push/pop and start/end ranges (on the thread that started
  them) become regions (``nvtx=False`` skips them); marks are skipped. MPI
  ranges (``nsys --trace=mpi``) are MPI calls by name.
* ``OSRT_API``: OS runtime calls (``osrt=False`` skips them).
* ``ThreadNames``, ``TARGET_INFO_GPU``, ``TARGET_INFO_SESSION_START_TIME``.

Processes are the profiled processes (``globalPid``): numbered by the rank
in a thread name such as ``MPI Rank 3`` when every process has one, else in
order of file and PID. Threads are numbered per process in TID order (the
main thread first). See :mod:`perflow.readers._gputrace` for the locations,
call paths and messages built from these tables.
"""

from __future__ import annotations

import glob as _glob
import os
import re
import sqlite3
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import FormatError, TraceError
from ..pag.pag import PAG
from ._common import head_bytes
from ._gputrace import Timeline, is_waiting_call, timeline_pag
from ._values import Values

FORMAT = "nsys"
DESCRIPTION = "Nsight Systems SQLite export (nsys export --type sqlite): CUDA work, runtime API, NVTX, OS runtime"

_MAGIC = b"SQLite format 3\x00"
_MARKERS = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS", "OSRT_API")
#: every table the reader reads (each must be a table: nsys writes no views)
_READ_TABLES = (
    *_MARKERS,
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    "ENUM_CUDA_MEMCPY_OPER",
    "StringIds",
    "TARGET_INFO_GPU",
    "TARGET_INFO_SESSION_START_TIME",
    "ThreadNames",
    "META_DATA_EXPORT",
)
_RANK_RE = re.compile(r"rank\D{0,3}(\d+)", re.IGNORECASE)
#: copyKind (CUPTI_ACTIVITY_MEMCPY_KIND) labels when the file has no ENUM_CUDA_MEMCPY_OPER table
_COPY_KINDS = {
    0: "Unknown",
    1: "Host-to-Device",
    2: "Device-to-Host",
    3: "Host-to-Array",
    4: "Array-to-Host",
    5: "Array-to-Array",
    6: "Array-to-Device",
    7: "Device-to-Array",
    8: "Device-to-Device",
    9: "Host-to-Host",
    10: "Peer-to-Peer",
}
_VERSION_SUFFIX = re.compile(r"_v\d+(?=(_ptsz|_ptds)?$)")  # cudaMalloc_v3020 -> cudaMalloc
_NVTX_RANGES = (59, 60, 70, 71)  # NvtxPushPopRange, NvtxStartEndRange and their NVTXT forms
_KERNEL_NAMES = {"demangled": "demangledName", "short": "shortName", "mangled": "mangledName"}


def _files(path: Path | str | Sequence[Path | str]) -> list[Path]:
    if isinstance(path, list | tuple):
        return [Path(p) for p in path]
    p = Path(path)
    if p.is_dir():
        return sorted(x for x in p.iterdir() if x.is_file() and head_bytes(x, 16) == _MAGIC and _tables(x))
    if any(c in str(path) for c in "*?[") and not p.exists():
        return [Path(x) for x in sorted(_glob.glob(str(path)))]
    return [p]


def _connect(f: Path) -> sqlite3.Connection:
    """Open ``f`` read-only through a URI that names exactly it (``%``, ``#``, ``?`` in the name are quoted)."""
    uri = "file:" + urllib.parse.quote(os.path.abspath(f), safe="/") + "?mode=ro&immutable=1"
    try:
        con = sqlite3.connect(uri, uri=True)
        con.text_factory = lambda b: b.decode("utf-8", "backslashreplace")  # damaged text is shown, not fatal
        return con
    except sqlite3.Error as exc:  # pragma: no cover - only for paths sqlite cannot open at all
        raise FormatError(f, f"cannot open as SQLite ({exc})") from None


def _tables(f: Path) -> set[str]:
    """Table names of an SQLite file holding nsys tables (empty when it is not one)."""
    try:
        con = _connect(f)
        try:
            objects = dict(con.execute("SELECT name, type FROM sqlite_master WHERE type IN ('table', 'view')"))
        finally:
            con.close()
    except UnicodeDecodeError:  # sqlite's own message quotes the damaged schema, which is not UTF-8
        raise FormatError(f, "damaged SQLite schema (its text is not UTF-8)") from None
    except (sqlite3.Error, FormatError):
        return set()
    names = {n for n, t in objects.items() if t == "table"}
    if not ("StringIds" in names and any(m in objects for m in _MARKERS)):
        return set()
    views = sorted(n for n, t in objects.items() if t == "view" and (n in _MARKERS or n in _READ_TABLES))
    if views:  # nsys writes tables: a view in their place can hide or invent rows
        raise FormatError(f, f"{views[0]} is a view, not a table: this is not an export as nsys writes it")
    return names


def detect(path: Path) -> bool:
    """An SQLite file (or a directory of them) with nsys's ``StringIds`` and CUPTI, NVTX or OS runtime tables."""
    files = _files(path) if path.is_dir() else [path]
    return bool(files) and files[0].is_file() and head_bytes(files[0], 16) == _MAGIC and bool(_tables(files[0]))


def _query(con: sqlite3.Connection, f: Path, table: str, cols: list[str], have: set[str]) -> pd.DataFrame:
    """Columns of a table (those it lacks are absent from the result; no table: no rows)."""
    if table not in have:
        return pd.DataFrame(columns=cols)
    present = [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]
    use = [c for c in cols if c in present]
    if not use:
        return pd.DataFrame(columns=cols)
    try:
        quoted = ", ".join(f'"{c}"' for c in use)
        cur = con.execute(f'SELECT rowid, {quoted} FROM "{table}"')
        return pd.DataFrame(cur.fetchall(), columns=["_rowid", *use])
    except sqlite3.Error as exc:
        raise FormatError(f, f"cannot read table {table} ({exc})", where=table) from None


def _row(df: pd.DataFrame, i: int) -> str:
    """How an error names row ``i`` of a queried frame: its SQLite rowid."""
    return f"rowid {int(df['_rowid'].iat[i])}" if "_rowid" in df.columns else f"row {i}"


def _ints(df: pd.DataFrame, col: str, f: Path, table: str, default: int | None = None) -> np.ndarray:
    if col not in df.columns:
        if default is None:
            raise FormatError(f, f"table {table} lacks the column {col!r}", where=table)
        return np.full(len(df), default, dtype=np.int64)
    v = pd.to_numeric(df[col], errors="coerce")
    if default is None and v.isna().any():
        r = _row(df, int(np.flatnonzero(v.isna().to_numpy())[0]))
        raise FormatError(f, f"table {table}, {r}: {col} is missing or not a number", where=f"{table} {r}")
    v = v.fillna(-1 if default is None else default)
    # exactly: a REAL 1e300 or 1.5 in an INTEGER column is refused, never cast (and wrapped) to int64
    return Values(f).int_column(v.to_numpy(), f"{col}", lambda i: f"table {table}, {_row(df, i)}", lo=None)


def _times(df: pd.DataFrame, f: Path, table: str) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (whole nanoseconds since the session started: >= 0, start <= end)."""
    s, e = _ints(df, "start", f, table), _ints(df, "end", f, table)
    chk = Values(f)

    def rec(i: int) -> str:
        return f"table {table}, {_row(df, i)}"

    chk.int_column(s, "start", rec)
    chk.intervals(s, e, rec)
    return s, e


def _strings(con: sqlite3.Connection, f: Path, have: set[str]) -> dict[int, str]:
    df = _query(con, f, "StringIds", ["id", "value"], have)
    return dict(zip(_ints(df, "id", f, "StringIds").tolist(), df["value"].astype(str).tolist())) if len(df) else {}


def _name(df: pd.DataFrame, col: str, strings: dict[int, str], f: Path, table: str) -> list[str]:
    out = []
    for i, s in enumerate(_ints(df, col, f, table).tolist()):
        v = strings.get(s)
        if v is None:
            r = _row(df, i)
            raise FormatError(f, f"table {table}, {r}: string id {s} is not in StringIds", where=f"{table} {r}")
        out.append(v)
    return out


def _read_file(f: Path, kernel_names: str, nvtx: bool, osrt: bool) -> dict[str, Any]:
    """One file's host calls and device work (ticks: ns of its session), keyed by global process/thread ids."""
    have = _tables(f)
    if not have:
        raise FormatError(f, "not an Nsight Systems SQLite export (no StringIds with CUPTI, NVTX or OS runtime tables)")
    con = _connect(f)
    try:
        return _read_tables(con, f, have, kernel_names, nvtx, osrt)
    except sqlite3.Error as exc:
        raise FormatError(f, f"corrupt SQLite data ({exc})") from None
    except UnicodeDecodeError:
        raise FormatError(f, "corrupt SQLite data (text that is not UTF-8 where SQLite keeps its own)") from None
    finally:
        con.close()


def _read_tables(con, f, have, kernel_names, nvtx, osrt) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    strings = _strings(con, f, have)
    host: list[pd.DataFrame] = []
    rt = _query(
        con,
        f,
        "CUPTI_ACTIVITY_KIND_RUNTIME",
        ["start", "end", "eventClass", "globalTid", "correlationId", "nameId"],
        have,
    )
    if len(rt) and "eventClass" in rt.columns:
        rt = rt[pd.to_numeric(rt["eventClass"], errors="coerce").isin([0, 1])].reset_index(drop=True)
    if len(rt):
        s, e = _times(rt, f, "CUPTI_ACTIVITY_KIND_RUNTIME")
        names = _name(rt, "nameId", strings, f, "CUPTI_ACTIVITY_KIND_RUNTIME")
        names = [_VERSION_SUFFIX.sub("", n) for n in names]
        host.append(
            pd.DataFrame(
                {
                    "gtid": _ints(rt, "globalTid", f, "CUPTI_ACTIVITY_KIND_RUNTIME"),
                    "start": s,
                    "end": e,
                    "name": names,
                    "paradigm": "cuda",
                    "corr": _ints(rt, "correlationId", f, "CUPTI_ACTIVITY_KIND_RUNTIME", -1),
                }
            )
        )
    if nvtx:
        nv = _query(con, f, "NVTX_EVENTS", ["start", "end", "eventType", "text", "textId", "globalTid"], have)
        if len(nv):
            nv = nv[pd.to_numeric(nv["eventType"], errors="coerce").isin(_NVTX_RANGES) & nv["end"].notna()]
            nv = nv.reset_index(drop=True)
        if len(nv):
            s, e = _times(nv, f, "NVTX_EVENTS")
            tid = _ints(nv, "textId", f, "NVTX_EVENTS", -1)
            text = nv["text"] if "text" in nv.columns else pd.Series([None] * len(nv))
            names = [t if isinstance(t, str) else strings.get(int(i), "<unnamed range>") for t, i in zip(text, tid)]
            host.append(
                pd.DataFrame(
                    {
                        "gtid": _ints(nv, "globalTid", f, "NVTX_EVENTS"),
                        "start": s,
                        "end": e,
                        "name": names,
                        "paradigm": "nvtx",
                        "corr": -1,
                    }
                )  # fmt: skip
            )
    if osrt:
        os_ = _query(con, f, "OSRT_API", ["start", "end", "eventClass", "globalTid", "nameId"], have)
        if len(os_) and "eventClass" in os_.columns:  # not the "profiling started/finished" markers
            os_ = os_[pd.to_numeric(os_["eventClass"], errors="coerce") == 27].reset_index(drop=True)
        if len(os_):
            s, e = _times(os_, f, "OSRT_API")
            names = _name(os_, "nameId", strings, f, "OSRT_API")
            host.append(
                pd.DataFrame(
                    {
                        "gtid": _ints(os_, "globalTid", f, "OSRT_API"),
                        "start": s,
                        "end": e,
                        "name": names,
                        "paradigm": "osrt",
                        "corr": -1,
                    }
                )  # fmt: skip
            )
    hcols = ["gtid", "start", "end", "name", "paradigm", "corr"]
    h = pd.concat(host, ignore_index=True) if host else pd.DataFrame(columns=hcols)
    gpu = _device_work(con, f, have, strings, kernel_names)
    sync = _query(con, f, "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", ["correlationId", "globalPid"], have)
    sync_keys = set()
    if len(sync):
        sp = _ints(sync, "globalPid", f, "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", 0) >> 24 & 0xFFFFFF
        sync_keys = set(
            zip(sp.tolist(), _ints(sync, "correlationId", f, "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION").tolist())
        )
    tn = _query(con, f, "ThreadNames", ["nameId", "globalTid"], have)
    thread_names = {}
    if len(tn):
        for g, n in zip(
            _ints(tn, "globalTid", f, "ThreadNames").tolist(), _ints(tn, "nameId", f, "ThreadNames").tolist()
        ):
            if n in strings:
                thread_names[g & 0xFFFFFFFFFFFF] = strings[n]
    gi = _query(con, f, "TARGET_INFO_GPU", ["id", "name"], have)
    devices = dict(zip(_ints(gi, "id", f, "TARGET_INFO_GPU").tolist(), gi["name"].astype(str))) if len(gi) else {}
    st = _query(con, f, "TARGET_INFO_SESSION_START_TIME", ["utcEpochNs"], have)
    utc = int(_ints(st, "utcEpochNs", f, "TARGET_INFO_SESSION_START_TIME")[0]) if len(st) else None
    meta = _query(
        con, f, "EXPORT_META_DATA" if "EXPORT_META_DATA" in have else "META_DATA_EXPORT", ["name", "value"], have
    )
    version = (
        dict(zip(meta["name"].astype(str), meta["value"].astype(str))).get("EXPORT_PRODUCT_VERSION", "")
        if len(meta)
        else ""
    )
    return {"host": h, "gpu": gpu, "sync": sync_keys, "thread_names": thread_names, "devices": devices, "utc": utc,
            "version": version}  # fmt: skip


def _device_work(con, f, have, strings, kernel_names) -> pd.DataFrame:  # type: ignore[no-untyped-def]
    parts = []
    base = ["start", "end", "deviceId", "streamId", "correlationId", "globalPid"]
    kcol = _KERNEL_NAMES[kernel_names]
    k = _query(con, f, "CUPTI_ACTIVITY_KIND_KERNEL", [*base, *dict.fromkeys([kcol, "demangledName"])], have)
    if len(k):
        names = _name(k, kcol if kcol in k.columns else "demangledName", strings, f, "CUPTI_ACTIVITY_KIND_KERNEL")
        parts.append((k, "CUPTI_ACTIVITY_KIND_KERNEL", "kernel", names, 0))
    labels = dict(_COPY_KINDS)
    en = _query(con, f, "ENUM_CUDA_MEMCPY_OPER", ["id", "label"], have)
    if len(en):
        labels.update(zip(_ints(en, "id", f, "ENUM_CUDA_MEMCPY_OPER").tolist(), en["label"].astype(str)))
    m = _query(con, f, "CUPTI_ACTIVITY_KIND_MEMCPY", [*base, "bytes", "copyKind"], have)
    if len(m):
        ck = _ints(m, "copyKind", f, "CUPTI_ACTIVITY_KIND_MEMCPY", 0)
        names = [f"[CUDA memcpy {labels.get(c, f'kind {c}')}]" for c in ck.tolist()]
        parts.append((m, "CUPTI_ACTIVITY_KIND_MEMCPY", "memcpy", names, None))
    ms = _query(con, f, "CUPTI_ACTIVITY_KIND_MEMSET", [*base, "bytes"], have)
    if len(ms):
        parts.append((ms, "CUPTI_ACTIVITY_KIND_MEMSET", "memset", ["[CUDA memset]"] * len(ms), None))
    out = []
    for df, table, kind, names, nbytes in parts:
        s, e = _times(df, f, table)
        out.append(
            pd.DataFrame(
                {
                    "gpid": _ints(df, "globalPid", f, table),
                    "device": _ints(df, "deviceId", f, table, 0),
                    "stream": _ints(df, "streamId", f, table, 0),
                    "start": s,
                    "end": e,
                    "name": names,
                    "kind": kind,
                    "corr": _ints(df, "correlationId", f, table, -1),
                    "bytes": _ints(df, "bytes", f, table, 0) if nbytes is None else 0,
                }
            )
        )
    cols = ["gpid", "device", "stream", "start", "end", "name", "kind", "corr", "bytes"]
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=cols)


def read(
    path: Path | str | Sequence[Path | str],
    *,
    kernel_names: str = "demangled",
    nvtx: bool = True,
    osrt: bool = True,
) -> PAG:
    """Read Nsight Systems SQLite exports into a trace-backed PAG with GPU streams as locations.

    Parameters
    ----------
    path : path-like, glob pattern or list of paths
        One ``.sqlite`` export, or several (a directory, a glob, a list).
    kernel_names : {"demangled", "short", "mangled"}
        Which of nsys's kernel names to use.
    nvtx, osrt : bool
        Read NVTX ranges and OS runtime calls (on by default).

    Returns
    -------
    PAG
    """
    if kernel_names not in _KERNEL_NAMES:
        raise ValueError(f"kernel_names must be one of {', '.join(_KERNEL_NAMES)}, not {kernel_names!r}")
    files = _files(path)
    if not files:
        raise FormatError(path, "no Nsight Systems SQLite exports found")
    for f in files:
        if not f.is_file():
            raise FormatError(f, "no such file")
        if head_bytes(f, 16) != _MAGIC:
            raise FormatError(f, "not an SQLite file (nsys export --type sqlite writes one)")
    per_file = [_read_file(f, kernel_names, nvtx, osrt) for f in files]
    src = files[0] if len(files) == 1 else files[0].parent
    try:
        return timeline_pag(_timeline(per_file, files, src))
    except TraceError as exc:
        raise FormatError(src, f"inconsistent events: {exc}") from None


def _timeline(per_file: list[dict[str, Any]], files: list[Path], src: Path) -> Timeline:
    """Number processes and threads across the files and align their clocks."""
    utcs = [d["utc"] for d in per_file]
    known = [u for u in utcs if u is not None]
    base = min(known) if known else 0
    hosts, gpus = [], []
    names: dict[tuple[int, int], str] = {}  # (file, gtid) -> thread name
    for fi, d in enumerate(per_file):
        off = (d["utc"] - base) if d["utc"] is not None else 0
        h = d["host"].copy()
        h["file"], h["start"], h["end"] = fi, h["start"].astype(np.int64) + off, h["end"].astype(np.int64) + off
        gt = h["gtid"].to_numpy(np.int64)
        h["pid"], h["tid"] = (gt >> 24) & 0xFFFFFF, gt & 0xFFFFFF
        h["sync"] = [
            (p, c) in d["sync"] or is_waiting_call(n)
            for p, c, n in zip(h["pid"].tolist(), h["corr"].tolist(), h["name"])
        ]
        g = d["gpu"].copy()
        g["file"], g["start"], g["end"] = fi, g["start"].astype(np.int64) + off, g["end"].astype(np.int64) + off
        g["pid"] = (g["gpid"].to_numpy(np.int64) >> 24) & 0xFFFFFF
        hosts.append(h)
        gpus.append(g)
        for gt, n in d["thread_names"].items():
            names[(fi, gt & 0xFFFFFFFFFFFF)] = n
    host = pd.concat(hosts, ignore_index=True)
    gpu = pd.concat(gpus, ignore_index=True)
    procs = pd.concat([host[["file", "pid"]], gpu[["file", "pid"]]]).drop_duplicates().sort_values(["file", "pid"])
    proc_keys = list(procs.itertuples(index=False, name=None))
    rank: dict[tuple[int, int], int] = {}
    for (fi, gt), n in names.items():
        m = _RANK_RE.search(n)
        if m:
            rank.setdefault((fi, (gt >> 24) & 0xFFFFFF), int(m[1]))
    if proc_keys and all(k in rank for k in proc_keys) and len({rank[k] for k in proc_keys}) == len(proc_keys):
        proc_of = {k: rank[k] for k in proc_keys}
    else:
        proc_of = {k: i for i, k in enumerate(proc_keys)}
    host["process"] = [proc_of[k] for k in zip(host["file"], host["pid"])]
    gpu["process"] = [proc_of[k] for k in zip(gpu["file"], gpu["pid"])]
    # threads per process in TID order, the main thread (TID = PID) first
    th = host[["process", "file", "pid", "tid"]].drop_duplicates()
    th = th.assign(main=th["tid"] != th["pid"]).sort_values(["process", "main", "tid"])
    th["thread"] = th.groupby("process").cumcount()
    host = host.merge(th[["process", "tid", "thread"]], on=["process", "tid"], how="left")
    tnames = {
        (int(p), int(t)): names.get((int(fi), (int(pid) << 24) | int(tid)), f"tid {int(tid)}")
        for p, fi, pid, tid, t in th[["process", "file", "pid", "tid", "thread"]].itertuples(index=False)
    }
    devices = {}
    for fi, d in enumerate(per_file):
        for p in {v for k, v in proc_of.items() if k[0] == fi}:
            devices.update({(p, int(dev)): nm for dev, nm in d["devices"].items()})
    versions = sorted({d["version"] for d in per_file if d["version"]})
    return Timeline(
        host=host.assign(corr=host["corr"].astype(np.int64)),
        gpu=gpu,
        tick=1e-9,
        api="cuda",
        thread_names=tnames,
        device_names=devices,
        attrs={"source": str(src), "creator": f"Nsight Systems {', '.join(versions)}".strip(), "files": len(files)},
    )
