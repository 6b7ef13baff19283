"""Timer sampling of the main thread's Python stack (standard library only).

:class:`SignalSampler` (the default) uses ``setitimer(ITIMER_PROF)``: every
period of the process's CPU time the kernel sends ``SIGPROF`` and Python runs
the handler in the main thread at its next bytecode, with the executing frame
at hand. No second thread competes for the GIL, which matters on a busy
machine: a sampling thread makes the main thread hand over the GIL and wait
until the sampler has been scheduled. System calls interrupted by the signal
are restarted (``siginterrupt(SIGPROF, False)``).

:class:`ThreadSampler` is the fallback (a program that handles ``SIGPROF``
itself, or recording started off the main thread): a thread wakes ``hz`` times
a second and reads the main thread's frame with :func:`sys._current_frames`.

Both weigh a sample by the main thread's (signal: the process's) CPU time
since the previous one, but no more than the wall time since the last MPI call
ended if one ended meanwhile, and skip samples inside recorded MPI calls.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from types import FrameType
from typing import Any

__all__ = ["SignalSampler", "ThreadSampler", "start_sampler"]


class _Weigher:
    """CPU time since the previous sample, less what went to MPI calls."""

    def __init__(self, rec: Any, cpu: Any) -> None:
        self.rec, self.cpu = rec, cpu
        self.last, self.last_wall = cpu(), time.monotonic()

    def __call__(self) -> float:
        now, wall = self.cpu(), time.monotonic()
        w = now - self.last
        if self.rec.t_mpi_exit > self.last_wall:
            w = min(w, wall - self.rec.t_mpi_exit)
        self.last, self.last_wall = now, wall
        return w


class SignalSampler:
    """SIGPROF/ITIMER_PROF sampling in the main thread."""

    def __init__(self, rec: Any, period: float) -> None:
        self.rec = rec
        self.weigh = _Weigher(rec, time.process_time)
        self.busy = False
        self.previous = signal.signal(signal.SIGPROF, self._on_signal)
        signal.siginterrupt(signal.SIGPROF, False)
        signal.setitimer(signal.ITIMER_PROF, period, period)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        rec = self.rec
        w = self.weigh()
        # not inside MPI calls, nor inside the recorder itself (its lock held, or this handler re-entered)
        if w <= 0 or rec.in_mpi or rec.closed or self.busy or frame is None or rec.lock_held():
            return
        self.busy = True
        try:
            rec.sample(time.monotonic(), w, rec.stack(frame))
        finally:
            self.busy = False

    def stop(self) -> None:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        signal.signal(signal.SIGPROF, self.previous if self.previous is not None else signal.SIG_DFL)


class ThreadSampler:
    """A thread that samples the main thread's stack ``1 / period`` times a second."""

    def __init__(self, rec: Any, period: float) -> None:
        self.rec = rec
        try:
            clock = time.pthread_getcpuclockid(rec.main_ident)
            cpu = lambda: time.clock_gettime(clock)  # noqa: E731
        except (AttributeError, OSError):
            cpu = time.monotonic
        self.weigh = _Weigher(rec, cpu)
        self.period = period
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="perflow-sampler", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        rec = self.rec
        while not self._stop.wait(self.period):
            w = self.weigh()
            if w <= 0 or rec.in_mpi:
                continue
            frame = sys._current_frames().get(rec.main_ident)
            if frame is not None:
                ids = rec.stack(frame)
                if not rec.in_mpi:
                    rec.sample(time.monotonic(), w, ids)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=1.0)


def start_sampler(rec: Any, hz: int, kind: str = "") -> SignalSampler | ThreadSampler | None:
    """Start sampling at ``hz`` (``kind`` ``"signal"`` or ``"thread"`` forces one); None when ``hz`` <= 0."""
    if hz <= 0:
        return None
    period = 1.0 / hz
    usable = (
        threading.current_thread() is threading.main_thread()
        and hasattr(signal, "setitimer")
        and signal.getsignal(signal.SIGPROF) in (signal.SIG_DFL, signal.SIG_IGN, None)
    )
    if kind != "thread" and usable:
        return SignalSampler(rec, period)
    return ThreadSampler(rec, period)
