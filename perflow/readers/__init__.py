"""Readers: performance data from other tools into PAGs.

One module per format under :mod:`perflow.readers` (and any module a
third-party package registers in the entry-point group ``perflow.readers``,
checked after perflow's own), each exposing

* ``FORMAT``: the format name (``"otf2"``, ``"cube"``, ...),
* ``DESCRIPTION``: one line for ``perflow info`` and the docs,
* ``detect(path) -> bool``: a cheap check of the path and a few bytes,
* ``read(path, **options) -> PAG``.

:func:`read` picks the reader by ``format=`` or by detection;
``perflow.read_<format>(path, ...)`` calls one reader explicitly. A folder
that no reader recognises is searched for runs (:mod:`perflow.readers.folder`:
one run is read, several are an error listing them); ``format="otf2"`` or
``"cube"`` on a Score-P experiment directory reads that part of it.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import logging
import os
import stat
from pathlib import Path
from types import ModuleType
from typing import Any

from .. import progress
from ..errors import FormatError, PerflowError
from ..trace.clcmode import clock_correction

__all__ = ["read", "formats", "reader_module", "detect_format", "check_input", "READER_MODULES"]

log = logging.getLogger(__name__)

#: format name -> module (imported on first use). Order is detection order.
READER_MODULES: dict[str, str] = {
    "pag": "perflow.readers.saved",
    "scorep": "perflow.readers.scorep",
    "otf2": "perflow.readers.otf2",
    "cube": "perflow.readers.cube",
    "hpctoolkit": "perflow.readers.hpctoolkit",
    "caliper": "perflow.readers.caliper",
    "tau": "perflow.readers.tau",
    "cprofile": "perflow.readers.cprofile",
    "hatchet": "perflow.readers.hatchet",
    "pyinstrument": "perflow.readers.pyinstrument",
    "gprof": "perflow.readers.gprof",
    "gprof2dot": "perflow.readers.gprof2dot",
    "timemory": "perflow.readers.timemory",
    "chrome": "perflow.readers.chrome",
    "recording": "perflow.readers.recording",
    "nsys": "perflow.readers.nsys",
    "rocprof": "perflow.readers.rocprof",
    "projections": "perflow.readers.projections",
}


def _plugin_readers() -> dict[str, str]:
    """Format -> module of the readers registered in the ``perflow.readers`` entry-point group."""
    from importlib.metadata import entry_points

    out = {}
    for ep in entry_points(group="perflow.readers"):
        if ep.name not in READER_MODULES:
            out[ep.name] = ep.value.split(":")[0]
    return out


def reader_module(fmt: str) -> ModuleType:
    """The module that reads ``fmt`` (raising FormatError for an unknown or unavailable format)."""
    if fmt not in READER_MODULES and fmt in _plugin_readers():
        return importlib.import_module(_plugin_readers()[fmt])
    if fmt not in READER_MODULES:
        from difflib import get_close_matches

        close = get_close_matches(fmt, list(READER_MODULES), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise FormatError(fmt, f"unknown format{hint} (formats: {', '.join(formats())})")
    try:
        return importlib.import_module(READER_MODULES[fmt])
    except ModuleNotFoundError as exc:
        if exc.name == READER_MODULES[fmt]:
            raise FormatError(fmt, "this format's reader is not available in this perflow build") from None
        raise


def formats() -> list[str]:
    """Names of the formats whose reader is available."""
    out = []
    for f, mod in {**READER_MODULES, **_plugin_readers()}.items():
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name == mod:
                continue
            raise
        out.append(f)
    return out


#: What a non-regular input is called in an error.
_FILE_TYPES = {
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}
#: How many entries of an input folder are looked at for non-regular members (deeper or further ones are not).
_SCAN_ENTRIES = 20_000


def _kind(mode: int) -> str | None:
    """What a non-regular, non-folder file is (None: a regular file or a folder)."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return _FILE_TYPES.get(stat.S_IFMT(mode), "not a regular file")


def check_input(path: str | os.PathLike[str]) -> Path:
    """Refuse, before anything is read, an input that is not a regular file or a folder of them.

    A FIFO, a device (``/dev/zero``), a socket, or a folder holding one (up to
    :data:`_SCAN_ENTRIES` entries deep) is a :class:`FormatError` naming it:
    reading one would block forever or never end. A missing path is a
    FileNotFoundError; a symbolic link loop is a FormatError saying so.
    """
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        if os.path.islink(p):
            raise FileNotFoundError(f"{p}: a dangling symbolic link (to {os.readlink(p)!r})") from None
        raise FileNotFoundError(f"{p}: no such file or directory") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise FormatError(p, "a loop of symbolic links (the path never ends in a file)") from None
        raise
    what = _kind(st.st_mode)
    if what:
        raise FormatError(p, f"is {what}, not a file or folder of performance data: not read")
    if stat.S_ISDIR(st.st_mode):
        _scan_folder(p)
    return p


def _scan_folder(root: Path) -> None:
    seen = 0
    stack = [root]
    while stack and seen < _SCAN_ENTRIES:
        d = stack.pop()
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue  # unreadable: the reader reports it where it needs it
        for e in entries:
            seen += 1
            try:
                mode = e.stat(follow_symlinks=True).st_mode
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise FormatError(e.path, "a loop of symbolic links inside the input folder") from None
                continue  # a dangling link: no data to read there
            what = _kind(mode)
            if what:
                raise FormatError(e.path, f"is {what} inside the input folder {root}: not read")
            if stat.S_ISDIR(mode) and not e.is_symlink():
                stack.append(Path(e.path))


def detect_format(path: str | os.PathLike[str]) -> str:
    """Name of the format of ``path``, by asking each reader's ``detect`` (importing readers until one says yes)."""
    p = check_input(path)
    for f in [*READER_MODULES, *_plugin_readers()]:
        try:
            mod = reader_module(f)
        except FormatError:  # not available in this build
            continue
        try:
            if mod.detect(p):
                return f
        except Exception as exc:  # noqa: BLE001 - a detector that fails on odd content just says no
            log.debug("detect(%s) by %s failed: %s", p, f, exc)
    raise FormatError(
        p, f"cannot tell the format; name it explicitly (format= or --format), one of {', '.join(formats())}"
    )


#: Errors of the environment, not of the data: passed on as they are.
_PASS_ON = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError, InterruptedError)


def _raised_in(exc: BaseException, fn: Any) -> bool:
    """Whether ``exc`` was raised by ``fn``'s own code (not by something it called)."""
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame.f_code is getattr(fn, "__code__", None)


def _read_guarded(mod: ModuleType, fmt: str, path: Path, options: dict[str, Any]) -> Any:
    """``mod.read(path, **options)``, with every exception bad data can cause turned into a FormatError.

    The readers check what they read and raise FormatErrors that say what is
    wrong where; this is the net under them. A PerflowError is re-raised as a
    FormatError naming ``path`` (a PAGError or TraceError from building the
    PAG is about the data); any other exception, MemoryError and
    RecursionError included, becomes a FormatError naming ``path`` and the
    exception, with the original as ``__cause__`` (the CLI prints its
    traceback with ``--debug``) and ``unexpected = True``. Left alone:
    FormatErrors, errors of the environment (a missing or unreadable file),
    and TypeError/ValueError raised by the reader's ``read`` itself (a bad
    option, not bad data).
    """
    try:
        return mod.read(path, **options)
    except FormatError:
        raise
    except IsADirectoryError as exc:
        where = exc.filename or path
        raise FormatError(where, f"is a folder: the {fmt} reader reads a file here (name the file)") from None
    except NotADirectoryError as exc:
        raise FormatError(path, f"is a file: the {fmt} reader reads a folder (name the folder that holds it)") from exc
    except _PASS_ON:
        raise
    except PerflowError as exc:
        raise FormatError(path, str(exc)) from exc
    except (TypeError, ValueError) as exc:
        if _raised_in(exc, mod.read):
            raise
        raise _unexpected(path, fmt, exc) from exc
    except Exception as exc:  # noqa: BLE001 - the net: MemoryError, RecursionError, KeyError, ...
        raise _unexpected(path, fmt, exc) from exc


def _unexpected(path: Path, fmt: str, exc: BaseException) -> FormatError:
    msg = str(exc).strip()
    if len(msg) > 300:
        msg = msg[:300] + "..."
    log.debug("reading %s as %s failed", path, fmt, exc_info=exc)
    err = FormatError(
        path,
        f"cannot read this {fmt} data ({type(exc).__name__}{': ' + msg if msg else ''}): the file is damaged or "
        "holds something this reader does not handle (--debug shows where)",
    )
    err.unexpected = True  # type: ignore[attr-defined]
    return err


def read(path: str | os.PathLike[str], format: str | None = None, *, engine: Any = None, **options: Any) -> Any:  # noqa: A002
    """Read performance data into a PAG.

    Parameters
    ----------
    path : path-like
        A file or directory written by a supported tool, or a saved PAG.
    format : str, optional
        Force a format instead of detecting it (see :func:`formats`).
    engine : Engine, optional
        An engine (:mod:`perflow.flow.engine`) that reads the data where it
        analyses them, e.g. on a Dask cluster; it may decline (returning
        ``None``), and the readers here read the data.
    **options
        Passed to the reader; ``clock_correction`` ("auto", "on", "off") applies to
        every trace read here (:mod:`perflow.trace.clc`).

    Returns
    -------
    PAG
    """
    p = check_input(path)  # before any reader touches it, forced format or not
    if format in ("otf2", "cube") and p.is_dir():
        # a Score-P experiment: format= chooses its trace or its profile (its reader loads on first use)
        if reader_module("scorep").detect(p):
            options["part"], format = format, "scorep"
    if format is None and p.is_dir():
        try:
            fmt = detect_format(p)
        except FormatError:
            from .folder import read_folder

            return read_folder(p, engine=engine, **options)
    else:
        fmt = format or detect_format(p)

    cc = options.pop("clock_correction", None)
    with progress.task(f"reading {p.name}"), clock_correction(cc) if cc is not None else contextlib.nullcontext():
        pag = engine.read(p, fmt, **options) if engine is not None else None
        if pag is None:
            pag = _read_guarded(reader_module(fmt), fmt, p, options)
    pag.attrs.setdefault("source", str(p))
    pag.attrs.setdefault("format", fmt)
    return pag
