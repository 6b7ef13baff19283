"""Content fingerprints of values, for the cross-run cache and in-run sharing.

:func:`fingerprint` returns a hex digest that changes whenever the value's
content changes, and is cheap for the large columnar objects perflow passes
exchange:

* DataFrames, Series, Indexes: :func:`pandas.util.hash_pandas_object` row
  hashes (vectorised) plus column names and dtypes;
* numpy arrays: their bytes, dtype and shape;
* PAGs: the digest of their tables (vertex table, metrics, trace tables,
  communication edges, metric descriptions), computed once and kept on the
  object (a PAG never changes), plus its ``attrs``;
* vertex and edge sets: their PAG's digest and their ids;
* paths (:class:`os.PathLike`): the path with the size and modification time
  of the file, or of every file under a directory (a changed file changes
  the digest without reading it);
* scalars, strings, lists, tuples, dicts, sets: their contents;
* an object with a ``__perflow_fingerprint__()`` method: what it returns;
* anything else: its pickle.

A value that cannot be fingerprinted raises :class:`Unfingerprintable`; the
caller then does not cache (never a stale result).
"""

from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["fingerprint", "Unfingerprintable", "digest_of"]

_PAG_ATTR = "_perflow_content_digest"
_SCALARS = (bool, int, float, complex, str, bytes)


class Unfingerprintable(TypeError):
    """The value has no reliable fingerprint."""


def digest_of(*parts: bytes | str) -> str:
    """A hex digest of the parts (each length-prefixed, so boundaries count)."""
    h = hashlib.blake2b(digest_size=20)
    for p in parts:
        b = p.encode() if isinstance(p, str) else p
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


def _frame(obj: pd.DataFrame | pd.Series | pd.Index) -> str:
    try:
        rows = pd.util.hash_pandas_object(obj, index=not isinstance(obj, pd.Index)).to_numpy()
    except TypeError:  # unhashable cells (lists, dicts): fall back to the pickle
        return _pickle(obj)
    if isinstance(obj, pd.DataFrame):
        meta = repr([(str(c), str(t)) for c, t in obj.dtypes.items()]) + repr(list(obj.index.names))
    else:
        meta = f"{obj.name!r}:{obj.dtype}" + (repr(list(obj.index.names)) if isinstance(obj, pd.Series) else "")
    return digest_of(type(obj).__name__, meta, str(len(obj)), np.ascontiguousarray(rows).tobytes())


def _array(a: np.ndarray) -> str:
    if a.dtype == object:
        return _pickle(a)
    return digest_of("ndarray", str(a.dtype), repr(a.shape), np.ascontiguousarray(a).tobytes())


def _pickle(obj: Any) -> str:
    try:
        return digest_of("pickle", type(obj).__qualname__, pickle.dumps(obj, protocol=5))
    except Exception as exc:
        raise Unfingerprintable(f"cannot fingerprint a {type(obj).__name__}: {exc}") from None


def _path(p: os.PathLike[str]) -> str:
    path = Path(p)
    parts: list[str] = ["path", os.fspath(path)]
    try:
        if path.is_dir():
            for root, dirs, files in os.walk(path):
                dirs.sort()
                for f in sorted(files):
                    st = os.stat(os.path.join(root, f))
                    parts.append(f"{os.path.relpath(os.path.join(root, f), path)}:{st.st_size}:{st.st_mtime_ns}")
        else:
            st = path.stat()
            parts.append(f"{st.st_size}:{st.st_mtime_ns}")
    except FileNotFoundError:
        parts.append("missing")
    return digest_of(*parts)


def _pag(pag: Any) -> str:
    cached = pag.__dict__.get(_PAG_ATTR)
    if cached is None:
        parts = [
            _frame(pag._vertices),
            _frame(pag._metrics),
            repr(sorted((k, repr(v)) for k, v in pag._metric_info.items())),
        ]
        tr = pag._trace
        if tr is not None:
            parts += [_frame(tr.intervals), _frame(tr.messages), _frame(tr.collectives)]
            parts += [
                fingerprint({int(k): np.asarray(v) for k, v in tr.comms.items()}),
                repr(sorted(tr.comm_names.items())),
            ]
        if pag._comm is not None:
            parts.append(_frame(pag._comm))
        cached = digest_of("PAG", *parts)
        pag.__dict__[_PAG_ATTR] = cached
    return digest_of(cached, fingerprint(pag.attrs))


def fingerprint(value: Any) -> str:
    """A hex digest of ``value``'s content (see the module documentation for how each type is read)."""
    if value is None or isinstance(value, _SCALARS):
        return digest_of(type(value).__name__, value if isinstance(value, bytes) else repr(value))
    custom = getattr(type(value), "__perflow_fingerprint__", None)
    if custom is not None:
        return digest_of("custom", type(value).__qualname__, str(custom(value)))
    if isinstance(value, pd.DataFrame | pd.Series | pd.Index):
        return _frame(value)
    if isinstance(value, np.ndarray):
        return _array(value)
    if isinstance(value, np.generic):
        return digest_of(type(value).__name__, repr(value.item()))
    if isinstance(value, os.PathLike):
        return _path(value)
    if isinstance(value, list | tuple):
        return digest_of(type(value).__name__, *(fingerprint(v) for v in value))
    if isinstance(value, set | frozenset):
        return digest_of(type(value).__name__, *sorted(fingerprint(v) for v in value))
    if isinstance(value, dict):
        items = sorted((fingerprint(k), fingerprint(v)) for k, v in value.items())
        return digest_of("dict", *(f"{k}={v}" for k, v in items))
    cls = type(value).__name__
    if cls == "PAG" and hasattr(value, "_vertices"):
        return _pag(value)
    if hasattr(value, "_pag") and hasattr(value, "_ids"):  # vertex / edge sets
        return digest_of(cls, _pag(value._pag), _array(np.asarray(value._ids)), repr(getattr(value, "_ordered", None)))
    return _pickle(value)
