"""Progress of long work, shown on standard error when the command line asks for it.

Library code reports coarse steps (a file decoded, a PAG built, a flow step
done, a figure rendered), never single events::

    from perflow import progress

    with progress.task("decoding traces.otf2", total=len(locations), unit="location") as t:
        for ...:
            ...
            t.advance()

    progress.notice("compiling analysis kernels (first run only, ~20 s)...")

Everything here is a no-op until :func:`enable` is called (the ``perflow``
command does so): then, when standard error is a terminal (and not quiet), a
task shows a progress display (rich) once it has taken more than
:data:`DELAY` seconds, and :func:`notice` prints one line. Otherwise nothing
is shown: a notice goes to the ``perflow`` logger (INFO level without
:func:`enable`, DEBUG level when enabled but not on a terminal).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

__all__ = ["DELAY", "Task", "enable", "disable", "enabled", "notice", "task"]

log = logging.getLogger("perflow")

#: seconds a task runs before its display appears
DELAY = 1.0

_LOCK = threading.Lock()
_CONF: dict[str, Any] = {"on": False, "bars": False, "stream": None, "quiet": False}


def enable(stream: TextIO | None = None, *, bars: bool | None = None, quiet: bool = False) -> None:
    """Show progress and notices on ``stream`` (standard error) when it is a terminal (or ``bars``), unless quiet."""
    s = stream if stream is not None else sys.stderr
    try:
        tty = bool(s.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        tty = False
    with _LOCK:
        _CONF.update(on=True, stream=s, quiet=quiet, bars=(tty if bars is None else bars) and not quiet)


def disable() -> None:
    """Back to silence (the library default)."""
    with _LOCK:
        _CONF.update(on=False, bars=False, stream=None, quiet=False)


def enabled() -> bool:
    """Whether progress bars are shown."""
    return bool(_CONF["bars"])


def notice(message: str) -> None:
    """A one-line notice: on the display's stream when shown (see :func:`enable`), else logged."""
    if _CONF["bars"]:
        with _LOCK:
            live = _LIVE["progress"]
            if live is not None:  # above the display, which rich redraws
                live.console.print(f"perflow: {message}", markup=False, highlight=False)
                return
        print(f"perflow: {message}", file=_CONF["stream"] or sys.stderr, flush=True)
    else:
        log.log(logging.DEBUG if _CONF["on"] else logging.INFO, "%s", message)


class Task:
    """One unit of long work; :meth:`advance` after each coarse step."""

    def __init__(self, description: str, total: int | None, unit: str) -> None:
        self.description, self.total, self.unit = description, total, unit
        self.done = 0
        self.started = time.monotonic()
        self._id: Any = None  # the row in the display, once shown

    def advance(self, n: int = 1) -> None:
        """Count ``n`` more steps done."""
        self.done += n
        with _LOCK:
            if self._id is not None and _LIVE["progress"] is not None:
                _LIVE["progress"].update(self._id, completed=self.done, count=self.count())

    def count(self) -> str:
        """``3/8 steps`` (empty when the total is unknown)."""
        return f"{self.done}/{self.total}" + (f" {self.unit}s" if self.unit else "") if self.total else ""

    def describe(self, description: str) -> None:
        """Change the text shown (e.g. the step being worked on)."""
        self.description = description
        with _LOCK:
            if self._id is not None and _LIVE["progress"] is not None:
                _LIVE["progress"].update(self._id, description=description)


# the display: one rich Progress for every running task, started DELAY seconds after the first one
_LIVE: dict[str, Any] = {"progress": None, "tasks": [], "timer": None}


def _show() -> None:
    with _LOCK:
        _LIVE["timer"] = None
        if not _LIVE["tasks"] or _LIVE["progress"] is not None or not _CONF["bars"]:
            return
        try:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                Progress,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
            )

            p = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.fields[count]}"),
                TimeElapsedColumn(),
                console=Console(file=_CONF["stream"] or sys.stderr),
                transient=True,
            )
            p.start()
        except Exception:  # noqa: BLE001 - a display problem never stops the work
            return
        _LIVE["progress"] = p
        for t in _LIVE["tasks"]:
            _add(p, t)


def _add(p: Any, t: Task) -> None:
    t._id = p.add_task(t.description, total=t.total, completed=t.done, count=t.count())


@contextmanager
def task(description: str, total: int | None = None, unit: str = "") -> Iterator[Task]:
    """A task, shown in the progress display when enabled on a terminal and longer than :data:`DELAY` seconds.

    Parameters
    ----------
    description : str
        What is being done ("decoding traces.otf2").
    total : int, optional
        Number of steps (None: unknown, shown with a spinner and the elapsed time).
    unit : str
        What a step is ("location", "step").
    """
    t = Task(description, total, unit)
    if not _CONF["bars"]:
        yield t
        return
    with _LOCK:
        _LIVE["tasks"].append(t)
        if _LIVE["progress"] is not None:
            _add(_LIVE["progress"], t)
        elif _LIVE["timer"] is None:
            timer = threading.Timer(DELAY, _show)
            timer.daemon = True
            _LIVE["timer"] = timer
            timer.start()
    try:
        yield t
    finally:
        with _LOCK:
            _LIVE["tasks"].remove(t)
            p = _LIVE["progress"]
            if p is not None and t._id is not None:
                p.remove_task(t._id)
            if not _LIVE["tasks"]:
                if _LIVE["timer"] is not None:
                    _LIVE["timer"].cancel()
                    _LIVE["timer"] = None
                if p is not None:
                    _LIVE["progress"] = None
                    p.stop()


def _after_fork_in_child() -> None:
    """A forked worker shows nothing: the display (and its thread) belong to the parent."""
    global _LOCK
    _LOCK = threading.Lock()
    _CONF.update(on=False, bars=False, stream=None, quiet=False)
    _LIVE.update(progress=None, tasks=[], timer=None)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
