"""Shared column storage the fast decoder's workers write into directly.

Every column of every event table is one anonymous shared memory mapping,
cut into one *segment* per location, sized by the number of events the
definitions declare for that location (plus one row, so that reading past
the last event can detect the end). Worker processes, forked after the
arena exists, write their locations' rows straight into their segments; the
parent then slides the segments together (in place), hands the pages past
the end back to the system (``MADV_REMOVE``) and wraps the mappings as the
final numpy columns. No event data is copied between processes, and memory
that was reserved but never written is never resident.

A location with more events than declared (a wrong or missing count) spills
into private buffers in its worker, which are returned by pickling; the
affected table is then assembled by copying instead.
"""

from __future__ import annotations

import mmap
import platform

import numpy as np

from . import _layout as L

__all__ = ["Arena", "Spill"]

_PAGE = mmap.PAGESIZE
# MAP_NORESERVE (not exported by Python's mmap module): do not account the
# (mostly never touched) reservation against the overcommit limit.
_NORESERVE = 0x4000 if platform.system() == "Linux" and platform.machine() in ("x86_64", "aarch64") else 0


def _map(nbytes: int) -> mmap.mmap:
    size = max(_PAGE, -(-nbytes // _PAGE) * _PAGE)
    flags = mmap.MAP_SHARED | getattr(mmap, "MAP_ANONYMOUS", 0x20)
    try:
        return mmap.mmap(-1, size, flags=flags | _NORESERVE)
    except (OSError, ValueError):
        return mmap.mmap(-1, size, flags=flags)


class Spill:
    """Rows of one table of one location that did not fit its segment (all of that location's rows)."""

    def __init__(self, columns: dict[str, np.ndarray]) -> None:
        self.columns = columns


class Arena:
    """Per table and column, one shared mapping divided into per-location segments.

    Parameters
    ----------
    rows : numpy.ndarray
        Segment capacity in rows per location (declared events + 1).
    max_members : int
        Largest metric class; the metric table gets ``rows * max_members``.
    """

    def __init__(self, rows: np.ndarray, max_members: int) -> None:
        self.nloc = len(rows)
        self.caps: dict[str, np.ndarray] = {}
        self.starts: dict[str, np.ndarray] = {}
        self.maps: dict[str, dict[str, mmap.mmap]] = {}
        self.cols: dict[str, dict[str, np.ndarray]] = {}
        for table, cols in L.TABLE_COLUMNS.items():
            cap = rows.astype(np.int64) * (max_members if table == "metric_events" else 1)
            start = np.zeros(self.nloc + 1, dtype=np.int64)
            np.cumsum(cap, out=start[1:])
            self.caps[table], self.starts[table] = cap, start
            self.maps[table], self.cols[table] = {}, {}
            for c, dt in cols.items():
                mm = _map(int(start[-1]) * np.dtype(dt).itemsize)
                self.maps[table][c] = mm
                self.cols[table][c] = np.frombuffer(mm, dtype=dt, count=int(start[-1]))

    def segment(self, table: str, loc: int) -> tuple[dict[str, np.ndarray], int]:
        """The columns (views) of location ``loc``'s segment of ``table``, and its capacity."""
        a, b = int(self.starts[table][loc]), int(self.starts[table][loc + 1])
        return {c: col[a:b] for c, col in self.cols[table].items()}, b - a

    def finalize(self, counts: dict[str, np.ndarray], spills: dict[tuple[str, int], Spill]) -> dict[str, dict]:
        """Assemble the final tables (columns without ``location``; ``pos`` still per location).

        Parameters
        ----------
        counts : dict
            Per table, the number of rows written for each location.
        spills : dict
            ``(table, location) -> Spill`` for segments that overflowed.
        """
        out: dict[str, dict[str, np.ndarray]] = {}
        for table in L.TABLE_COLUMNS:
            n = counts[table].astype(np.int64)
            dst = np.zeros(self.nloc + 1, dtype=np.int64)
            np.cumsum(n, out=dst[1:])
            total = int(dst[-1])
            src = self.starts[table]
            spilled = {loc: s for (t, loc), s in spills.items() if t == table}
            cols: dict[str, np.ndarray] = {}
            for c in L.TABLE_COLUMNS[table]:
                col = self.cols[table].pop(c)
                if spilled:  # rows do not fit their segments: copy into a fresh array
                    new = np.empty(total, dtype=col.dtype)
                    part = None
                    for loc in range(self.nloc):
                        part = spilled[loc].columns[c] if loc in spilled else col[src[loc] : src[loc] + n[loc]]
                        new[dst[loc] : dst[loc + 1]] = part[: n[loc]]
                    del col, part
                    self.maps[table].pop(c)  # unmapped once the last view is gone
                    cols[c] = new
                    continue
                for loc in range(1, self.nloc):  # slide segments left, in location order
                    if n[loc] and dst[loc] != src[loc]:
                        col[dst[loc] : dst[loc + 1]] = col[src[loc] : src[loc] + n[loc]]
                mm = self.maps[table].pop(c)
                used = -(-total * col.itemsize // _PAGE) * _PAGE
                remove = getattr(mmap, "MADV_REMOVE", None)  # Linux: free the pages of the tail
                if used < len(mm) and remove is not None and hasattr(mm, "madvise"):
                    mm.madvise(remove, used, len(mm) - used)
                cols[c] = col[:total]
            out[table] = cols
        return out
