"""The fast decoder's worker processes: the plan of locations per worker, running them forked, the watchdog.

:func:`run_workers` decodes each worker's contiguous range of locations
(:func:`plan_locations`) in a forked child (:mod:`._forked`) writing into the shared
:class:`~._arena.Arena`; a watchdog in the parent (:class:`Watchdog`) stops
the decoding when a worker makes no progress or its private memory grows
past a bound, and a crash or hang becomes a :class:`~perflow.errors.FormatError`
naming the event file the worker was reading.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from ...errors import FormatError
from ._arena import Arena
from ._callbacks import callback_addresses
from ._fast import decode_locations, event_file
from ._forked import CrashError, HangError, run_forked

__all__ = ["run_workers", "plan_locations", "deadline", "Watchdog"]

#: a worker that has not finished after this long (plus size / rate) is presumed hung and killed
WATCHDOG_SECONDS = 120.0
WATCHDOG_BYTES_PER_SECOND = 2e6
#: a decoding worker that spends this much CPU time without finishing a batch of events is stuck (killed)
STALL_CPU_SECONDS = 3.0
#: ... or whose private memory grows by more than this while reading (its columns are shared memory)
MAX_PRIVATE_GROWTH = 1 << 30


def deadline(anchor: str) -> float:
    """Time by which a worker must be done, from the archive's size."""
    d = os.path.dirname(anchor)
    size = sum(e.stat().st_size for e in os.scandir(d) if e.is_file())
    sub = os.path.splitext(anchor)[0]
    if os.path.isdir(sub):
        size += sum(e.stat().st_size for e in os.scandir(sub) if e.is_file())
    return time.monotonic() + WATCHDOG_SECONDS + size / WATCHDOG_BYTES_PER_SECOND


def _worker(
    anchor: str, arena: Arena, worker: int, locs: list[int], refs: list[int], maps: dict[str, Any],
    max_events: int | None,
) -> tuple[list[Any], dict[str, int]]:  # fmt: skip
    return decode_locations(anchor, arena, worker, locs, refs, maps, max_events)


def plan_locations(sizes: list[int], n_tasks: int) -> list[list[int]]:
    """Split the location indices into at most ``n_tasks`` contiguous ranges of similar total size.

    Contiguous, so that the workers' rows, concatenated in worker order, are in location order.
    """
    n = len(sizes)
    if n == 0:
        return []
    cum = np.cumsum(np.asarray(sizes, dtype=np.float64) + 1.0)
    cuts = np.searchsorted(cum, cum[-1] * np.arange(1, n_tasks) / n_tasks, side="left") + 1
    bounds = np.unique(np.r_[0, np.clip(cuts, 1, n), n])
    return [list(range(int(a), int(b))) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def _cpu_and_memory(pid: int) -> tuple[float, int] | None:
    """CPU seconds and private (anonymous) resident bytes of a child process, where /proc tells (Linux)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        with open(f"/proc/{pid}/status", "rb") as f:
            anon = next((int(line.split()[1]) for line in f if line.startswith(b"RssAnon:")), 0)
    except (OSError, IndexError, ValueError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), anon * 1024


class Watchdog:
    """Kills the decoding when a worker makes no progress or its private memory grows past a bound.

    A worker publishes (location, events read) after each batch of at most
    :data:`BATCH` events; a batch takes milliseconds. A worker that spends
    :data:`STALL_CPU_SECONDS` of CPU time without finishing one, or whose
    private memory (the columns are shared memory, not counted) grows by more
    than :data:`MAX_PRIVATE_GROWTH`, is stuck in the OTF2 library on a damaged
    event file: the decoding stops at once, naming that file.
    """

    def __init__(self, arena: Arena) -> None:
        self.arena = arena
        self.seen: dict[int, tuple[tuple[int, int], float]] = {}
        self.base: dict[int, int] = {}

    def __call__(self, pids: list[int]) -> None:
        for k, pid in enumerate(pids):
            got = _cpu_and_memory(pid)
            if got is None:
                continue
            cpu, anon = got
            here = (int(self.arena.progress[k, 0]), int(self.arena.progress[k, 1]))
            base = self.base.setdefault(k, anon)
            if here[0] >= 0 and anon - base > MAX_PRIVATE_GROWTH:
                raise HangError(k, f"used {(anon - base) / 2**20:,.0f} MB of memory")
            last = self.seen.get(k)
            if last is None or last[0] != here:
                self.seen[k] = (here, cpu)
            elif here[0] >= 0 and cpu - last[1] > STALL_CPU_SECONDS:
                raise HangError(k, f"spent {cpu - last[1]:.1f} CPU seconds without progress")


def _failed_location(
    anchor: str, arena: Arena, plan: list[list[int]], refs: list[int], e: CrashError
) -> tuple[str, str]:
    """The event file a failed worker was reading (the anchor when it was between files) and how far it got."""
    loc, read = (int(x) for x in arena.progress[e.index])
    if loc < 0:
        idx = plan[e.index]
        files = ", ".join(os.path.basename(event_file(anchor, refs[i])) for i in idx[:5])
        return anchor, f"one of the event files {files}{', ...' if len(idx) > 5 else ''}"
    return event_file(anchor, refs[loc]), f"this event file (location {refs[loc]}, after {read:,} event records)"


def run_workers(
    anchor: str, arena: Arena, plan: list[list[int]], refs: list[int], maps: dict, jobs: int, max_events: int | None
) -> tuple[list[Any], list[dict[str, int]]]:
    results: list[Any] = [None] * len(refs)
    totals: list[dict[str, int]] = []
    if jobs == 0:
        for k, idx in enumerate(plan):
            out, rows = _worker(anchor, arena, k, idx, [refs[i] for i in idx], maps, max_events)
            for i, r in zip(idx, out):
                results[i] = r
            totals.append(rows)
        return results, totals
    callback_addresses()  # compile/load once here; forked workers inherit the code
    tasks = [(_worker, (anchor, arena, k, idx, [refs[i] for i in idx], maps, max_events)) for k, idx in enumerate(plan)]
    try:
        outs = run_forked(tasks, deadline(anchor), monitor=Watchdog(arena))
    except CrashError as e:
        path, what = _failed_location(anchor, arena, plan, refs, e)
        if isinstance(e, HangError):
            raise FormatError(
                path, f"the OTF2 library {e.detail} reading {what}: the file is truncated or corrupt"
            ) from None
        raise FormatError(path, f"the OTF2 library crashed reading {what} ({e.detail}): corrupt trace data") from None
    for idx, (out, rows) in zip(plan, outs):
        for i, r in zip(idx, out):
            results[i] = r
        totals.append(rows)
    return results, totals
