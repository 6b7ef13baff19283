"""The fast OTF2 event decoder: the OTF2 C library driven with compiled callbacks.

Each location's event file is read by the OTF2 C library bundled with the
``otf2`` wheel (through :mod:`ctypes`); the library calls the numba/llvmlite
callbacks of :mod:`._callbacks`, which append rows to preallocated numpy
columns. Python only runs between batches of :data:`BATCH` events, to grow
the columns when needed. Locations are decoded in worker processes (see
:mod:`._parallel`), which also keeps a crash of the C library on a corrupted
file away from the caller's interpreter.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import FormatError
from . import _capi
from . import _layout as L

__all__ = ["LocationEvents", "decode_locations", "BATCH", "event_file"]

#: events per call into the C library
BATCH = 1 << 16


@dataclass
class LocationEvents:
    """The decoded events of one location: per table, columns without ``location``; ``pos`` is local."""

    tables: dict[str, dict[str, np.ndarray]]
    skipped: np.ndarray  # counts, in _callbacks.SKIPPED_EVENTS order
    n_read: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def event_file(anchor: str, ref: int, suffix: str = "evt") -> str:
    """Path of the per-location file of location ``ref`` (``<dir>/<archive>/<ref>.evt``)."""
    d, base = os.path.split(anchor)
    return os.path.join(d, os.path.splitext(base)[0], f"{ref}.{suffix}")


class _Buffers:
    """Growable numpy columns whose addresses live in the callbacks' state vector."""

    def __init__(self, hint: int, max_members: int) -> None:
        self.st = np.zeros(L.STATE_LEN, dtype=np.int64)
        self.cols: dict[str, dict[str, np.ndarray]] = {}
        self.rows_per_event = {t: (max_members if t == "metric_events" else 1) for t in L.TABLE_COLUMNS}
        for table, cols in L.TABLE_COLUMNS.items():
            cap = (hint + BATCH) if table == "region_events" else BATCH * self.rows_per_event[table]
            self.cols[table] = {c: np.empty(cap, dtype=dt) for c, dt in cols.items()}
            self._publish(table, cap)

    def _publish(self, table: str, cap: int) -> None:
        base = L.TABLE_BASE[table]
        self.st[base + 1] = cap
        for k, a in enumerate(self.cols[table].values()):
            self.st[base + 2 + k] = a.ctypes.data

    def ensure_batch(self) -> None:
        """Make room for one more batch of events in every table."""
        for table, cols in self.cols.items():
            base = L.TABLE_BASE[table]
            n, cap = int(self.st[base]), int(self.st[base + 1])
            need = n + BATCH * self.rows_per_event[table]
            if need > cap:
                new = max(need, 2 * cap)
                for a in cols.values():
                    a.resize(new, refcheck=False)
                self._publish(table, new)

    def finish(self) -> dict[str, dict[str, np.ndarray]]:
        """Trim the columns to their row counts and hand them over."""
        out = {}
        for table, cols in self.cols.items():
            n = int(self.st[L.TABLE_BASE[table]])
            for a in cols.values():
                a.resize(n, refcheck=False)
            out[table] = cols
        self.cols = {}
        return out


def _check(rc: int, path: str, what: str) -> None:
    if rc != _capi.OTF2_SUCCESS:
        msgs = _capi.error_messages()
        detail = "; ".join(msgs[-3:]) if msgs else _capi.error_name(rc)
        raise FormatError(path, f"{what}: {detail}")


def _read_location(
    lib: Any, reader: int, cbs: int, ref: int, anchor: str, hint: int, maps: dict[str, Any]
) -> LocationEvents:
    evt = event_file(anchor, ref)
    if not os.path.isfile(evt):
        raise FormatError(evt, f"event file of location {ref} is missing")
    size = os.path.getsize(evt)
    # number_of_events from the definitions bounds the region rows; distrust absurd values
    hint = int(hint) if 0 < hint <= max(size, 1) else min(size // 4 + 16, 1 << 24)
    buf = _Buffers(hint, maps["max_members"])
    st = buf.st
    st[L.S_OFF] = np.array(maps["offset"], dtype=np.uint64).view(np.int64)
    st.view(np.float64)[L.S_RES] = float(maps["resolution"])
    st[L.S_RMAP], st[L.S_NRMAP] = maps["rmap"].ctypes.data, len(maps["rmap"])
    st[L.S_MOFF], st[L.S_NMREF] = maps["moff"].ctypes.data, max(len(maps["moff"]) - 1, 0)
    st[L.S_MMEM] = maps["mmem"].ctypes.data

    er = lib.OTF2_Reader_GetEvtReader(reader, ref)
    if not er:
        raise FormatError(evt, "cannot open the event file: " + "; ".join(_capi.error_messages()[-2:]))
    try:
        _check(lib.OTF2_Reader_RegisterEvtCallbacks(reader, er, cbs, st.ctypes.data), evt, "cannot register callbacks")
        read = ctypes.c_uint64()
        total = 0
        while True:
            buf.ensure_batch()
            rc = lib.OTF2_Reader_ReadLocalEvents(reader, er, BATCH, ctypes.byref(read))
            total += read.value
            if st[L.S_ERR]:
                code, bad = int(st[L.S_ERR]), int(st[L.S_ERRREF])
                what = {L.ERR_REGION: f"undefined region {bad}", L.ERR_METRIC: f"undefined metric {bad}"}
                raise FormatError(evt, what.get(code, "internal buffer overflow"), where=f"event {total}")
            _check(rc, evt, "corrupt event data")
            if read.value < BATCH:
                break
    finally:
        lib.OTF2_Reader_CloseEvtReader(reader, er)
    return LocationEvents(tables=buf.finish(), skipped=st[L.S_SKIP :].copy(), n_read=total)


def decode_locations(anchor: str, refs: list[int], hints: list[int], maps: dict[str, Any]) -> list[LocationEvents]:
    """Decode the event files of some locations (runs in a worker process or inline).

    Parameters
    ----------
    anchor : str
        The anchor file.
    refs : list of int
        OTF2 location refs to decode, in the order of the result.
    hints : list of int
        Declared numbers of events of those locations (0 when unknown).
    maps : dict
        ``rmap``, ``moff``, ``mmem`` lookup arrays and ``max_members``, ``offset``,
        ``resolution`` from :class:`._defs.Defs`.

    Returns
    -------
    list of LocationEvents
    """
    from ._callbacks import callback_addresses

    lib = _capi.lib()
    _capi.clear_errors()
    addresses = callback_addresses()
    reader = lib.OTF2_Reader_Open(anchor.encode())
    if not reader:
        raise FormatError(anchor, "not a readable OTF2 anchor file: " + "; ".join(_capi.error_messages()[-2:]))
    cbs = lib.OTF2_EvtReaderCallbacks_New()
    out: list[LocationEvents] = []
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
        _check(lib.OTF2_Reader_OpenEvtFiles(reader), anchor, "cannot open the event files")
        for ref, hint in zip(refs, hints):
            if defs_open:
                _read_local_defs(lib, reader, ref, anchor)
            out.append(_read_location(lib, reader, cbs, ref, anchor, hint, maps))
        if defs_open:
            lib.OTF2_Reader_CloseDefFiles(reader)
        lib.OTF2_Reader_CloseEvtFiles(reader)
    finally:
        lib.OTF2_EvtReaderCallbacks_Delete(cbs)
        lib.OTF2_Reader_Close(reader)
    return out


def _read_local_defs(lib: Any, reader: int, ref: int, anchor: str) -> None:
    """Read a location's local definitions (mapping tables, clock offsets) if it has any."""
    dr = lib.OTF2_Reader_GetDefReader(reader, ref)
    if not dr:
        _capi.clear_errors()  # a location without local definitions is fine
        return
    try:
        n = ctypes.c_uint64()
        _check(
            lib.OTF2_Reader_ReadAllLocalDefinitions(reader, dr, ctypes.byref(n)),
            event_file(anchor, ref, "def"),
            "corrupt local definitions",
        )
    finally:
        lib.OTF2_Reader_CloseDefReader(reader, dr)
