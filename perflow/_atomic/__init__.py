"""Atomic file and folder writes: a killed run leaves the previous output or the new one, never half of one.

Every file perflow writes goes through this module. A file is written to a
temporary sibling (same folder, so the rename never crosses a file system),
flushed to disk and renamed over the target with :func:`os.replace`; a
folder (a saved PAG, a cache entry) is filled under a temporary sibling and
swapped into place. Readers see the old content until the rename and the
whole new content after it.

* :func:`write_text`, :func:`write_bytes`: a whole file at once;
* :func:`atomic_path`: a temporary path (with the target's suffix, so
  writers that pick a format from it work) for libraries that write files
  themselves (``DataFrame.to_csv``, ``Figure.savefig``, ``np.savez``);
* :func:`atomic_dir`: a temporary folder, swapped with the target on
  success. On Linux the swap is one ``renameat2(RENAME_EXCHANGE)``: the path
  never goes missing, and concurrent saves to one path all succeed (the last
  swap wins). Elsewhere two renames with a retry loop.

A target that is a symbolic link is replaced by the new file, never written
through.

Confined writes (:func:`confined`, set by a flow run's write policy,
:mod:`perflow.flow.writes`): a target inside one of the confinement's roots
is reached from the root's descriptor (opened once), one folder at a time
with ``O_NOFOLLOW`` (``openat``), and written, renamed and swapped through
the descriptor of its folder (``/proc/self/fd/N/...`` for libraries that take
a path). A folder swapped for a symbolic link after the policy checked the
path cannot redirect the write: the walk meets the link and refuses
(:class:`~perflow.errors.WriteRefused`), or the write lands in the folder it
already holds.

Temporary names are ``.NAME.tmp-HOST-PID-RANDOM`` (plus the target's suffix
for files); a swapped-out folder waits as ``.NAME.old-HOST-PID-RANDOM`` until
it is removed. A killed writer leaves its temporary behind: every write to
a target first removes that target's stale temporaries (:func:`clean_stale`)
that are ours (this naming, owned by this user, not a symbolic link) and
dead (their process is gone on this host) or old (a day, for other hosts).

This package's face writes; the confinement is :mod:`perflow._atomic.confine`,
the temporary names and their cleaning :mod:`perflow._atomic.temps`.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import errno
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from ..errors import WriteRefused
from .confine import confined, walk
from .temps import STALE_SECONDS, clean_stale, temp_sibling

__all__ = [
    "write_text",
    "write_bytes",
    "atomic_path",
    "atomic_dir",
    "clean_stale",
    "temp_sibling",
    "confined",
    "all_or_nothing",
    "current_file",
    "STALE_SECONDS",
]

_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


@contextlib.contextmanager
def _pinned(target: Path) -> Iterator[Path]:
    """``target``, or under a confinement the same file reached through its folder's descriptor."""
    walked = walk(target)
    if walked is None:
        yield target
        return
    fd, name = walked
    batch = _BATCH.get()
    try:
        yield Path(f"/proc/self/fd/{fd}") / name
    finally:
        if batch is not None:
            batch.append(("fd", None, None, fd))  # the rename of a set happens later, through this folder
        else:
            os.close(fd)


#: the set of writes of the running :func:`all_or_nothing` block: (kind, temporary, target, descriptor)
_BATCH: contextvars.ContextVar[list[tuple[str, Path | None, Path | None, int | None]] | None] = contextvars.ContextVar(
    "perflow_atomic_batch", default=None
)
#: the files written so far in the running :func:`all_or_nothing` block: target (absolute) -> its temporary
_PENDING: contextvars.ContextVar[dict[Path, Path] | None] = contextvars.ContextVar(
    "perflow_atomic_pending", default=None
)


def current_file(target: str | os.PathLike[str]) -> Path | None:
    """Where ``target``'s newest content is now: its temporary while an :func:`all_or_nothing` set is pending.

    Inside the block a file already written is still under its temporary name (renamed when the block
    ends); a later writer of the same set (a page linking and embedding the files written before it)
    reads it from there. Outside a set, or for a file not written in it, ``target`` when it exists, else None.
    """
    pending = _PENDING.get()
    t = Path(os.path.abspath(target))
    if pending is not None and t in pending:
        return pending[t]
    return t if t.is_file() else None


@contextlib.contextmanager
def all_or_nothing() -> Iterator[None]:
    """The files and folders written inside the block replace their targets together, or none does.

    Each write goes to its temporary as usual; the renames (and folder swaps)
    are done when the block ends without an error. When it raises (a full
    disk while writing the fifth of eight outputs), every temporary is removed
    and the previous outputs stay as they were, as a set.
    """
    if _BATCH.get() is not None:  # nested: part of the enclosing set
        yield
        return
    batch: list[tuple[str, Path | None, Path | None, int | None]] = []
    token = _BATCH.set(batch)
    token_p = _PENDING.set({})
    try:
        yield
    except BaseException:
        for kind, tmp, _t, fd in batch:
            if kind == "file" and tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
            elif kind == "dir" and tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
            elif kind == "fd" and fd is not None:
                os.close(fd)
        raise
    finally:
        _BATCH.reset(token)
        _PENDING.reset(token_p)
        fds = [fd for kind, _tmp, _t, fd in batch if kind == "fd" and fd is not None]
    try:
        for kind, tmp, t, _fd in batch:
            if kind == "file":
                os.replace(tmp, t)  # type: ignore[arg-type]
            elif kind == "dir":
                _swap_into_place(tmp, t)  # type: ignore[arg-type]
    finally:
        for fd in fds:
            os.close(fd)


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike[str], *, fsync: bool = True) -> Iterator[Path]:
    """Yield a temporary path next to ``target``; rename it over ``target`` when the block succeeds.

    The block writes the temporary file (any writer: the temporary keeps the
    target's suffix). It is flushed to disk (``fsync``, unless ``fsync`` is
    false) before the rename, so a crash of the machine cannot leave an empty
    file under the target's name. When the block raises, the temporary is
    removed and ``target`` keeps its previous content.
    """
    with _pinned(Path(os.path.abspath(target))) as t:
        t.parent.mkdir(parents=True, exist_ok=True)
        clean_stale(t)
        tmp = temp_sibling(t)
        try:
            yield tmp
            if fsync:
                with open(tmp, "rb+") as fh:
                    os.fsync(fh.fileno())
            batch = _BATCH.get()
            if batch is not None:
                batch.append(("file", tmp, t, None))  # renamed with the rest of the set
                pending = _PENDING.get()
                if pending is not None:
                    pending[Path(os.path.abspath(target))] = tmp
            else:
                os.replace(tmp, t)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if isinstance(exc, OSError) and not isinstance(exc, WriteRefused):
                raise _named(exc, target, pinned=t != Path(os.path.abspath(target))) from exc
            raise


def write_bytes(target: str | os.PathLike[str], data: bytes, *, fsync: bool = True) -> Path:
    """Write ``data`` to ``target`` atomically; return the path."""
    with atomic_path(target, fsync=fsync) as tmp, open(tmp, "wb") as fh:
        fh.write(data)
    return Path(target)


def write_text(target: str | os.PathLike[str], text: str, *, encoding: str = "utf-8", fsync: bool = True) -> Path:
    """Write ``text`` to ``target`` atomically; return the path."""
    return write_bytes(target, text.encode(encoding), fsync=fsync)


def _exchange(a: Path, b: Path) -> int:
    """Swap two paths with renameat2(RENAME_EXCHANGE); 0, or the errno (ENOSYS when unavailable)."""
    fn = _renameat2()
    if fn is None:
        return errno.ENOSYS
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return 0
    return ctypes.get_errno()


_RENAMEAT2: list = []


def _renameat2() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    if not _RENAMEAT2:
        fn = None
        if os.name == "posix":
            with contextlib.suppress(OSError, AttributeError):
                fn = ctypes.CDLL(None, use_errno=True).renameat2
                fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
                fn.restype = ctypes.c_int
        _RENAMEAT2.append(fn)
    return _RENAMEAT2[0]


def _remove(p: Path) -> None:
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            os.unlink(p)


def _swap_into_place(tmp: Path, target: Path) -> None:
    """Put the folder ``tmp`` at ``target``, replacing what is there (which is then removed)."""
    exchange = True
    for _ in range(10_000):  # each failed attempt means another writer made progress
        if exchange:
            err = _exchange(tmp, target)
            if err == 0:
                _remove(tmp)  # now holds the previous content
                return
            if err not in (errno.ENOENT,):
                if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
                    exchange = False  # not supported here: two renames
                else:
                    raise OSError(err, os.strerror(err), str(target))
        try:
            os.rename(tmp, target)  # the target is missing (or an empty folder)
            return
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
        if exchange:
            continue
        old = temp_sibling(target, "old", suffix=False)
        try:
            os.rename(target, old)
        except FileNotFoundError:
            continue
        try:
            os.rename(tmp, target)
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
            continue  # another writer got in between; its copy is complete too
        finally:
            _remove(old)
        return
    raise OSError(errno.EBUSY, "too many concurrent writers", str(target))


@contextlib.contextmanager
def atomic_dir(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a new temporary folder next to ``target``; swap it into place when the block succeeds.

    The previous content of ``target`` (a folder, if any) is removed after
    the swap. When the block raises, the temporary folder is removed and
    ``target`` is untouched.
    """
    with _pinned(Path(os.path.abspath(target))) as t:
        t.parent.mkdir(parents=True, exist_ok=True)
        clean_stale(t)
        tmp = temp_sibling(t, suffix=False)
        tmp.mkdir()
        try:
            yield tmp
            batch = _BATCH.get()
            if batch is not None:
                batch.append(("dir", tmp, t, None))  # swapped with the rest of the set
            else:
                _swap_into_place(tmp, t)
        except BaseException as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            if isinstance(exc, OSError) and not isinstance(exc, WriteRefused):
                raise _named(exc, target, pinned=t != Path(os.path.abspath(target))) from exc
            raise


def _named(exc: OSError, target: str | os.PathLike[str], *, pinned: bool = False) -> OSError:
    """The error of a failed write, naming the file being written (not its temporary): ``out/r.md: No space ...``.

    Under a confinement (``pinned``), a folder that vanished under the write was removed or swapped away
    while the run wrote: that is a refusal, not a missing file.
    """
    if pinned and exc.errno == errno.ENOENT:
        return WriteRefused(f"{target}: its folder was removed or replaced while the run wrote it; not written")
    return type(exc)(exc.errno, exc.strerror or str(exc), str(target)) if exc.errno else OSError(str(exc))
