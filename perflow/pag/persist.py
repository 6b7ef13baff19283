"""Saving and loading PAGs.

On-disk format, version 1: a directory (conventionally named ``*.pag``)
holding

* ``manifest.json``: ``{"format": "perflow-pag", "version": 1, "tables":
  {name: {"file": ..., "rows": n}}, "metric_info": ..., "attrs": ...,
  "comms": ..., "comm_names": ...}``, checked against its schema on load
  (:mod:`perflow.pag.manifest`: a damaged field is a ``FormatError`` naming
  the file and the field);
* one Parquet file per table: ``vertices``, ``metrics`` (the index levels
  ``vertex``, ``process``, ``thread`` as columns, sorted), and for traces
  ``intervals``, ``messages``, ``collectives``; ``comm`` for explicit
  communication edges.

Saves are atomic (:func:`perflow._atomic.atomic_dir`): everything is
written to a hidden sibling directory, the manifest last, and the directory
is swapped into place. A save killed at any point leaves the previous PAG
(or no PAG) at the path, never a partial one, and its temporary folder is
removed by the next save to that path; concurrent saves to one path all
succeed (the last one wins).
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._atomic import atomic_dir
from .._json import json_default
from ..errors import FormatError
from .checks import check_tables
from .frames import make_metrics
from .instances import Trace
from .manifest import check_manifest
from .pag import PAG, MetricInfo

__all__ = ["save", "load", "FORMAT_NAME", "FORMAT_VERSION", "is_saved_pag"]

FORMAT_NAME = "perflow-pag"
FORMAT_VERSION = 1


def _numeric_only(df: pd.DataFrame) -> bool:
    return all(df[c].dtype.kind in "biuf" for c in df.columns)


def _write_parquet(df: pd.DataFrame, path: Path) -> None:
    """Write one table: numeric tables straight from numpy, others through pandas (keeps categoricals).

    Snappy compression and no dictionary encoding for numeric columns: on
    tens of millions of rows this writes and reads several times faster than
    zstd with dictionaries, for about 20 % more disk.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    if _numeric_only(df):
        table = pa.table({str(c): df[c].to_numpy() for c in df.columns})
        dict_cols: list[str] | bool = False
    else:
        table = pa.Table.from_pandas(df, preserve_index=False)
        dict_cols = [str(c) for c in df.columns if df[c].dtype.kind not in "biuf"]
    pq.write_table(table, path, compression="snappy", use_dictionary=dict_cols)
    with open(path, "rb") as fh:
        os.fsync(fh.fileno())


def save(pag: PAG, path: str | os.PathLike[str], *, overwrite: bool = True) -> Path:
    """Save a PAG to ``path`` (a directory), atomically.

    Parameters
    ----------
    pag : PAG
    path : path-like
        Target directory; ``.pag`` is a good suffix.
    overwrite : bool
        Replace an existing saved PAG at ``path``.

    Returns
    -------
    pathlib.Path
        The path written.
    """
    target = Path(path)
    if target.exists() and not overwrite:
        raise FileExistsError(f"{target} exists (pass overwrite=True to replace it)")
    if target.exists() and not is_saved_pag(target):
        raise FormatError(target, "exists and is not a saved PAG; refusing to replace it")
    with atomic_dir(target) as tmp:
        _write_tables(pag, tmp)
    return target


def _write_tables(pag: PAG, tmp: Path) -> None:
    """Write the tables and, last, the manifest of ``pag`` into the (new, empty) folder ``tmp``."""
    tables: dict[str, pd.DataFrame] = {"vertices": pag._vertices.reset_index(drop=True)}
    m = pag._metrics
    idx = m.index
    keys = {
        "vertex": np.asarray(idx.codes[0], dtype=np.int32),
        "process": idx.levels[1].to_numpy().astype(np.int32)[idx.codes[1]],
        "thread": idx.levels[2].to_numpy().astype(np.int32)[idx.codes[2]],
    }
    mdf = pd.DataFrame({**keys, **{str(c): m[c].to_numpy() for c in m.columns}}, copy=False)
    tables["metrics"] = mdf
    if pag.trace is not None:
        tables["intervals"] = pag.trace.intervals
        tables["messages"] = pag.trace.messages
        tables["collectives"] = pag.trace.collectives
        if len(pag.trace.locks):
            tables["locks"] = pag.trace.locks
        if len(pag.trace.io):
            tables["io"] = pag.trace.io
        if len(pag.trace.rma):
            tables["rma"] = pag.trace.rma
    if pag._comm is not None:
        tables["comm"] = pag._comm.reset_index(drop=True)
    manifest: dict[str, Any] = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "tables": {},
        "n_vertices": pag.n_vertices,
        "metric_info": {k: asdict(v) for k, v in pag.metric_info.items()},
        "attrs": pag.attrs,
        "has_trace": pag.trace is not None,
    }
    if pag.trace is not None:
        manifest["comms"] = {str(k): np.asarray(v).tolist() for k, v in pag.trace.comms.items()}
        manifest["comm_names"] = {str(k): v for k, v in pag.trace.comm_names.items()}
        manifest["io_handles"] = {str(k): v for k, v in pag.trace.io_handles.items()}
        manifest["locations"] = {c: pag.trace.locations[c].tolist() for c in pag.trace.locations.columns}
        if pag.trace.rma_windows:
            manifest["rma_windows"] = {str(k): dict(v) for k, v in pag.trace.rma_windows.items()}
            manifest["rma_groups"] = {str(k): np.asarray(v).tolist() for k, v in pag.trace.rma_groups.items()}
    for name, df in tables.items():
        fname = f"{name}.parquet"
        _write_parquet(df, tmp / fname)
        manifest["tables"][name] = {"file": fname, "rows": len(df)}
    with open(tmp / "manifest.json", "w") as fh:
        json.dump(manifest, fh, default=json_default, indent=1)
        fh.flush()
        os.fsync(fh.fileno())


def is_saved_pag(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a directory holding a saved PAG's manifest."""
    p = Path(path)
    mf = p / "manifest.json"
    if not mf.is_file():
        return False
    try:
        with open(mf, "rb") as fh:
            data = json.loads(fh.read())
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(data, dict) and data.get("format") == FORMAT_NAME


def _read_parquet(path: Path, rows: int) -> pd.DataFrame:
    import pyarrow.parquet as pq

    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise FormatError(path, "missing table file (the saved PAG is incomplete)") from None
    except OSError as exc:
        raise FormatError(path, f"cannot open the table ({exc.strerror})") from None
    if not stat.S_ISREG(st.st_mode):  # a FIFO or a device would block the read or never end
        raise FormatError(path, "is not a regular file (a FIFO, a device or a folder): not read")
    try:
        pf = pq.ParquetFile(path)
        if pf.schema_arrow.pandas_metadata is not None:
            df = pf.read().to_pandas()
        else:  # numeric tables: one column at a time, so Arrow and numpy copies never all coexist
            df = pd.DataFrame({c: pf.read(columns=[c]).column(0).to_numpy() for c in pf.schema_arrow.names}, copy=False)
    except FileNotFoundError:
        raise FormatError(path, "missing table file (the saved PAG is incomplete)") from None
    except Exception as exc:  # pyarrow raises several types for corrupt files
        raise FormatError(path, f"cannot read the table: {exc}") from None
    if len(df) != rows:
        raise FormatError(path, f"has {len(df)} rows, the manifest says {rows}")
    return df


def load(path: str | os.PathLike[str]) -> PAG:
    """Load a PAG saved with :meth:`PAG.save`.

    A save swapping a new PAG into place while this reads it (the folder
    changed underneath) makes the load start again, up to three times.

    Raises
    ------
    FormatError
        If ``path`` is not a complete saved PAG of a supported version.
    """
    p = Path(path)
    for attempt in range(3):
        before = _identity(p)
        try:
            return _load_once(p)
        except (FormatError, FileNotFoundError):
            if attempt == 2 or _identity(p) == before:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def _identity(p: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(p)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _load_once(p: Path) -> PAG:
    """Load the saved PAG at ``p`` (one attempt).

    Raises
    ------
    FormatError
        If ``path`` is not a complete saved PAG of a supported version.
    """
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such file or directory")
    mf = p / "manifest.json"
    if not p.is_dir() or not mf.is_file():
        raise FormatError(p, "not a saved PAG (no manifest.json; an interrupted save leaves none)")
    try:
        with open(mf, "rb") as fh:
            manifest = json.loads(fh.read())
    except RecursionError:
        raise FormatError(mf, "JSON nested deeper than the parser's limit") from None
    except ValueError as exc:
        raise FormatError(mf, f"invalid JSON: {exc}") from None
    check_manifest(manifest, mf, version=FORMAT_VERSION)
    tabs = manifest["tables"]
    frames = {name: _read_parquet(p / info["file"], info["rows"]) for name, info in tabs.items()}
    check_tables(frames, {name: p / info["file"] for name, info in tabs.items()}, manifest)
    vt = frames["vertices"]
    vt.index = pd.RangeIndex(len(vt), name="vertex")
    mdf = frames["metrics"]
    where = p / tabs["metrics"]["file"]
    for key in ("vertex", "process", "thread"):
        if key not in mdf.columns or mdf[key].dtype.kind not in "iu":
            raise FormatError(where, f"needs an integer column {key!r}")
    if len(mdf) and (mdf["vertex"].min() < 0 or mdf["vertex"].max() >= len(vt)):
        raise FormatError(where, f"column 'vertex' holds ids outside 0..{len(vt) - 1} (the vertices table)")
    cols = {c: mdf[c].to_numpy() for c in mdf.columns if c not in ("vertex", "process", "thread")}
    try:
        m = make_metrics(
            mdf["vertex"].to_numpy(), mdf["process"].to_numpy(), mdf["thread"].to_numpy(), cols, n_vertices=len(vt)
        )
    except (ValueError, TypeError) as exc:
        raise FormatError(where, f"cannot build the metrics: {exc}") from None
    info = {k: MetricInfo(**v) for k, v in manifest.get("metric_info", {}).items()}
    trace = None
    if manifest.get("has_trace"):
        trace = Trace(
            frames["intervals"],
            frames.get("messages"),
            frames.get("collectives"),
            comms={int(k): np.asarray(v, dtype=np.int64) for k, v in manifest.get("comms", {}).items()},
            comm_names={int(k): v for k, v in manifest.get("comm_names", {}).items()},
            locks=frames.get("locks"),
            io=frames.get("io"),
            io_handles={int(k): v for k, v in manifest.get("io_handles", {}).items()},
            locations=manifest.get("locations"),
            rma=frames.get("rma"),
            rma_windows={int(k): v for k, v in manifest.get("rma_windows", {}).items()},
            rma_groups={int(k): np.asarray(v, dtype=np.int64) for k, v in manifest.get("rma_groups", {}).items()},
        )
    return PAG(vt, m, metric_info=info, trace=trace, comm=frames.get("comm"), attrs=manifest.get("attrs", {}))
