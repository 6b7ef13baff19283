"""The fast OTF2 event decoder: the OTF2 C library driven with compiled callbacks.

Each location's event file is read by the OTF2 C library bundled with the
``otf2`` wheel (through :mod:`ctypes`); the library calls the numba/llvmlite
callbacks of :mod:`._callbacks`, which append rows to the location's segments
of the shared :class:`._arena.Arena`. Python only runs between batches of
events, to check for errors and for segments about to overflow.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

import numpy as np

from ...codecs.otf2 import capi as _capi
from ...errors import FormatError
from . import _layout as L
from ._arena import Arena, Spill

__all__ = ["LocationResult", "decode_locations", "BATCH", "event_file", "check_local_defs", "has_local_defs"]

#: most events per call into the C library
BATCH = 1 << 16


class LocationResult:
    """What a worker reports for one location: row counts, spilled tables, skipped-record counts."""

    __slots__ = ("counts", "spills", "skipped", "n_read", "program")

    def __init__(
        self, counts: dict[str, int], spills: dict[str, Spill], skipped: np.ndarray, n_read: int, program: int = -1
    ) -> None:
        self.counts, self.spills, self.skipped, self.n_read = counts, spills, skipped, n_read
        self.program = program  # the string ref of the location's ProgramBegin name, -1 none


def event_file(anchor: str, ref: int, suffix: str = "evt") -> str:
    """Path of the per-location file of location ``ref`` (``<dir>/<archive>/<ref>.evt``)."""
    d, base = os.path.split(anchor)
    return os.path.join(d, os.path.splitext(base)[0], f"{ref}.{suffix}")


class _Columns:
    """One location's output columns: its arena segments, or private arrays once a segment is full."""

    def __init__(self, arena: Arena, loc: int, max_members: int) -> None:
        self.st = np.zeros(L.STATE_LEN, dtype=np.int64)
        self.cols: dict[str, dict[str, np.ndarray]] = {}
        self.private: set[str] = set()
        self.rows_per_event = {t: (max_members if t == "metric_events" else 1) for t in L.TABLE_COLUMNS}
        for table in L.TABLE_COLUMNS:
            self.cols[table], cap = arena.segment(table, loc)
            self._publish(table, cap)

    def _publish(self, table: str, cap: int) -> None:
        base = L.TABLE_BASE[table]
        self.st[base + 1] = cap
        for k, a in enumerate(self.cols[table].values()):
            self.st[base + 2 + k] = a.ctypes.data if len(a) else 0

    def next_batch(self) -> int:
        """Number of events that fit in every table now (moving full tables to private arrays)."""
        fit = BATCH
        for table, cols in self.cols.items():
            base, rpe = L.TABLE_BASE[table], self.rows_per_event[table]
            n, cap = int(self.st[base]), int(self.st[base + 1])
            free = (cap - n) // rpe
            if free < 1 or (table in self.private and free < BATCH):
                new = max(2 * cap, n + BATCH * rpe)
                grown = {}
                for c, a in cols.items():
                    g = np.empty(new, dtype=a.dtype)
                    g[:n] = a[:n]
                    grown[c] = g
                self.cols[table] = grown
                self.private.add(table)
                self._publish(table, new)
                free = (new - n) // rpe
            fit = min(fit, free)
        return fit

    def finish(self) -> tuple[dict[str, int], dict[str, Spill]]:
        counts = {t: int(self.st[L.TABLE_BASE[t]]) for t in self.cols}
        spills = {t: Spill({c: a[: counts[t]].copy() for c, a in self.cols[t].items()}) for t in self.private}
        self.cols = {}
        return counts, spills


def _check(rc: int, path: str, what: str) -> None:
    if rc != _capi.OTF2_SUCCESS:
        raise FormatError(path, f"{what}: {_capi.error_summary(rc)}")


def _read_location(
    lib: Any, reader: int, cbs: int, ref: int, evt: str, cols: _Columns, maps: dict, max_events: int | None = None
) -> LocationResult:
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
            if max_events is not None:
                want = min(want, max_events - total)
                if want <= 0:
                    break
            rc = lib.OTF2_Reader_ReadLocalEvents(reader, er, want, ctypes.byref(read))
            total += read.value
            if st[L.S_ERR]:
                code, bad = int(st[L.S_ERR]), int(st[L.S_ERRREF])
                what = {L.ERR_REGION: f"undefined region {bad}", L.ERR_METRIC: f"undefined metric {bad}"}
                raise FormatError(evt, what.get(code, "internal buffer overflow"), where=f"event {total}")
            _check(rc, evt, "corrupt event data")
            if read.value < want:
                break
    finally:
        lib.OTF2_Reader_CloseEvtReader(reader, er)
    counts, spills = cols.finish()
    return LocationResult(counts, spills, st[L.S_SKIP :].copy(), total, int(st[L.S_PROG]))


def decode_locations(
    anchor: str, arena: Arena, locs: list[int], refs: list[int], maps: dict, max_events: int | None = None
) -> list[LocationResult]:
    """Decode the event files of some locations into their arena segments.

    Runs in a worker process forked after ``arena`` was created (or inline).

    Parameters
    ----------
    anchor : str
        The anchor file.
    arena : Arena
        The shared output columns.
    locs, refs : list of int
        Location indices (rows of the location table) and their OTF2 refs.
    maps : dict
        ``rmap``, ``moff``, ``mmem`` lookup arrays and ``max_members``,
        ``offset``, ``resolution`` from :class:`._defs.Defs`.
    max_events : int, optional
        Read at most this many events of each location (a prefix; used by the
        traffic pass of the Dask engine).
    """
    from ._callbacks import callback_addresses

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
        for loc, ref in zip(locs, refs):
            evt = event_file(anchor, ref)
            if not os.path.isfile(evt):
                raise FormatError(evt, f"event file of location {ref} is missing")
            if defs_open:
                _read_local_defs(lib, reader, ref, anchor, bool(maps.get("local_defs", False)))
            cols = _Columns(arena, loc, maps["max_members"])
            out.append(_read_location(lib, reader, cbs, ref, evt, cols, maps, max_events))
        if defs_open:
            lib.OTF2_Reader_CloseDefFiles(reader)
        lib.OTF2_Reader_CloseEvtFiles(reader)
    finally:
        lib.OTF2_EvtReaderCallbacks_Delete(cbs)
        lib.OTF2_Reader_Close(reader)
    return out


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
