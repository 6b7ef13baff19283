"""Content fingerprints of values, for the cross-run cache and in-run sharing.

:func:`fingerprint` returns a hex digest that changes whenever the value's
content changes, and is cheap for the large columnar objects perflow passes
exchange:

* DataFrames, Series, Indexes: :func:`pandas.util.hash_pandas_object` row
  hashes (vectorised) plus column names and dtypes;
* numpy arrays: their bytes, dtype and shape;
* PAGs: the digest of their tables (:meth:`perflow.PAG.content`: vertex
  table, metrics, trace tables, communication edges, metric descriptions),
  computed once per PAG object (a PAG never changes), plus its ``attrs``;
* vertex and edge sets: their PAG's digest and their ids;
* paths (:class:`os.PathLike`): the path and the **content** of the file, or
  of every file under a directory (names, sizes and a BLAKE2b hash of the
  bytes; see :func:`path_digest`). Symbolic links are followed to what they
  point at (a dangling link counts as its target text), a symbolic link loop
  is a :class:`~perflow.errors.FormatError`. A file's hash is reused while
  its device, inode, size, modification *and change* time are unchanged
  (the change time cannot be set back, so an edit that restores size and
  modification time is still seen): within a process, and across runs
  through a hash store (the cache's signed one);
* scalars, strings, lists, tuples, dicts, sets: their contents;
* an object with a ``__perflow_fingerprint__()`` method: what it returns;
* anything else: its pickle.

A value that cannot be fingerprinted raises :class:`Unfingerprintable`; the
caller then does not cache (never a stale result).

``fingerprint(value, paths="name")`` fingerprints paths by name only (no
file is read): the planner's in-run sharing of identical steps uses it.
"""

from __future__ import annotations

import errno
import hashlib
import os
import pickle
import stat
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import numpy as np
import pandas as pd

from ..errors import FormatError
from ..pag.pag import PAG
from ..pag.selection import Selection

__all__ = ["fingerprint", "Unfingerprintable", "digest_of", "path_digest", "file_digest", "HashStore"]

#: the content digest of each PAG object (computed once: a PAG never changes)
_PAG_DIGESTS: weakref.WeakKeyDictionary[PAG, str] = weakref.WeakKeyDictionary()
_PAG_LOCK = threading.Lock()
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


class HashStore(Protocol):
    """Content hashes of files kept across runs: stat key -> hex digest, per input root."""

    def load(self, root: str) -> dict[str, str]:
        """The stored hashes of the files under ``root`` (empty when none or untrusted)."""
        ...

    def save(self, root: str, hashes: dict[str, str]) -> None:
        """Store the hashes of the files under ``root`` (replacing the previous ones)."""
        ...


_MEMO: dict[str, str] = {}  # stat key -> content digest, for this process
_MEMO_MAX = 200_000
_PARALLEL_BYTES = 64 << 20  # hash in threads when more than this is to be read


def _stat_key(real: str, st: os.stat_result) -> str:
    # the change time cannot be set by users: restoring size and mtime after an edit still changes it
    return f"{real}|{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


def file_digest(path: str | os.PathLike[str]) -> tuple[str, bool]:
    """BLAKE2b digest of a regular file's bytes, and whether the file stayed unchanged while it was read."""
    with open(path, "rb") as fh:
        before = os.fstat(fh.fileno())
        h = hashlib.file_digest(fh, lambda: hashlib.blake2b(digest_size=20))
        after = os.fstat(fh.fileno())
    same = (before.st_size, before.st_mtime_ns, before.st_ctime_ns) == (
        after.st_size,
        after.st_mtime_ns,
        after.st_ctime_ns,
    )
    return h.hexdigest(), same


def _loop(top: str, where: str, target: str) -> Exception:

    return FormatError(
        top,
        f"symbolic link loop at {where} (-> {target}): the input cannot be fingerprinted for the cache; "
        "remove the loop or run without a cache",
    )


def _entries(top: str) -> list[tuple[str, str, str, os.stat_result | None]]:
    """Every entry under ``top`` as (relative name, kind, real path or link text, stat), links followed."""
    out: list[tuple[str, str, str, os.stat_result | None]] = []

    def resolve(path: str, rel: str) -> tuple[str, os.stat_result] | None:
        try:
            real = os.path.realpath(path, strict=True)
        except FileNotFoundError:
            out.append((rel, "dangling", os.readlink(path), None))
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _loop(top, path, os.readlink(path)) from None
            raise
        return real, os.stat(real)

    def visit(real_dir: str, rel: str, ancestors: frozenset[str]) -> None:
        with os.scandir(real_dir) as it:
            entries = sorted(it, key=lambda e: e.name)
        for e in entries:
            name = f"{rel}/{e.name}" if rel else e.name
            if e.is_symlink():
                got = resolve(e.path, name)
                if got is None:
                    continue
                real, st = got
            else:
                real, st = e.path, e.stat(follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                if real in ancestors:
                    raise _loop(top, e.path, real)
                out.append((name, "dir", "", None))
                visit(real, name, ancestors | {real})
            elif stat.S_ISREG(st.st_mode):
                out.append((name, "file", real, st))
            else:  # a FIFO, socket or device: never read
                out.append((name, f"special:{stat.S_IFMT(st.st_mode)}", "", None))

    if os.path.islink(top):
        got = resolve(top, "")
        if got is None:
            return out
        real, st = got
    else:
        real, st = top, os.stat(top)
    if stat.S_ISDIR(st.st_mode):
        visit(os.path.realpath(real), "", frozenset({os.path.realpath(real)}))
    elif stat.S_ISREG(st.st_mode):
        out.append(("", "file", real, st))
    else:
        out.append(("", f"special:{stat.S_IFMT(st.st_mode)}", "", None))
    return out


def path_digest(path: str | os.PathLike[str], store: HashStore | None = None) -> str:
    """A digest of the content at ``path``: a file's bytes, or a folder's names and file contents.

    Files whose stat key is known (this process, or ``store``) are not read again.

    Raises
    ------
    FormatError
        For a symbolic link loop under ``path``.
    """
    top = os.fspath(path)
    if not os.path.lexists(top):
        return digest_of("path", top, "missing")
    try:
        entries = _entries(top)
    except OSError as exc:  # unreadable: not cached (the step reading it reports the problem)
        raise Unfingerprintable(f"cannot read {exc.filename or top}: {exc.strerror or exc}") from None
    root = os.path.realpath(top)
    stored = store.load(root) if store is not None else {}
    keys = {rel: _stat_key(real, st) for rel, kind, real, st in entries if kind == "file" and st is not None}
    known: dict[str, str] = {}
    todo: list[tuple[str, str, int]] = []
    for rel, kind, real, st in entries:
        if kind != "file":
            continue
        k = keys[rel]
        got = _MEMO.get(k) or stored.get(k)
        if got is not None:
            known[k] = got
        else:
            todo.append((k, real, st.st_size))  # type: ignore[union-attr]
    try:
        if len(todo) > 1 and sum(t[2] for t in todo) > _PARALLEL_BYTES:
            with ThreadPoolExecutor(min(4, os.cpu_count() or 1), thread_name_prefix="perflow-hash") as pool:
                done = list(pool.map(lambda t: file_digest(t[1]), todo))
        else:
            done = [file_digest(t[1]) for t in todo]
    except OSError as exc:
        raise Unfingerprintable(f"cannot read {exc.filename}: {exc.strerror or exc}") from None
    if len(_MEMO) > _MEMO_MAX:
        _MEMO.clear()
    for (k, _, _), (dig, stable) in zip(todo, done):
        known[k] = dig
        if stable:
            _MEMO[k] = dig
    if store is not None and (todo or set(stored) != set(known)):
        store.save(root, known)
    parts = ["path", top]
    for rel, kind, real, st in entries:
        if kind == "file":
            parts.append(f"file:{rel}:{st.st_size}:{known[keys[rel]]}")  # type: ignore[union-attr]
        elif kind == "dangling":
            parts.append(f"dangling:{rel}->{real}")
        else:
            parts.append(f"{kind}:{rel}")
    return digest_of(*parts)


def _pag(pag: PAG) -> str:
    with _PAG_LOCK:
        cached = _PAG_DIGESTS.get(pag)
    if cached is None:
        parts = []
        for name, v in pag.content():
            parts += [name, v if isinstance(v, str) else fingerprint(v)]
        cached = digest_of("PAG", *parts)
        with _PAG_LOCK:
            _PAG_DIGESTS[pag] = cached
    return digest_of(cached, fingerprint(pag.attrs))


def fingerprint(value: Any, *, paths: str = "content", store: HashStore | None = None) -> str:
    """A hex digest of ``value``'s content (see the module documentation for how each type is read).

    Parameters
    ----------
    value
        Any value.
    paths : {"content", "name"}
        Fingerprint paths by what they hold (default) or by name only.
    store : HashStore, optional
        Content hashes of files kept across runs (the cache's).
    """

    def fp(v: Any) -> str:
        return fingerprint(v, paths=paths, store=store)

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
        if paths == "name":
            return digest_of("path-name", os.fspath(value))
        return path_digest(value, store)
    if isinstance(value, list | tuple):
        return digest_of(type(value).__name__, *(fp(v) for v in value))
    if isinstance(value, set | frozenset):
        return digest_of(type(value).__name__, *sorted(fp(v) for v in value))
    if isinstance(value, dict):
        items = sorted((fp(k), fp(v)) for k, v in value.items())
        return digest_of("dict", *(f"{k}={v}" for k, v in items))
    if isinstance(value, PAG):
        return _pag(value)
    if isinstance(value, Selection) and isinstance(value.pag, PAG):  # vertex / edge sets
        return digest_of(type(value).__name__, _pag(value.pag), _array(np.asarray(value.ids)), repr(value.ordered))
    return _pickle(value)
