"""Save and load a :class:`~perflow.trace.raw.RawTrace` as one ``.npz`` file.

The recorder keeps this file next to the OTF2 trace and the PAG: it holds
exactly what the recorder assembled (including the extra ``caller``/``stack``
region columns) and loads without any OTF2 library.
"""

from __future__ import annotations

import json
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

from .._atomic import atomic_path
from .._inflate import check_npz
from .._json import json_default
from ..errors import FormatError, TraceError
from ..trace.raw import TABLE_SCHEMAS, RawTrace

__all__ = ["save_raw", "load_raw"]

_FORMAT = "perflow-rawtrace-1"
_TABLES = tuple(TABLE_SCHEMAS)
#: tables a raw trace saved by an older perflow may lack
_LATER = ("thread_events", "io_events", "rma_events")


def save_raw(raw: RawTrace, path: str | Path) -> Path:
    """Write ``raw`` to ``path`` (a ``.npz`` file); return the path."""
    path = Path(path)
    arrays: dict[str, np.ndarray] = {}
    for name in _TABLES:
        for col, a in getattr(raw, name).items():
            arrays[f"{name}.{col}"] = a
    for name in ("locations", "regions", "stacks", "metrics"):
        df: pd.DataFrame = getattr(raw, name)
        for col in df.columns:
            a = df[col].to_numpy()
            arrays[f"{name}:{col}"] = a.astype(str) if a.dtype == object else a
    meta = {
        "format": _FORMAT,
        "comms": {str(k): np.asarray(v).tolist() for k, v in raw.comms.items()},
        "comm_names": {str(k): v for k, v in raw.comm_names.items()},
        "attrs": raw.attrs,
        "region_index": raw.regions.index.tolist(),
    }
    arrays["meta"] = np.frombuffer(json.dumps(meta, default=json_default).encode(), dtype=np.uint8)

    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        np.savez_compressed(f, **arrays)
    return path


def load_raw(path: str | Path) -> RawTrace:
    """Read a file written by :func:`save_raw`.

    Raises
    ------
    FormatError
        When the file is not such a file.
    """
    path = Path(path)
    try:
        check_npz(path)  # member sizes and array headers, before numpy allocates anything
    except FormatError as exc:
        raise FormatError(path, f"not a saved perflow raw trace: {exc.reason}", exc.where) from None
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
        meta = json.loads(bytes(data.pop("meta")).decode())
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, zlib.error, SystemError) as exc:
        # SystemError: numpy refuses a text array whose characters are not Unicode (a damaged member)
        raise FormatError(path, f"not a saved perflow raw trace: {exc}") from None
    if not isinstance(meta, dict) or meta.get("format") != _FORMAT:
        raise FormatError(path, f"unknown raw trace format {meta.get('format') if isinstance(meta, dict) else meta!r}")
    try:
        return _assemble(path, data, meta)
    except FormatError:
        raise
    except (TraceError, ValueError, KeyError, TypeError, AttributeError, SystemError) as exc:
        raise FormatError(path, f"inconsistent saved raw trace ({type(exc).__name__}: {exc})") from exc


def _assemble(path: Path, data: dict[str, np.ndarray], meta: dict) -> RawTrace:
    frames: dict[str, dict[str, np.ndarray]] = {}
    tables: dict[str, dict[str, np.ndarray]] = {}
    for key, a in data.items():
        if ":" in key:
            name, col = key.split(":", 1)
            if a.dtype.kind == "U" and a.size:  # text: code points that are no Unicode text (damage) are refused
                cp = np.ascontiguousarray(a).view(np.uint32)
                if ((cp > 0x10FFFF) | ((cp >= 0xD800) & (cp <= 0xDFFF))).any():
                    raise FormatError(path, f"member {key}.npy holds text that is not valid Unicode")
            frames.setdefault(name, {})[col] = a
        elif "." in key:
            name, col = key.split(".", 1)
            tables.setdefault(name, {})[col] = a
        else:
            raise FormatError(path, f"unexpected member {key!r}")
    missing = [t for t in _TABLES if t not in tables and t not in _LATER]
    if missing:
        raise FormatError(path, f"saved raw trace lacks the table(s) {', '.join(missing)}")
    dfs = {name: pd.DataFrame(cols) for name, cols in frames.items()}
    if "regions" in dfs:
        dfs["regions"].index = pd.Index(meta["region_index"])
    kw = {}
    if "stacks" in dfs:
        kw["stacks"] = dfs["stacks"]
    if "metrics" in dfs:
        kw["metrics"] = dfs["metrics"]
    return RawTrace(
        locations=dfs.get("locations", pd.DataFrame()),
        regions=dfs.get("regions", pd.DataFrame()),
        comms={int(k): np.asarray(v, dtype=np.int64) for k, v in meta["comms"].items()},
        comm_names={int(k): v for k, v in meta["comm_names"].items()},
        attrs=meta["attrs"],
        **{name: tables[name] for name in _TABLES if name in tables},
        **kw,
    )
