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

Python samples carry no window: theirs starts at the previous sample and their
weight is their CPU time. Off-CPU time shorter than a quarter of the sampling
period is left to the sample (timer jitter, not descheduling).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..kinds import OFF_CPU

__all__ = ["OffCpu", "off_cpu_windows", "insert_off_cpu", "OFF_CPU", "MIN_OFF_PERIODS"]

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


def insert_off_cpu(
    time: np.ndarray, kind: np.ndarray, region: np.ndarray, nregion: np.ndarray, off: OffCpu, off_region: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A location's region records with an Enter/Leave pair per off-CPU interval inserted.

    Parameters
    ----------
    time, kind, region : numpy.ndarray
        The location's region records (kind 0 Enter, 1 Leave).
    nregion : numpy.ndarray
        Region records before each sample (stream order).
    off : OffCpu
        The off-CPU intervals (of samples in stream order).
    off_region : numpy.ndarray
        Region id of each interval.

    Returns
    -------
    (time, kind, region, shift, sample_pos)
        The merged records; ``shift[b]``, for ``b`` region records before an
        event in the old numbering, is the count in the new one (for events
        inside MPI calls, which no off-CPU interval interrupts); and each
        sample's count of region records before it in the new numbering.

    Examples
    --------
    >>> t, k, r, shift, pos = insert_off_cpu(np.array([0.0, 5.0]), np.array([0, 1]), np.array([0, 0]),
    ...                                      np.array([1, 1]), OffCpu(np.array([1]), np.array([2.0]),
    ...                                      np.array([3.0])), np.array([7]))
    >>> t.tolist(), k.tolist(), r.tolist(), shift.tolist(), pos.tolist()
    ([0.0, 2.0, 3.0, 5.0], [0, 0, 1, 1], [0, 7, 7, 0], [0, 3, 4], [1, 3])
    """
    n, m = len(time), len(off)
    ins = nregion[off.sample].astype(np.int64)  # between old records ins - 1 and ins
    shift = np.arange(n + 1) + 2 * np.searchsorted(ins, np.arange(n + 1), side="right")
    at_old = shift[:n]
    at_enter = ins + 2 * np.arange(m)
    has = np.zeros(len(nregion), np.int64)
    has[off.sample] = 1
    sample_pos = nregion.astype(np.int64) + 2 * np.cumsum(has)
    nt = np.empty(n + 2 * m)
    nk = np.empty(n + 2 * m, dtype=np.asarray(kind).dtype)
    nr = np.empty(n + 2 * m, dtype=np.asarray(region).dtype)
    nt[at_old], nk[at_old], nr[at_old] = time, kind, region
    nt[at_enter], nk[at_enter], nr[at_enter] = off.start, 0, off_region
    nt[at_enter + 1], nk[at_enter + 1], nr[at_enter + 1] = off.end, 1, off_region
    return nt, nk, nr, shift, sample_pos
