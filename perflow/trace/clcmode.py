"""The clock-correction mode in effect: the ``clock_correction`` setting of trace reads.

Kept apart from :mod:`perflow.trace.clc` (the correction itself: numpy and
compiled kernels) so that :func:`perflow.readers.read` and the command line
can set the mode around a read at no import cost; :mod:`perflow.trace.clc`
re-exports these names.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

__all__ = ["MODES", "mode", "clock_correction"]

#: values of the ``clock_correction`` setting
MODES = ("auto", "on", "off")

_MODE: contextvars.ContextVar[str] = contextvars.ContextVar("perflow_clock_correction", default="auto")


def mode(value: str | None = None) -> str:
    """The clock-correction mode in effect: ``value`` if given, else the one set by :func:`clock_correction`."""
    m = _MODE.get() if value is None else value
    if m not in MODES:
        raise ValueError(f"clock_correction must be one of {', '.join(map(repr, MODES))}, not {m!r}")
    return m


@contextlib.contextmanager
def clock_correction(value: str) -> Iterator[None]:
    """Read traces inside the block with ``clock_correction=value`` ("auto", "on" or "off")."""
    token = _MODE.set(mode(value))
    try:
        yield
    finally:
        _MODE.reset(token)
