"""rocprof CSV traces (AMD ROCm): kernel dispatches, memory copies, HIP/HSA API calls and ROCTx ranges.

Accepted: one CSV file, or a directory holding them (searched two levels
down: rocprofv3 writes ``<host>/<pid>_kernel_trace.csv`` and friends). A
file's role comes from its header, so the three generations read alike:

* **kernel dispatches**: rocprof (v1) ``--timestamp on`` output (``KernelName``,
  ``gpu-id``, ``queue-id``, ``pid``, ``tid``, ``BeginNs``, ``EndNs``; also with
  Omniperf's renamed header), rocprofv2 (``Kernel_Name``, ``GPU_ID``,
  ``Queue_ID``, ``PID``, ``Start_Timestamp``, ...) and rocprofv3
  ``kernel_trace.csv`` (``Agent_Id``, ``Queue_Id``, ``Stream_Id``,
  ``Kernel_Name``, ``Correlation_Id``, ``Start_Timestamp``, ``End_Timestamp``);
* **memory copies**: rocprofv3 ``memory_copy_trace.csv`` (``Direction``,
  ``Stream_Id``, source and destination agents; bytes when a ``Size`` column
  is there);
* **API calls**: rocprofv3 ``hip_api_trace.csv``, ``hsa_api_trace.csv``,
  ``marker_api_trace.csv`` (``Domain``, ``Function``, ``Process_Id``,
  ``Thread_Id``, ``Correlation_Id``, times). ROCTx ranges become regions,
  instantaneous markers are skipped.

Locations are (agent, stream) pairs (the queue when the file has no stream
column; copies without one are on a ``copy engine`` location of their
device); kernel names lose rocprof's ``[clone .kd]``/``.kd`` suffix; times
are nanoseconds. A HIP call and the dispatch or copy with its correlation id
are linked, and HIP calls that block (``hipDeviceSynchronize``, ``hipMemcpy``,
...) wait for the device: see :mod:`perflow.readers._gputrace`. Processes
are the PIDs (of the rows, else of the ``<pid>_`` file-name prefix),
numbered in increasing order. rocprof's JSON outputs are not read here
(rocprof v1's ``results.json`` is a Chrome trace: the ``chrome`` reader).
"""

from __future__ import annotations

import re
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

FORMAT = "rocprof"
DESCRIPTION = "rocprof, rocprofv2 and rocprofv3 CSV traces: kernel dispatches, memory copies, HIP/HSA API, ROCTx"

#: column aliases (lower case) per field
_ALIAS = {
    "start": ("start_timestamp", "beginns"),
    "end": ("end_timestamp", "endns"),
    "name": ("kernel_name", "kernelname"),
    "device": ("agent_id", "gpu_id", "gpu-id"),
    "stream": ("stream_id",),
    "queue": ("queue_id", "queue-id"),
    "process": ("process_id", "pid"),
    "thread": ("thread_id", "tid"),
    "corr": ("correlation_id",),
    "bytes": ("size", "bytes"),
}
_PID_PREFIX = re.compile(r"^(\d+)_")
_KD_SUFFIX = re.compile(r"\s*(\[clone \.kd\]|\(\.kd\)|\.kd)$")
_DOMAIN_PARADIGM = (("HIP_", "hip"), ("HSA_", "hsa"), ("MARKER_", "roctx"), ("RCCL_", "rccl"))


def _header(f: Path) -> list[str]:
    head = head_bytes(f, 4096)
    if not head or b"\0" in head:
        return []
    line = head.split(b"\n", 1)[0].decode("utf-8", "replace").strip()
    return [c.strip().strip('"').lower() for c in line.split(",")]


def _col(cols: list[str], field: str) -> str | None:
    return next((a for a in _ALIAS[field] if a in cols), None)


def _role(cols: list[str]) -> str | None:
    """``kernel``, ``copy`` or ``api`` from a header (None for other rocprof files and non-rocprof CSV)."""
    if not cols or _col(cols, "start") is None or "end_timestamp" not in cols and "endns" not in cols:
        return None
    if _col(cols, "name") is not None:
        return "kernel"
    if "direction" in cols:
        return "copy"
    if "domain" in cols and "function" in cols:
        return "api"
    return None


def _files(path: Path | str | Sequence[Path | str]) -> list[tuple[Path, str]]:
    if isinstance(path, list | tuple):
        cand = [Path(p) for p in path]
    else:
        p = Path(path)
        cand = sorted({*p.glob("*.csv"), *p.glob("*/*.csv"), *p.glob("*/*/*.csv")}) if p.is_dir() else [p]
    out = []
    for f in cand:
        r = _role(_header(f)) if f.is_file() else None
        if r is not None:
            out.append((f, r))
    return out


def detect(path: Path) -> bool:
    """A CSV file (or a directory of them) whose header is a rocprof kernel, copy or API trace's."""
    if path.is_dir():
        return bool(_files(path))
    return path.suffix.lower() == ".csv" and _role(_header(path)) is not None


def _load(f: Path) -> pd.DataFrame:
    try:
        df = pd.read_csv(f, dtype=str, keep_default_na=False, skip_blank_lines=True)
    except (OSError, ValueError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise FormatError(f, f"not a readable CSV file ({exc})") from None
    df.columns = [str(c).strip().lower() for c in df.columns]
    return df


def _num(df: pd.DataFrame, col: str | None, f: Path, default: int | None = None) -> np.ndarray:
    """Integers of a column (trailing integers of strings such as ``Agent 2``); ``default`` when absent."""
    if col is None:
        if default is None:  # pragma: no cover - callers pass a column that _role checked
            raise FormatError(f, "a required column is missing")
        return np.full(len(df), default, dtype=np.int64)
    s = df[col].astype(str).str.strip()
    v = pd.to_numeric(s, errors="coerce")
    if v.isna().any():
        v = v.fillna(pd.to_numeric(s.str.extract(r"(-?\d+)\s*$")[0], errors="coerce"))
    if v.isna().any():
        i = int(np.flatnonzero(v.isna().to_numpy())[0])
        raise FormatError(f, f"column {col!r} has a non-numeric value {s.iat[i]!r}", where=f"line {i + 2}")
    return v.to_numpy(np.int64)


def _line(i: int) -> str:
    return f"line {i + 2}"


def _times(df: pd.DataFrame, f: Path) -> tuple[np.ndarray, np.ndarray]:
    """Start and end time stamps (whole nanoseconds >= 0, start <= end: checked by the value layer)."""
    cols = list(df.columns)
    chk = Values(f)
    s = chk.int_column(_floats(df, _col(cols, "start"), f), "start time stamp", _line)
    e = chk.int_column(_floats(df, _col(cols, "end"), f), "end time stamp", _line)
    chk.intervals(s, e, _line)
    return s, e


def _floats(df: pd.DataFrame, col: str | None, f: Path) -> np.ndarray:
    """A column of numbers as written (not yet cast to integers: a fraction or 1e300 must be seen)."""
    if col is None:  # pragma: no cover - callers pass a column that _role checked
        raise FormatError(f, "a required column is missing")
    s = df[col].astype(str).str.strip()
    v = pd.to_numeric(s, errors="coerce")
    if v.isna().any():
        i = int(np.flatnonzero(v.isna().to_numpy())[0])
        raise FormatError(f, f"{_line(i)}: column {col!r} has a non-numeric value {s.iat[i]!r}", where=_line(i))
    return v.to_numpy()


def _check_span(per_file: list[tuple[Path, np.ndarray, np.ndarray]]) -> None:
    """No time stamp far from every other of the run (a kernel of 4,828,386 s): named by its file and line."""
    if not per_file:
        return
    t = np.concatenate([np.r_[s, e] for _, s, e in per_file]).astype(np.float64)
    owner = np.concatenate([np.full(2 * len(s), k) for k, (_, s, _) in enumerate(per_file)])
    line = np.concatenate([np.r_[np.arange(len(s)), np.arange(len(s))] for _, s, _ in per_file])

    class _Run(Values):
        def fail(self, record: str, message: str) -> Any:
            i = int(record)
            f = per_file[int(owner[i])][0]
            raise FormatError(f, f"{_line(int(line[i]))}: {message}", where=_line(int(line[i])))

    _Run(per_file[0][0]).span(t, str, unit=1e-9, field="time stamp")


def _file_pid(f: Path) -> int:
    m = _PID_PREFIX.match(f.name)
    return int(m[1]) if m else -1


def _kernels(df: pd.DataFrame, f: Path) -> pd.DataFrame:
    cols = list(df.columns)
    s, e = _times(df, f)
    stream_col = _col(cols, "stream") or _col(cols, "queue")
    names = [_KD_SUFFIX.sub("", n.strip()) for n in df[_col(cols, "name")].astype(str)]
    return pd.DataFrame(
        {
            "pid": _num(df, _col(cols, "process"), f, _file_pid(f)),
            "device": _num(df, _col(cols, "device"), f, 0),
            "stream": _num(df, stream_col, f, 0),
            "start": s,
            "end": e,
            "name": names,
            "kind": "kernel",
            "corr": _num(df, _col(cols, "corr"), f, -1),
            "bytes": 0,
        }
    )


def _copies(df: pd.DataFrame, f: Path) -> pd.DataFrame:
    cols = list(df.columns)
    s, e = _times(df, f)
    direction = df["direction"].astype(str).str.upper().str.replace("MEMORY_COPY_", "", regex=False)
    src = _num(df, "source_agent_id" if "source_agent_id" in cols else None, f, 0)
    dst = _num(df, "destination_agent_id" if "destination_agent_id" in cols else None, f, 0)
    device = np.where(direction.str.startswith("DEVICE_TO_HOST").to_numpy(), src, dst)
    label = [w.title().replace("-To-", "-to-") for w in direction.str.lower().str.replace("_to_", "-to-", regex=False)]
    return pd.DataFrame(
        {
            "pid": _num(df, _col(cols, "process"), f, _file_pid(f)),
            "device": device,
            "stream": _num(df, _col(cols, "stream"), f, -1),
            "start": s,
            "end": e,
            "name": [f"[HIP memcpy {x}]" for x in label],
            "kind": "memcpy",
            "corr": _num(df, _col(cols, "corr"), f, -1),
            "bytes": _num(df, _col(cols, "bytes"), f, 0),
        }
    )


def _api(df: pd.DataFrame, f: Path, hsa: bool) -> pd.DataFrame:
    cols = list(df.columns)
    s, e = _times(df, f)
    domain = df["domain"].astype(str).str.upper()
    paradigm = np.full(len(df), "", dtype=object)
    for prefix, par in _DOMAIN_PARADIGM:
        paradigm[domain.str.startswith(prefix).to_numpy()] = par
    keep = (paradigm != "") & ~domain.str.startswith("MARKER_CONTROL").to_numpy()
    keep &= ~((paradigm == "roctx") & (s == e))  # instantaneous markers
    if not hsa:
        keep &= paradigm != "hsa"
    names = df["function"].astype(str).str.strip().to_numpy(object)
    out = pd.DataFrame(
        {
            "pid": _num(df, _col(cols, "process"), f, _file_pid(f)),
            "tid": _num(df, _col(cols, "thread"), f, 0),
            "start": s,
            "end": e,
            "name": names,
            "paradigm": paradigm,
            "corr": _num(df, _col(cols, "corr"), f, -1),
        }
    )
    return out[keep].reset_index(drop=True)


def read(path: Path | str | Sequence[Path | str], *, hsa: bool = True) -> PAG:
    """Read rocprof CSV traces into a trace-backed PAG with GPU streams as locations.

    Parameters
    ----------
    path : path-like or list of paths
        A CSV file, or a directory of rocprof output (or a list of files).
    hsa : bool
        Read HSA API calls (when traced) besides HIP calls and ROCTx ranges.

    Returns
    -------
    PAG
    """
    files = _files(path)
    if not files:
        where = path if not isinstance(path, list | tuple) else (path[0] if path else "")
        raise FormatError(where, "no rocprof kernel, copy or API trace (CSV) found")
    gpu, host = [], []
    spans = []
    for f, role in files:
        df = _load(f)
        if role == "kernel":
            gpu.append(_kernels(df, f))
        elif role == "copy":
            gpu.append(_copies(df, f))
        else:
            host.append(_api(df, f, hsa))
        spans.append((f, *_times(df, f)))  # every row, as numbered in the file
    g_cols = ["pid", "device", "stream", "start", "end", "name", "kind", "corr", "bytes"]
    h_cols = ["pid", "tid", "start", "end", "name", "paradigm", "corr"]
    g = pd.concat(gpu, ignore_index=True) if gpu else pd.DataFrame(columns=g_cols)
    h = pd.concat(host, ignore_index=True) if host else pd.DataFrame(columns=h_cols)
    src = files[0][0] if len(files) == 1 else files[0][0].parent
    if not len(g) and not len(h):
        raise FormatError(src, "the rocprof traces hold no records")
    try:
        tl = _timeline(h, g, src, [f for f, _ in files])
        _check_span(spans)
        return timeline_pag(tl)
    except TraceError as exc:
        raise FormatError(src, f"inconsistent events: {exc}") from None


def _timeline(h: pd.DataFrame, g: pd.DataFrame, src: Path, files: list[Path]) -> Timeline:
    # rows without a process of their own (rocprofv3 kernel traces name none) belong to the only process there is
    known = sorted(set(h["pid"].tolist()) | set(g["pid"].tolist()) - {-1})
    if (g["pid"] < 0).any() or (h["pid"] < 0).any():
        if len(known) > 1:
            raise FormatError(src, "rows without a process id among several processes: give the files of one process")
        fill = known[0] if known else 0
        g.loc[g["pid"] < 0, "pid"] = fill
        h.loc[h["pid"] < 0, "pid"] = fill
        known = known or [0]
    proc = {p: i for i, p in enumerate(sorted(set(h["pid"].tolist()) | set(g["pid"].tolist())))}
    g["process"] = g["pid"].map(proc).astype(np.int64)
    h["process"] = h["pid"].map(proc).astype(np.int64)
    th = h[["process", "pid", "tid"]].drop_duplicates()
    th = th.assign(main=th["tid"] != th["pid"]).sort_values(["process", "main", "tid"])
    th["thread"] = th.groupby("process").cumcount()
    h = h.merge(th[["process", "tid", "thread"]], on=["process", "tid"], how="left")
    h["sync"] = [is_waiting_call(n) for n in h["name"]]
    names = {
        (int(p), int(t)): f"tid {int(tid)}" for p, tid, t in th[["process", "tid", "thread"]].itertuples(index=False)
    }
    attrs: dict[str, Any] = {"source": str(src), "creator": "rocprof", "files": len(files)}
    return Timeline(host=h, gpu=g, tick=1e-9, api="hip", thread_names=names, attrs=attrs)
