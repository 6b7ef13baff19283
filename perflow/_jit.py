"""Compiled kernels: the one decorator (:func:`njit`) behind every numba kernel in perflow.

- **Cache location** (:mod:`perflow._jitcache`). Compiled kernels are cached in perflow's per-user cache
  directory (:func:`cache_root`: ``$PERFLOW_CACHE_DIR``, else the platform's user
  cache, e.g. ``~/.cache/perflow``), under ``numba/``, never inside the installed
  package. :func:`configure` points numba there (``NUMBA_CACHE_DIR``) before
  numba loads; a ``NUMBA_CACHE_DIR`` the user set wins. When no usable cache
  directory exists (a read-only home, say), kernels are compiled without
  caching: slower, never a crash.
- **Lazy.** numba is imported on the first call that needs a compiled kernel.
  Decorating costs nothing, so importing a module full of kernels is cheap and a
  run compiles only the kernels it calls. The same holds for C callbacks
  (:func:`cfunc`, with a signature string): compiled on the first use of their
  ``address``.
- **Small inputs run as Python.** Starting numba costs about a second per
  process (more when a kernel must be compiled); for small inputs the kernel's
  own Python function, interpreted over the numpy arrays, is faster. A kernel
  runs that way while the arrays it was given in this process (the largest of
  each call, added up) stay within :data:`SMALL` elements (or the kernel's own
  ``small=``) and it is not compiled yet; past that it is compiled, so a kernel
  called in a loop, or on a large input, soon runs compiled
  (``python=False`` opts a kernel out, for kernels that use numba-only
  features). A kernel called by another kernel that runs interpreted runs
  interpreted too, uncounted: its caller's input was judged small, and a
  helper called once per element (a binary search over the caller's arrays)
  would otherwise count the whole array at each call and start numba half
  way through a small run. Typed containers (:data:`Dict`),
  :data:`types` and intrinsics declared with :func:`intrinsic` are stand-ins
  that become numba's when the kernel is compiled and plain Python ones when it
  is interpreted.
- **Modes.** ``PERFLOW_JIT=auto`` (default) as above; ``compile`` always compiles
  (the test suite uses it); ``python`` never does (debugging).
- **Compiled ahead of time.** Building perflow compiles its kernels into a
  read-only cache shipped inside the package (:mod:`perflow._aot`); every
  dispatcher reads it before the per-user cache, and saves new compiles to the
  per-user cache only.
- **First compile.** Compiling a kernel that is not cached yet prints a one-line
  notice through :mod:`perflow.progress`.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import types as _pytypes
from collections.abc import Callable
from typing import Any

from . import _aot, progress
from ._jitcache import cache_root, configure, is_cached, kernel_cache_dir, load_numba

__all__ = [
    "SMALL",
    "CFunc",
    "Dict",
    "Kernel",
    "carray",
    "cache_root",
    "cfunc",
    "compiled_for",
    "configure",
    "intrinsic",
    "kernel_cache_dir",
    "load_numba",
    "mode",
    "njit",
    "types",
]

log = logging.getLogger(__name__)

#: environment variables
ENV_MODE = "PERFLOW_JIT"
MODES = ("auto", "compile", "python")

#: mode ``auto``: a kernel runs interpreted while its inputs in this process add up to at most this many elements
SMALL = 50_000

_LOCK = threading.RLock()
_STATE: dict[str, Any] = {"noticed": False}
_KERNELS: list[Kernel] = []


class _Depth(threading.local):
    depth = 0


#: how many kernels are running interpreted in this thread (a kernel called by one runs interpreted uncounted)
_NESTED = _Depth()


def mode() -> str:
    """``PERFLOW_JIT``: ``auto`` (default), ``compile`` or ``python``."""
    m = os.environ.get(ENV_MODE, "auto").strip().lower() or "auto"
    if m not in MODES:
        raise ValueError(f"{ENV_MODE}={m!r}: expected one of {', '.join(MODES)}")
    return m


def compiled_for(n: int) -> bool:
    """Whether a kernel that has a numpy twin should run on ``n`` elements (else the twin runs).

    Past :data:`SMALL` elements, and always in mode ``compile`` (the ahead-of-time
    build and the tests, so that the kernel is compiled and tested), never in mode ``python``.
    """
    m = mode()
    return m == "compile" or (m == "auto" and n > SMALL)


# ------------------------------------------------------------------ numba stand-ins
class _Stand:
    """A numba object named in a kernel (``Dict``, ``types``): numba's when compiled, Python's when interpreted."""

    def __init__(self, module: str, attr: str | None = None) -> None:
        self._module, self._attr = module, attr

    def real(self) -> Any:
        import importlib

        load_numba()
        mod = importlib.import_module(self._module)
        return getattr(mod, self._attr) if self._attr else mod

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self  # types.int64 and the like: only meaningful to numba

    def empty(self, *args: Any, **kwargs: Any) -> dict:
        """``Dict.empty(key_type=..., value_type=...)`` interpreted: a plain dict."""
        return {}

    def __repr__(self) -> str:
        return f"<numba stand-in {self._module}{'.' + self._attr if self._attr else ''}>"


#: numba's typed dict inside kernels (``Dict.empty(key_type=types.int64, value_type=types.int64)``)
Dict = _Stand("numba.typed", "Dict")
#: numba's type objects inside kernels
types = _Stand("numba.types")
#: numba's ``carray`` (an array over a C pointer) inside kernels
carray = _Stand("numba", "carray")


class _Intrinsic:
    """A numba intrinsic named in kernels, with the plain-Python function that does the same when interpreted."""

    def __init__(self, func: Callable[..., Any], python: Callable[..., Any]) -> None:
        self.func, self.python = func, python
        self._real: Any = None
        self.__name__ = func.__name__
        self.__doc__ = func.__doc__

    def real(self) -> Any:
        if self._real is None:
            load_numba()
            from numba.extending import intrinsic as make

            self._real = make(self.func)
        return self._real

    def __call__(self, *args: Any) -> Any:
        return self.python(*args)


def intrinsic(*, python: Callable[..., Any]) -> Callable[[Callable[..., Any]], _Intrinsic]:
    """``numba.extending.intrinsic`` made when a kernel using it is compiled; ``python`` runs when interpreted."""

    def wrap(f: Callable[..., Any]) -> _Intrinsic:
        return _Intrinsic(f, python)

    return wrap


def _for_numba(f: Callable[..., Any]) -> Callable[..., Any]:
    """``f`` itself, or a copy whose stand-in globals are numba's real objects (same code: same cache entry)."""
    g = f.__globals__
    stands = {n: g[n] for n in f.__code__.co_names if isinstance(g.get(n), _Stand | _Intrinsic)}
    if not stands:
        return f
    glb = dict(g)
    glb.update({n: s.real() for n, s in stands.items()})
    out = _pytypes.FunctionType(f.__code__, glb, f.__name__, f.__defaults__, f.__closure__)
    out.__qualname__, out.__module__, out.__doc__ = f.__qualname__, f.__module__, f.__doc__
    return out


# ------------------------------------------------------------------ kernels
# ------------------------------------------------------------------ kernels
def _shipped_has(f: Callable[..., Any]) -> bool:
    """Whether the shipped cache (:mod:`perflow._aot`) holds fresh entries for ``f``."""
    return _aot.shipped_root() is not None and _aot.has_entry(f)


def _use_shipped(d: Any, py_func: Callable[..., Any] | None = None) -> None:
    """Give dispatcher (or cfunc) ``d`` the kernels compiled ahead of time (:mod:`perflow._aot`), when shipped."""
    shipped = _aot.shipped_cache(py_func or d.py_func)
    if shipped is None:
        return
    if os.environ.get(_aot.ENV_BUILD):  # building the shipped cache: compiles are saved there
        d._cache = shipped
    else:
        d._cache = _aot.Layered(shipped, d._cache)


def _first_compile_notice() -> None:
    """Announce, once per process, that kernels are being compiled (none of them cached yet)."""
    if _STATE["noticed"]:
        return
    _STATE["noticed"] = True
    pending = sum(1 for k in _KERNELS if k._dispatcher is None and not k._cached())
    seconds = min(60, max(5, round(0.4 * pending / 5) * 5))  # about 0.4 s a kernel on one core

    when = "first run only" if kernel_cache_dir() is not None else "not cached"
    progress.notice(f"compiling analysis kernels ({when}, ~{seconds} s)...")


class Kernel:
    """A kernel: numba-compiled on demand, interpreted for small inputs (see the module docs)."""

    def __init__(self, func: Callable[..., Any], options: dict[str, Any], python: bool, small: int = SMALL) -> None:
        self.py_func = func
        self.options = options
        self.python = python
        self.small = small
        self.interpreted = 0  # elements run interpreted so far (the largest array of each call)
        self._dispatcher: Any = None
        self.__name__ = func.__name__
        self.__qualname__ = func.__qualname__
        self.__module__ = func.__module__
        self.__doc__ = func.__doc__
        self.__wrapped__ = func
        _KERNELS.append(self)

    def __repr__(self) -> str:
        return f"<perflow kernel {self.__module__}.{self.__qualname__}>"

    def __reduce__(self) -> tuple:
        """Pickled by name (for worker processes), like a function."""
        return (_kernel_named, (self.__module__, self.__qualname__))

    def _cached(self) -> bool:
        return is_cached(self.py_func) or _shipped_has(_for_numba(self.py_func))

    @property
    def dispatcher(self) -> Any:
        """The numba dispatcher (created, not yet compiled, on first use)."""
        if self._dispatcher is None:
            with _LOCK:
                if self._dispatcher is None:
                    numba = load_numba()
                    cache = kernel_cache_dir() is not None
                    d = numba.njit(cache=cache, **self.options)(_for_numba(self.py_func))
                    _use_shipped(d)
                    self._dispatcher = d
        return self._dispatcher

    @property
    def _numba_type_(self) -> Any:
        """numba's type of this object, so that compiled kernels can call it."""
        return self.dispatcher._numba_type_

    def compiled(self, *args: Any) -> Any:
        """Call the compiled kernel (compiling it first when needed)."""
        d = self.dispatcher
        if not d.signatures and not _STATE["noticed"] and not self._cached():
            _first_compile_notice()
        return d(*args)

    def __call__(self, *args: Any) -> Any:
        d = self._dispatcher
        m = mode()
        if m == "compile" or (d is not None and d.signatures and m == "auto") or not self.python:
            return self.compiled(*args)
        if _NESTED.depth:  # called by a kernel running interpreted: its caller's input decided, nothing to count
            return self.py_func(*args)
        size = _size(args)
        if m == "python" or self.interpreted + size <= self.small:
            self.interpreted += size
            _NESTED.depth += 1
            try:
                return self.py_func(*args)
            finally:
                _NESTED.depth -= 1
        return self.compiled(*args)


def _kernel_named(module: str, qualname: str) -> Kernel:
    import importlib

    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _size(args: tuple) -> int:
    """Elements of the largest array among ``args``."""
    out = 0
    for a in args:
        size = getattr(a, "size", None)
        if isinstance(size, int) and hasattr(a, "dtype"):
            out = max(out, size)
    return out


def njit(
    func: Callable[..., Any] | None = None,
    *,
    python: bool = True,
    small: int = SMALL,
    nogil: bool = True,
    **options: Any,
) -> Any:
    """Declare a numba kernel (``@njit`` or ``@njit(...)``); options go to ``numba.njit``.

    Parameters
    ----------
    python : bool
        Whether small inputs may run interpreted (false for kernels that use
        numba-only features: C pointers, intrinsics without a Python equivalent).
    small : int
        Elements (the largest array of each call, added up over the process)
        this kernel runs interpreted before it is compiled; lower it for
        kernels that are slow interpreted.
    nogil : bool
        Release the GIL in compiled code (default true).
    """
    opts = dict(options, nogil=nogil)
    opts.pop("cache", None)  # decided here: perflow's cache directory, when usable

    def wrap(f: Callable[..., Any]) -> Kernel:
        return Kernel(f, opts, python, small)

    return wrap(func) if func is not None else wrap


class CFunc:
    """A ``numba.cfunc`` compiled on the first use of its :attr:`address` (so that defining one loads no numba)."""

    def __init__(self, func: Callable[..., Any], sig: Any, options: dict[str, Any]) -> None:
        self.py_func, self.sig, self.options = func, sig, options
        self._compiled: Any = None
        self.__name__, self.__qualname__, self.__module__ = func.__name__, func.__qualname__, func.__module__
        self.__doc__ = func.__doc__

    def __repr__(self) -> str:
        return f"<perflow cfunc {self.__module__}.{self.__qualname__}>"

    @property
    def compiled(self) -> Any:
        """numba's compiled cfunc (compiled, or loaded from the cache, on first access)."""
        if self._compiled is None:
            with _LOCK:
                if self._compiled is None:
                    load_numba()
                    from numba.core import sigutils
                    from numba.core.ccallback import CFunc as NumbaCFunc

                    f = _for_numba(self.py_func)
                    if not _STATE["noticed"] and not is_cached(self.py_func) and not _shipped_has(self.py_func):
                        _first_compile_notice()
                    t = time.perf_counter()
                    opts = dict(self.options)
                    out = NumbaCFunc(
                        f, sigutils.normalize_signature(self.sig), locals=dict(opts.pop("locals", {})), options=opts
                    )
                    if kernel_cache_dir() is not None:
                        out.enable_caching()
                    _use_shipped(out, self.py_func)
                    out.compile()
                    self._compiled = out
                    log.debug("cfunc %s ready in %.3f s", self.__qualname__, time.perf_counter() - t)
        return self._compiled

    @property
    def ready(self) -> bool:
        """Whether it is compiled (or loaded from a cache) in this process."""
        return self._compiled is not None

    @property
    def address(self) -> int:
        """The C function's address."""
        return int(self.compiled.address)


def cfunc(sig: Any, **options: Any) -> Callable[[Callable[..., Any]], CFunc]:
    """``numba.cfunc`` with perflow's cache location, compiled on first use of ``.address``.

    ``sig`` is a numba signature, or its string form (``"int32(uint64, voidptr)"``) so that a module of
    callbacks can be imported without numba; a first compile is announced.
    """
    opts = dict(options)
    opts.pop("cache", None)

    def wrap(f: Callable[..., Any]) -> CFunc:
        return CFunc(f, sig, opts)

    return wrap
