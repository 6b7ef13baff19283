"""The fast OTF2 event decoder: the OTF2 C library driven with compiled callbacks.

Each location's event file is read by the OTF2 C library bundled with the
``otf2`` wheel (through :mod:`ctypes`); the library calls the numba/llvmlite
callbacks of :mod:`._callbacks`, which append rows to the worker's windows
of the shared :class:`._arena.Arena`. Python only runs between batches of
events, to check for errors, to map larger windows before they overflow,
and to publish its progress (location, events read) for the watchdog.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

import numpy as np

from ...codecs.otf2 import capi as _capi
from ...errors import FormatError
from . import _layout as L
from ._arena import Arena, Writer
from ._callbacks import callback_addresses

__all__ = ["LocationResult", "decode_locations", "BATCH", "event_file", "check_local_defs", "has_local_defs"]

#: most events per call into the C library
BATCH = 1 << 16


class LocationResult:
    """What a worker reports for one location: row counts, skipped-record counts, records read."""

    __slots__ = ("counts", "skipped", "n_read", "program")

    def __init__(self, counts: dict[str, int], skipped: np.ndarray, n_read: int, program: int = -1) -> None:
        self.counts, self.skipped, self.n_read = counts, skipped, n_read
        self.program = program  # the string ref of the location's ProgramBegin name, -1 none


def event_file(anchor: str, ref: int, suffix: str = "evt") -> str:
    """Path of the per-location file of location ``ref`` (``<dir>/<archive>/<ref>.evt``)."""
    d, base = os.path.split(anchor)
    return os.path.join(d, os.path.splitext(base)[0], f"{ref}.{suffix}")


class _Columns:
    """A worker's output columns: its arena windows, the current location's rows starting at ``start``."""

    def __init__(self, writer: Writer, max_members: int) -> None:
        self.w = writer
        self.st = np.zeros(L.STATE_LEN, dtype=np.int64)
        self.rows_per_event = {t: (max_members if t == "metric_events" else 1) for t in L.TABLE_COLUMNS}
        self.start = dict.fromkeys(L.TABLE_COLUMNS, 0)

    def _publish(self, table: str) -> None:
        base, a = L.TABLE_BASE[table], self.start[table]
        self.st[base + 1] = self.w.rows(table) - a
        for k, col in enumerate(self.w.cols[table].values()):
            self.st[base + 2 + k] = col.ctypes.data + a * col.itemsize if len(col) else 0

    def begin(self) -> None:
        """Start a location: its rows follow the previous location's; its skipped-record counters start at 0."""
        self.st[L.S_SKIP :] = 0
        for table in L.TABLE_COLUMNS:
            self.st[L.TABLE_BASE[table]] = 0
            self._publish(table)

    def next_batch(self) -> int:
        """Number of events that fit in every table now (mapping larger windows where needed)."""
        fit = BATCH
        for table in L.TABLE_COLUMNS:
            base, rpe = L.TABLE_BASE[table], self.rows_per_event[table]
            n, cap = int(self.st[base]), int(self.st[base + 1])
            if (cap - n) // rpe < BATCH:
                if self.w.grow(table, self.start[table] + n + BATCH * rpe):
                    self._publish(table)
                cap = int(self.st[base + 1])
            fit = min(fit, (cap - n) // rpe)
        return fit

    def end(self) -> dict[str, int]:
        """Finish a location: its row count per table."""
        counts = {t: int(self.st[L.TABLE_BASE[t]]) for t in L.TABLE_COLUMNS}
        for t, n in counts.items():
            self.start[t] += n
        return counts

    def totals(self) -> dict[str, int]:
        """Rows written in each table so far."""
        return dict(self.start)


def _check(rc: int, path: str, what: str) -> None:
    if rc != _capi.OTF2_SUCCESS:
        raise FormatError(path, f"{what}: {_capi.error_summary(rc)}")


def _read_location(
    lib: Any,
    reader: int,
    cbs: int,
    ref: int,
    evt: str,
    cols: _Columns,
    maps: dict,
    max_events: int | None,
    progress: np.ndarray,
) -> LocationResult:
    cols.begin()
    size = os.path.getsize(evt)
    st = cols.st
    st[L.S_OFF] = np.array(maps["offset"], dtype=np.uint64).view(np.int64)
    st.view(np.float64)[L.S_RES] = float(maps["resolution"])
    # the region map is followed by one more element: the dense id of the program region (ProgramBegin/End)
    st[L.S_RMAP], st[L.S_NRMAP] = maps["rmap"].ctypes.data, len(maps["rmap"]) - 1
    st[L.S_PROG] = -1
    st[L.S_MOFF], st[L.S_NMREF] = maps["moff"].ctypes.data, max(len(maps["moff"]) - 1, 0)
    st[L.S_MMEM] = maps["mmem"].ctypes.data
    er = lib.OTF2_Reader_GetEvtReader(reader, ref)
    if not er:
        raise FormatError(evt, f"cannot open the event file: {_capi.error_summary()}")
    try:
        _check(lib.OTF2_Reader_RegisterEvtCallbacks(reader, er, cbs, st.ctypes.data), evt, "cannot register callbacks")
        read = ctypes.c_uint64()
        total = 0
        while True:
            want = cols.next_batch()
            if want < 1:
                raise FormatError(evt, "holds more event records than the decoder can store", where=f"event {total}")
            if max_events is not None:
                want = min(want, max_events - total)
                if want <= 0:
                    break
            rc = lib.OTF2_Reader_ReadLocalEvents(reader, er, want, ctypes.byref(read))
            total += read.value
            progress[1] += read.value
            if total > size:  # a record takes at least a byte: the library is re-reading damaged data
                raise FormatError(
                    evt,
                    f"the OTF2 library returned {total:,} event records from this {size:,}-byte file, more than "
                    "it can hold: the file is truncated or corrupt",
                )
            if st[L.S_ERR]:
                code, bad = int(st[L.S_ERR]), int(st[L.S_ERRREF])
                what = {L.ERR_REGION: f"undefined region {bad}", L.ERR_METRIC: f"undefined metric {bad}"}
                raise FormatError(evt, what.get(code, "internal buffer overflow"), where=f"event {total}")
            _check(rc, evt, "corrupt event data")
            if read.value < want:
                break
    finally:
        lib.OTF2_Reader_CloseEvtReader(reader, er)
    return LocationResult(cols.end(), st[L.S_SKIP :].copy(), total, int(st[L.S_PROG]))


def decode_locations(
    anchor: str,
    arena: Arena,
    worker: int,
    locs: list[int],
    refs: list[int],
    maps: dict,
    max_events: int | None = None,
) -> tuple[list[LocationResult], dict[str, int]]:
    """Decode the event files of some locations, in order, into one worker's slots of the arena.

    Runs in a worker process forked after ``arena`` was created (or inline).
    Returns each location's result and the rows written per table.

    Parameters
    ----------
    anchor : str
        The anchor file.
    arena : Arena
        The shared output columns.
    worker : int
        This worker's slot.
    locs, refs : list of int
        Location indices (rows of the location table, increasing) and their OTF2 refs.
    maps : dict
        ``rmap``, ``moff``, ``mmem`` lookup arrays and ``max_members``,
        ``offset``, ``resolution`` from :class:`._defs.Defs`.
    max_events : int, optional
        Read at most this many events of each location (a prefix; used by the
        traffic pass of the Dask engine).
    """
    lib = _capi.lib()
    _capi.clear_errors()
    addresses = callback_addresses()
    reader = lib.OTF2_Reader_Open(anchor.encode())
    if not reader:
        raise FormatError(anchor, f"not a readable OTF2 anchor file: {_capi.error_summary()}")
    cbs = lib.OTF2_EvtReaderCallbacks_New()
    out: list[LocationResult] = []
    try:
        for name, addr in addresses.items():
            setter = getattr(lib, f"OTF2_EvtReaderCallbacks_Set{name}Callback", None)
            if setter is not None:
                setter.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
                setter.restype = ctypes.c_int
                setter(cbs, addr)
        _check(lib.OTF2_Reader_SetSerialCollectiveCallbacks(reader), anchor, "cannot set up the reader")
        for ref in refs:
            _check(lib.OTF2_Reader_SelectLocation(reader, ref), anchor, f"cannot select location {ref}")
        defs_open = lib.OTF2_Reader_OpenDefFiles(reader) == _capi.OTF2_SUCCESS
        _capi.clear_errors()
        _check(lib.OTF2_Reader_OpenEvtFiles(reader), anchor, "cannot open the event files")
        cols = _Columns(arena.writer(worker), maps["max_members"])
        progress = arena.progress[worker]
        for loc, ref in zip(locs, refs):
            progress[0], progress[1] = loc, 0
            evt = event_file(anchor, ref)
            if not os.path.isfile(evt):
                raise FormatError(evt, f"event file of location {ref} is missing")
            if defs_open:
                _read_local_defs(lib, reader, ref, anchor, bool(maps.get("local_defs", False)))
            out.append(_read_location(lib, reader, cbs, ref, evt, cols, maps, max_events, progress))
        progress[0] = -1
        if defs_open:
            lib.OTF2_Reader_CloseDefFiles(reader)
        lib.OTF2_Reader_CloseEvtFiles(reader)
    finally:
        lib.OTF2_EvtReaderCallbacks_Delete(cbs)
        lib.OTF2_Reader_Close(reader)
    return out, cols.totals()


def has_local_defs(anchor: str) -> bool:
    """Whether the archive holds a local definitions file (``<archive>/<ref>.def``) for any location."""
    sub = os.path.splitext(anchor)[0]
    if not os.path.isdir(sub):
        return False
    with os.scandir(sub) as it:
        return any(e.name.endswith(".def") for e in it)


def _read_local_defs(lib: Any, reader: int, ref: int, anchor: str, required: bool) -> None:
    """Read a location's local definitions (mapping tables, clock offsets).

    A location may have none, unless the archive has them for other locations
    (``required``): then its events' ids would go unmapped (messages on
    communicators that do not exist, or on the wrong ones), so a missing,
    empty or unreadable file is a FormatError.
    """
    path = event_file(anchor, ref, "def")
    dr = lib.OTF2_Reader_GetDefReader(reader, ref)
    if not dr:
        if os.path.isfile(path):
            what = "empty" if os.path.getsize(path) == 0 else f"not readable ({_capi.error_summary()})"
            raise FormatError(path, f"the local definitions of location {ref} are {what}")
        if required:
            raise FormatError(
                path,
                f"the local definitions of location {ref} are missing, while other locations have theirs: "
                "without its mapping tables and clock offsets its events cannot be read correctly",
            )
        _capi.clear_errors()  # an archive without local definitions is fine
        return
    try:
        n = ctypes.c_uint64()
        _check(lib.OTF2_Reader_ReadAllLocalDefinitions(reader, dr, ctypes.byref(n)), path, "corrupt local definitions")
    finally:
        lib.OTF2_Reader_CloseDefReader(reader, dr)


def check_local_defs(anchor: str, refs: list[int]) -> None:
    """Read every location's local definitions once (the bindings decoder's check; see :func:`_read_local_defs`)."""
    lib = _capi.lib()
    _capi.clear_errors()
    reader = lib.OTF2_Reader_Open(anchor.encode())
    if not reader:
        raise FormatError(anchor, f"not a readable OTF2 anchor file: {_capi.error_summary()}")
    required = has_local_defs(anchor)
    try:
        _check(lib.OTF2_Reader_SetSerialCollectiveCallbacks(reader), anchor, "cannot set up the reader")
        for ref in refs:
            _check(lib.OTF2_Reader_SelectLocation(reader, ref), anchor, f"cannot select location {ref}")
        if lib.OTF2_Reader_OpenDefFiles(reader) != _capi.OTF2_SUCCESS:
            _capi.clear_errors()
            return
        for ref in refs:
            _read_local_defs(lib, reader, int(ref), anchor, required)
        lib.OTF2_Reader_CloseDefFiles(reader)
    finally:
        lib.OTF2_Reader_Close(reader)
