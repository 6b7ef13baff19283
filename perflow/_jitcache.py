"""Where compiled kernels are cached: perflow's per-user cache directory, pointed to before numba loads.

Part of :mod:`perflow._jit` (see its docstring, "Cache location"): compiled
kernels are cached under ``numba/`` in :func:`cache_root`
(``$PERFLOW_CACHE_DIR``, else the platform's user cache), never inside the
installed package; a ``NUMBA_CACHE_DIR`` the user set wins; when no
directory is writable, kernels are compiled without caching.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import threading
import types as _pytypes
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["ENV_CACHE", "cache_root", "configure", "is_cached", "kernel_cache_dir", "load_numba"]

log = logging.getLogger(__name__)

#: the environment variable naming perflow's cache directory
ENV_CACHE = "PERFLOW_CACHE_DIR"

_LOCK = threading.RLock()
_STATE: dict[str, Any] = {"configured": False, "cache": None, "checked": False, "ours": False}


def cache_root() -> Path:
    """perflow's per-user cache directory: ``$PERFLOW_CACHE_DIR``, else the platform's user cache."""
    given = os.environ.get(ENV_CACHE)
    if given:
        return Path(given).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("perflow", appauthor=False))


def _usable(path: Path) -> str | None:
    """None when ``path`` is (made) a writable directory, else the reason it is not."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def configure() -> str | None:
    """Point numba's cache at perflow's (unless ``NUMBA_CACHE_DIR`` is set); return the directory in use.

    Cheap (no directory is created); called when :mod:`perflow` is imported,
    so it happens before anything in perflow imports numba. When numba is
    already loaded, its configuration is updated too.
    """
    with _LOCK:
        if _STATE["configured"]:
            return _STATE["cache"]
        _STATE["configured"] = True
        if os.environ.get("NUMBA_CACHE_DIR"):
            _STATE["cache"] = os.environ["NUMBA_CACHE_DIR"]
            return _STATE["cache"]
        try:
            target = str(cache_root() / "numba")
        except Exception as exc:  # noqa: BLE001 - no home directory, ...
            log.debug("no per-user cache directory: %s", exc)
            return None
        _set_numba_cache(target)
        _STATE["cache"], _STATE["ours"] = target, True
        return target


def _set_numba_cache(target: str) -> None:
    if target:
        os.environ["NUMBA_CACHE_DIR"] = target  # kept across numba's config reloads and in child processes
    else:
        os.environ.pop("NUMBA_CACHE_DIR", None)
    numba = sys.modules.get("numba")
    if numba is not None:
        numba.config.CACHE_DIR = target


def kernel_cache_dir() -> Path | None:
    """The directory compiled kernels are cached in, or None when caching is off (none is writable)."""
    with _LOCK:
        if not _STATE["checked"]:
            _STATE["checked"] = True
            where = configure()
            reason = "no per-user cache directory" if where is None else _usable(Path(where))
            if reason is not None:
                log.warning(
                    "cannot cache compiled kernels in %s (%s): they are compiled on every run; "
                    "set %s to a writable directory",
                    where,
                    reason,
                    ENV_CACHE,
                )
                _STATE["cache"] = None
                if _STATE["ours"]:  # numba's default for everyone else again
                    _set_numba_cache("")
        return Path(_STATE["cache"]) if _STATE["cache"] else None


def load_numba() -> _pytypes.ModuleType:
    """Import numba with perflow's cache location in place."""
    configure()
    import numba

    return numba


def is_cached(f: Callable[..., Any]) -> bool:
    """Whether numba's cache holds an entry for ``f`` (its index file exists; numba's cache layout)."""
    where = kernel_cache_dir()
    if where is None:
        return False
    import hashlib

    code = f.__code__
    src = os.path.abspath(code.co_filename)
    folder = os.path.dirname(src)
    sub = f"{os.path.basename(folder)}_{hashlib.sha1(folder.encode()).hexdigest()}"
    name = f"{Path(src).stem}.{f.__qualname__}-{code.co_firstlineno}.py{sys.version_info[0]}{sys.version_info[1]}.nbi"
    return (where / sub / name).exists()
