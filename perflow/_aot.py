"""Kernels compiled ahead of time: a read-only cache of compiled kernels shipped inside the package.

A first analysis of a large trace used to compile some 90 numba kernels (about
30 s on this machine) before doing any work. Building perflow (``pip install
.``, ``pip install -e .``, a wheel) now runs a small analysis workload with
every kernel compiled (:mod:`perflow.cli.aot`, run by the build hook in ``setup.py``)
and writes numba's cache files for them into ``perflow/_kernels/``; at run
time :mod:`perflow._jit` gives every kernel a two-level cache
(:class:`Layered`): entries are read from that shipped directory first, then
from the per-user cache, and new compiles are saved to the per-user cache
only. Nothing is ever written inside the installed package at run time.

The shipped entries are keyed so that a stale or foreign one is never used:

- the index of each kernel is stamped with the SHA-256 of its source file (not
  numba's modification time and size, which an installation changes), so an
  edited source file (an editable install) makes its entries stale;
- numba's own key of each entry holds the signature, the function's bytecode
  hash and the CPU (target triple, CPU name and features), and numba ignores an
  index written by another numba version;
- any mismatch is a cache miss: the kernel is compiled as before and saved
  to the per-user cache.

``PERFLOW_AOT=0`` turns the shipped cache off at run time, and at build time
skips building it; ``PERFLOW_AOT=DIR`` reads a cache built by
``python -m perflow.cli.aot DIR`` instead of the package's (one built once on a
cluster's shared file system, say).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import pickle
from pathlib import Path
from typing import Any

__all__ = ["ENV_AOT", "ENV_BUILD", "MANIFEST", "Layered", "enabled", "has_entry", "shipped_cache", "shipped_root"]

log = logging.getLogger(__name__)

#: ``0`` turns the shipped cache off (at run time) and skips building it (at build time)
ENV_AOT = "PERFLOW_AOT"
#: set while :func:`build` runs: the directory the shipped cache is written to
ENV_BUILD = "PERFLOW_AOT_BUILD"
PACKAGE = Path(__file__).resolve().parent
#: where the shipped cache lives inside the package
SHIPPED = "_kernels"
MANIFEST = "manifest.json"


def enabled() -> bool:
    """Whether the shipped cache is used (``PERFLOW_AOT`` is not ``0``)."""
    return os.environ.get(ENV_AOT, "1").strip().lower() not in ("0", "no", "false", "off")


def shipped_root() -> Path | None:
    """The shipped cache in use: the one being built (:data:`ENV_BUILD`), else ``PERFLOW_AOT`` when it names a
    directory (one built by ``python -m perflow.cli.aot DIR`` and shared read-only, say), else the package's."""
    building = os.environ.get(ENV_BUILD)
    if building:
        return Path(building)
    if not enabled():
        return None
    given = os.environ.get(ENV_AOT, "").strip()
    where = Path(given) if given and given not in ("1", "yes", "true", "on") else PACKAGE / SHIPPED
    return where if (where / MANIFEST).exists() else None


@functools.cache
def _source_stamp(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@functools.cache
def _classes() -> tuple[type, type]:
    """numba's cache classes specialised for the shipped directory (made once numba is loaded)."""
    from numba.core import caching

    class ShippedLocator(caching._CacheLocator):
        """perflow's kernels in the shipped directory, stamped by source content, never written at run time."""

        def __init__(self, py_func: Any, py_file: str) -> None:
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno
            rel = Path(py_file).resolve().parent.relative_to(PACKAGE)
            self._path = str(shipped_root() / rel)

        def ensure_cache_path(self) -> None:
            if not os.environ.get(ENV_BUILD):
                raise OSError(f"{self._path}: the shipped kernel cache is read-only")
            os.makedirs(self._path, exist_ok=True)

        def get_cache_path(self) -> str:
            return self._path

        def get_source_stamp(self) -> str:
            return _source_stamp(self._py_file)

        def get_disambiguator(self) -> str:
            return str(self._lineno)

        @classmethod
        def from_function(cls, py_func: Any, py_file: str) -> Any:
            if shipped_root() is None or not Path(py_file).resolve().is_relative_to(PACKAGE):
                return None
            return cls(py_func, py_file)

    class ShippedImpl(caching.CompileResultCacheImpl):
        _locator_classes = [ShippedLocator]

    class ShippedCache(caching.FunctionCache):
        _impl_class = ShippedImpl

    return ShippedLocator, ShippedCache


def shipped_cache(py_func: Any) -> Any:
    """numba's cache of ``py_func`` in the shipped directory, or None (none shipped, not perflow's, overridden)."""
    from numba.core import config

    if shipped_root() is None or config.CACHE_LOCATOR_CLASSES:
        return None
    try:
        return _classes()[1](py_func)
    except (RuntimeError, ValueError, OSError) as exc:  # no locator for this file, ...
        log.debug("no shipped cache for %s: %s", getattr(py_func, "__qualname__", py_func), exc)
        return None


class Layered:
    """A dispatcher's cache: the shipped entries first, then the per-user ones; saves go to the per-user cache."""

    def __init__(self, shipped: Any, user: Any) -> None:
        self.shipped, self.user = shipped, user
        self.hits = 0  # overloads loaded from the shipped directory

    @property
    def cache_path(self) -> str | None:
        return getattr(self.user, "cache_path", None)

    def load_overload(self, sig: Any, target_context: Any) -> Any:
        try:
            cres = self.shipped.load_overload(sig, target_context)
        except Exception as exc:  # noqa: BLE001 - a damaged shipped entry is a miss, never a crash
            log.debug("shipped kernel cache entry unreadable: %s", exc)
            cres = None
        if cres is not None:
            self.hits += 1
            return cres
        return self.user.load_overload(sig, target_context)

    def save_overload(self, sig: Any, data: Any) -> None:
        self.user.save_overload(sig, data)

    def flush(self) -> None:
        self.user.flush()

    def enable(self) -> None:
        self.user.enable()

    def disable(self) -> None:
        self.user.disable()


def has_entry(py_func: Any) -> bool:
    """Whether the shipped directory holds fresh entries for ``py_func`` (this numba, this source, this CPU)."""
    cache = shipped_cache(py_func)
    if cache is None:
        return False
    import numba

    index = cache._cache_file._index_path
    try:
        with open(index, "rb") as f:
            if pickle.load(f) != numba.__version__:
                return False
            stamp, overloads = pickle.loads(f.read())
    except Exception:  # noqa: BLE001 - absent or damaged: no entry
        return False
    if stamp != cache._impl.locator.get_source_stamp():
        return False
    host = _cpu()
    return any(tuple(key[1]) == host for key in overloads)


def _cpu() -> tuple:
    from numba.core.registry import cpu_target

    return tuple(cpu_target.target_context.codegen().magic_tuple())
