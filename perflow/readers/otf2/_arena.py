"""Shared column storage the fast decoder's workers write into directly, sized by what they decode.

Every column of every event table is one shared in-memory file (``memfd``
on Linux, else an unlinked temporary file) holding one *slot* per worker:
worker ``k`` appends the rows of its locations (a contiguous range of
locations, in order) at file offset ``k * slot``. A slot is only a range of
file offsets (the file is sparse): a worker maps a window over the start of
its slot and maps a larger one when its rows outgrow it, so the memory and
the address space it uses follow the rows it has decoded, never the event
counts the definitions declare (which may be wrong, or huge).

When the workers are done, :meth:`Arena.finalize` maps each column's final
array at offset 0 (worker 0's rows are already in place), copies the later
workers' rows behind them in chunks (freeing each source chunk at once), and
truncates the file to the rows written: no event data crosses a pipe, worker
0's rows are never copied, and what was never written is never resident.

A small shared ``progress`` block (one row per worker: location being read,
events read so far) lets the parent see which event file a worker is stuck
on (:mod:`._decode`'s watchdog).
"""

from __future__ import annotations

import mmap
import os
import tempfile

import numpy as np

from . import _layout as L

__all__ = ["Arena", "Writer", "GRAIN", "SLOT_BYTES"]

_PAGE = mmap.ALLOCATIONGRANULARITY
#: rows of a worker's first window per table (grown by doubling)
GRAIN = 1 << 16
#: file offsets of one worker's slot in a column's file (a sparse file: offsets cost nothing)
SLOT_BYTES = 1 << 40
#: bytes copied at a time when finalize moves a later worker's rows into place
_CHUNK = 32 << 20
_POPULATE = getattr(mmap, "MAP_POPULATE", 0)
_MADV_REMOVE = getattr(mmap, "MADV_REMOVE", None)


def _round(nbytes: int) -> int:
    return max(_PAGE, -(-nbytes // _PAGE) * _PAGE)


def _shared_file(name: str) -> int:
    """A file descriptor of a new, empty, unnamed file in memory (or on the temporary file system)."""
    if hasattr(os, "memfd_create"):
        try:
            return os.memfd_create(f"perflow-{name}", getattr(os, "MFD_CLOEXEC", 0))
        except OSError:
            pass
    fd, path = tempfile.mkstemp(prefix="perflow-otf2-")
    os.unlink(path)
    return fd


class Arena:
    """Per table and column, one shared file divided into one slot per worker.

    Parameters
    ----------
    n_workers : int
        Workers (slots per file).
    slot_bytes : int
        File offsets per slot (:data:`SLOT_BYTES`): only offsets in a sparse
        file, nothing is reserved or mapped.
    """

    def __init__(self, n_workers: int, slot_bytes: int = 0) -> None:
        self.n_workers = n_workers
        self.fds: dict[str, dict[str, int]] = {}
        self.slot: dict[str, dict[str, int]] = {}  # bytes per slot, per column
        self.slot_rows: dict[str, int] = {}
        for table, cols in L.TABLE_COLUMNS.items():
            self.fds[table], self.slot[table] = {}, {}
            widest = max(np.dtype(dt).itemsize for dt in cols.values())
            self.slot_rows[table] = (slot_bytes or SLOT_BYTES) // widest
            for c, dt in cols.items():
                size = _round(self.slot_rows[table] * np.dtype(dt).itemsize)
                fd = _shared_file(f"{table}.{c}")
                os.ftruncate(fd, size * n_workers)  # sparse: nothing is allocated
                self.fds[table][c], self.slot[table][c] = fd, size
        self._progress_map = mmap.mmap(-1, _round(16 * max(n_workers, 1)))
        #: per worker: location index being read (-1 none), events read so far
        self.progress = np.frombuffer(self._progress_map, dtype=np.int64, count=2 * max(n_workers, 1)).reshape(-1, 2)
        self.progress[:, 0] = -1

    def writer(self, worker: int) -> Writer:
        """The columns of ``worker``'s slots (call it in that worker)."""
        return Writer(self, worker)

    def finalize(self, rows: list[dict[str, int]]) -> dict[str, dict[str, np.ndarray]]:
        """The final tables: per table, columns holding every worker's rows in worker order.

        Parameters
        ----------
        rows : list of dict
            Per worker, the rows it wrote in each table.
        """
        out: dict[str, dict[str, np.ndarray]] = {}
        for table, cols in L.TABLE_COLUMNS.items():
            n = [int(r.get(table, 0)) for r in rows] + [0] * (self.n_workers - len(rows))
            total = sum(n)
            out[table] = {}
            for c, dt in cols.items():
                out[table][c] = self._column(self.fds[table].pop(c), np.dtype(dt), n, self.slot[table][c], total)
        self._progress_map = None  # type: ignore[assignment]
        return out

    def _column(self, fd: int, dt: np.dtype, n: list[int], slot: int, total: int) -> np.ndarray:
        try:
            if total == 0:
                return np.zeros(0, dtype=dt)
            size = _round(total * dt.itemsize)
            final = mmap.mmap(fd, size, flags=mmap.MAP_SHARED | _POPULATE)
            col = np.frombuffer(final, dtype=dt, count=total)
            start = n[0]
            for k in range(1, len(n)):
                if not n[k]:
                    continue
                src_map = mmap.mmap(fd, _round(n[k] * dt.itemsize), offset=k * slot)
                src = np.frombuffer(src_map, dtype=dt, count=n[k])
                step = max(1, _CHUNK // dt.itemsize)
                for a in range(0, n[k], step):
                    b = min(n[k], a + step)
                    col[start + a : start + b] = src[a:b]
                    if _MADV_REMOVE is not None:  # free the copied source pages right away
                        lo = (a * dt.itemsize // mmap.PAGESIZE) * mmap.PAGESIZE
                        hi = (b * dt.itemsize // mmap.PAGESIZE) * mmap.PAGESIZE if b < n[k] else len(src_map)
                        if hi > lo:
                            src_map.madvise(_MADV_REMOVE, lo, hi - lo)
                del src
                src_map.close()
                start += n[k]
            os.ftruncate(fd, size)  # the later slots and the slack go back to the system
            return col
        finally:
            os.close(fd)

    def close(self) -> None:
        """Release the files not finalized (after a failure)."""
        for cols in self.fds.values():
            for fd in cols.values():
                try:
                    os.close(fd)
                except OSError:
                    pass
            cols.clear()


class Writer:
    """One worker's windows over its slots: columns that grow (by mapping larger windows) as rows arrive."""

    def __init__(self, arena: Arena, worker: int) -> None:
        self.arena, self.worker = arena, worker
        self.cols: dict[str, dict[str, np.ndarray]] = {}
        self.cap: dict[str, int] = {}
        self._maps: dict[str, list[mmap.mmap]] = {}
        for table in L.TABLE_COLUMNS:
            self._map(table, min(GRAIN, arena.slot_rows[table]))

    def _map(self, table: str, rows: int) -> None:
        a = self.arena
        cols, maps = {}, []
        for c, dt in L.TABLE_COLUMNS[table].items():
            dt = np.dtype(dt)
            size = min(_round(rows * dt.itemsize), a.slot[table][c])
            m = mmap.mmap(a.fds[table][c], size, offset=self.worker * a.slot[table][c])
            maps.append(m)
            cols[c] = np.frombuffer(m, dtype=dt, count=min(rows, size // dt.itemsize))
        self.cols[table], self._maps[table] = cols, maps
        self.cap[table] = min(len(x) for x in cols.values())

    def grow(self, table: str, need: int) -> bool:
        """Make room for ``need`` rows of ``table`` (False when its slot cannot hold them)."""
        if need <= self.cap[table]:
            return True
        limit = self.arena.slot_rows[table]
        if need > limit:
            return False
        self._map(table, min(limit, max(need, 2 * self.cap[table])))  # old views keep the old windows alive
        return True

    def rows(self, table: str) -> int:
        """Capacity of ``table``'s current window, in rows."""
        return self.cap[table]
