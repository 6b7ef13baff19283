"""Time a recorded thread spent off the CPU, as region instances ``off_cpu``.

Each native sample carries its *window*: from the previous sample (or from the
end of an MPI call during which the timer expired) to its own time stamp, and
the thread's CPU time in that window. The part of the window inside the
sample's stretch (after the last region event before it) that the CPU time
cannot account for is time the thread was descheduled or blocked outside
MPI: at least ``L - cpu`` of the ``L`` seconds of the window that lie in the
stretch (the thread may have used its CPU time anywhere in the window, so this
never claims more). It becomes an instance of the region ``off_cpu`` at the
start of that part, ``[a, a + off]``, whose call stack is the sample's (the
code that was waiting for the CPU, or blocked in a system call), and the
sample then covers the rest of the window (see :mod:`perflow.trace.pieces`).

Inside an MPI call the recorder measures the same from the first expiry of
the timer in the call to its end (an OFF record: the seconds of that span the
CPU time does not account for); they become an ``off_cpu`` instance inside
the call's instance, starting at that expiry.

Python samples carry no window: theirs starts at the previous sample and their
weight is their CPU time. Off-CPU time shorter than a quarter of the sampling
period is left to the sample (timer jitter, not descheduling).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..kinds import OFF_CPU

__all__ = ["OffCpu", "off_cpu_windows", "Placed", "OFF_CPU", "MIN_OFF_PERIODS"]

#: off-CPU time shorter than this many sampling periods stays with the sample
MIN_OFF_PERIODS = 0.25


@dataclass
class OffCpu:
    """The off-CPU intervals of one location: which sample, and the span ``[start, end]``."""

    sample: np.ndarray
    start: np.ndarray
    end: np.ndarray

    def __len__(self) -> int:
        return len(self.sample)


def off_cpu_windows(
    reg_time: np.ndarray,
    time: np.ndarray,
    nregion: np.ndarray,
    weight: np.ndarray,
    window_start: np.ndarray,
    window_cpu: np.ndarray,
    period: float,
) -> OffCpu:
    """The off-CPU interval of each sample of one location that has one (samples in stream order).

    Parameters
    ----------
    reg_time : numpy.ndarray
        Time of each region record of the location.
    time, nregion, weight : numpy.ndarray
        Per sample: time stamp, region records before it, weight (s).
    window_start, window_cpu : numpy.ndarray
        Per sample: start of its window and the CPU time in it (NaN: not
        recorded; then the window starts at the previous sample and its CPU
        time is the weight).
    period : float
        The sampling period (s).

    Examples
    --------
    A region record at 0; samples at 1 (window from 0, 0.4 s of CPU) and 2
    (window from 1, all of it on the CPU):

    >>> o = off_cpu_windows(np.array([0.0]), np.array([1.0, 2.0]), np.array([1, 1]), np.array([1.0, 1.0]),
    ...                     np.array([0.0, 1.0]), np.array([0.4, 1.0]), 1.0)
    >>> o.sample.tolist(), o.start.tolist(), o.end.tolist()
    ([0], [0.0], [0.6])
    """
    n = len(time)
    if not n or not len(reg_time):
        e = np.zeros(0)
        return OffCpu(np.zeros(0, np.int64), e, e)
    prev_sample = np.r_[-np.inf, time[:-1]]
    start = np.where(np.isfinite(window_start), window_start, prev_sample)
    cpu = np.where(np.isfinite(window_cpu), window_cpu, weight)
    stretch = reg_time[np.clip(nregion - 1, 0, len(reg_time) - 1)]
    a = np.maximum(start, np.where(nregion >= 1, stretch, -np.inf))
    span = time - a
    off = span - np.clip(cpu, 0.0, np.maximum(span, 0.0))
    keep = np.flatnonzero(np.isfinite(a) & (span > 0) & (off >= MIN_OFF_PERIODS * period))
    return OffCpu(keep.astype(np.int64), a[keep], a[keep] + off[keep])


class Placed:
    """Region records of a location with off-CPU intervals inserted, and where other events go.

    Parameters
    ----------
    time, kind, region : numpy.ndarray
        The location's region records (kind 0 Enter, 1 Leave).
    ins, start, end, off_region : numpy.ndarray
        Per off-CPU interval: the region records before it (it goes between
        records ``ins - 1`` and ``ins``), its span and its region id.

    Examples
    --------
    Records at 0 and 5, an interval [2, 3] after the first:

    >>> p = Placed(np.array([0.0, 5.0]), np.array([0, 1]), np.array([0, 0]),
    ...            np.array([1]), np.array([2.0]), np.array([3.0]), np.array([7]))
    >>> p.time.tolist(), p.kind.tolist(), p.region.tolist()
    ([0.0, 2.0, 3.0, 5.0], [0, 0, 1, 1], [0, 7, 7, 0])
    >>> p.position(np.array([1, 1, 1, 2]), np.array([1.0, 2.0, 4.0, 6.0])).tolist()
    [1, 1, 3, 4]
    """

    def __init__(
        self,
        time: np.ndarray,
        kind: np.ndarray,
        region: np.ndarray,
        ins: np.ndarray,
        start: np.ndarray,
        end: np.ndarray,
        off_region: np.ndarray,
    ) -> None:
        order = np.lexsort((start, ins))
        self._ins, self._start = ins[order].astype(np.int64), start[order].astype(np.float64)
        n, m = len(time), len(order)
        at_old = self.position(np.arange(n), np.full(n, np.inf))
        at_enter = self._ins + 2 * np.arange(m)
        self.time = np.empty(n + 2 * m)
        self.kind = np.empty(n + 2 * m, dtype=np.asarray(kind).dtype)
        self.region = np.empty(n + 2 * m, dtype=np.asarray(region).dtype)
        self.time[at_old], self.kind[at_old], self.region[at_old] = time, kind, region
        self.time[at_enter], self.kind[at_enter], self.region[at_enter] = self._start, 0, off_region[order]
        self.time[at_enter + 1], self.kind[at_enter + 1], self.region[at_enter + 1] = end[order], 1, off_region[order]

    def position(self, before: np.ndarray, time: np.ndarray) -> np.ndarray:
        """Region records before each event in the new numbering, from those before it in the old one and its time.

        An interval between the same two old records as the event comes before it when it starts before
        the event's time (a sample's own interval does; the next sample's, which starts at its time, does
        not).
        """
        before = np.asarray(before, dtype=np.int64)
        m, q = len(self._ins), len(before)
        if not m:
            return before.copy()
        # offs and queries in one (ins, time) order, queries first on ties: the offs sorted before each query
        ins = np.r_[self._ins, before]
        t = np.r_[self._start, np.asarray(time, dtype=np.float64)]
        is_off = np.r_[np.ones(m, np.int8), np.zeros(q, np.int8)]
        order = np.lexsort((is_off, t, ins))
        offs_before = np.cumsum(is_off[order])
        out = np.empty(q, dtype=np.int64)
        sel = is_off[order] == 0
        out[order[sel] - m] = offs_before[sel]
        return before + 2 * out
