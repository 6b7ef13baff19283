"""Run functions in forked child processes and collect their results through pipes.

The OTF2 C library only ever parses an archive inside such children: if it
crashes (or never returns) on a corrupted file, the caller gets a
:class:`~perflow.errors.FormatError` instead of losing its interpreter. A
fork starts in milliseconds and the child inherits everything already
loaded (the C library, the compiled callbacks, the shared output arena).
"""

from __future__ import annotations

import os
import pickle
import selectors
import signal
import struct
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from ...errors import FormatError

__all__ = ["run_forked", "CrashError", "HangError", "ChildTraceback"]

_HEADER = struct.Struct("<Q")
#: held from a child's pipe to the parent's close of its write end: a child forked by another thread (the Dask
#: engine's threaded workers decode at once) inherits no other child's write end, which would keep that pipe
#: open (its reader waiting for the other child's exit, and blaming a hang of that child on its own)
_FORK_LOCK = threading.Lock()


def _new_fork_lock() -> None:
    global _FORK_LOCK
    _FORK_LOCK = threading.Lock()  # a child starts with the lock its forking thread held


os.register_at_fork(after_in_child=_new_fork_lock)


class CrashError(Exception):
    """A child died without delivering its result; ``index`` is its task."""

    def __init__(self, index: int, detail: str) -> None:
        super().__init__(detail)
        self.index, self.detail = index, detail


class HangError(CrashError):
    """A child did not finish before the deadline (it was killed)."""


class ChildTraceback(Exception):
    """The traceback of an exception raised in a forked child, as text (the ``__cause__`` of the re-raised one).

    Python prints it above the parent's traceback (``perflow --debug`` shows both).
    """

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return f"\n\nIn the forked child process:\n{self.text}"


def _child(fn: Callable[..., Any], args: tuple, fd: int) -> None:
    try:
        try:
            out: tuple = ("ok", fn(*args))
        except FormatError as e:  # custom __init__: send the parts
            out = ("format", e.path, e.reason, e.where, traceback.format_exc())
        except BaseException as e:  # noqa: BLE001 - report, the parent re-raises
            exc = e if _picklable(e) else RuntimeError(f"{type(e).__name__}: {e}")
            out = ("exc", exc, traceback.format_exc())
        data = pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL)
        view = memoryview(_HEADER.pack(len(data)) + data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os._exit(0)


def _raise_early(buf: bytearray) -> None:
    """Re-raise the error a finished child reported (its result complete in ``buf``); nothing for a success."""
    if len(buf) < _HEADER.size or len(buf) != _HEADER.size + _HEADER.unpack_from(buf)[0]:
        return  # died without a result: reported with the others' results
    out = pickle.loads(memoryview(buf)[_HEADER.size :])
    _reraise(out)


def _reraise(out: tuple) -> None:
    if out[0] == "format":
        raise FormatError(out[1], out[2], where=out[3]) from ChildTraceback(out[4])
    if out[0] == "exc":
        raise out[1] from ChildTraceback(out[2])


def _picklable(e: BaseException) -> bool:
    try:
        pickle.loads(pickle.dumps(e))
    except Exception:  # noqa: BLE001
        return False
    return True


#: seconds between calls of a run's monitor
MONITOR_SECONDS = 0.25


def run_forked(
    tasks: Sequence[tuple[Callable[..., Any], tuple]],
    deadline: float,
    monitor: Callable[[list[int]], None] | None = None,
) -> list[Any]:
    """Run ``fn(*args)`` for every task, each in its own forked child, all at once.

    Returns the results in task order. A FormatError or other exception
    raised in a child is re-raised here (the first one in task order).
    ``monitor(pids)`` (the children's pids in task order) is called every
    :data:`MONITOR_SECONDS` while they run; a :class:`HangError` it raises
    kills them all.

    Raises
    ------
    CrashError
        A child died (e.g. by a signal) before delivering its result.
    HangError
        Not all children finished by ``deadline`` (a ``time.monotonic()``
        value); all children are killed.
    """
    pids: list[int] = []
    status: dict[int, int] = {}
    bufs: list[bytearray] = []
    sel = selectors.DefaultSelector()
    try:
        for i, (fn, args) in enumerate(tasks):
            with _FORK_LOCK:
                r, w = os.pipe()
                with warnings.catch_warnings():  # not thread-safe: under the lock
                    warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
                    pid = os.fork()
                if pid == 0:  # pragma: no cover - child
                    os.close(r)
                    _child(fn, args, w)
                os.close(w)
            pids.append(pid)
            bufs.append(bytearray())
            sel.register(r, selectors.EVENT_READ, i)
        open_fds = len(pids)
        while open_fds:
            left = deadline - time.monotonic()
            wait = min(left, MONITOR_SECONDS) if monitor is not None else left
            events = sel.select(timeout=max(wait, 0.0)) if left > 0 else []
            if not events and left <= wait:
                i = next(key.data for key in sel.get_map().values())
                raise HangError(i, "did not finish in time")
            if monitor is not None:
                monitor(pids)
            for key, _ in events:
                chunk = os.read(key.fd, 1 << 20)
                if chunk:
                    bufs[key.data] += chunk
                else:
                    sel.unregister(key.fd)
                    os.close(key.fd)
                    open_fds -= 1
                    if open_fds:
                        _raise_early(bufs[key.data])  # a failed child stops the others at once
    except BaseException:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        raise
    finally:
        for key in list(sel.get_map().values()):
            os.close(key.fd)
        sel.close()
        for pid in pids:
            try:
                status[pid] = os.waitpid(pid, 0)[1]
            except ChildProcessError:
                pass
    results = []
    for i, buf in enumerate(bufs):
        if len(buf) < _HEADER.size or len(buf) != _HEADER.size + _HEADER.unpack_from(buf)[0]:
            st = status.get(pids[i], 0)
            how = f"killed by signal {os.WTERMSIG(st)}" if os.WIFSIGNALED(st) else "died"
            raise CrashError(i, f"{how} before delivering its result")
        results.append(pickle.loads(memoryview(buf)[_HEADER.size :]))
    for out in results:
        _reraise(out)
    return [out[1] for out in results]
