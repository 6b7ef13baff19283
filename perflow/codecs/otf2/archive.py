"""Writing an OTF2 archive through the C API: events per location, then global definitions.

Used by :func:`perflow.writers.otf2.write_otf2` and by the benchmark trace
generator. The global definitions are laid out the way Score-P lays out an
MPI trace: one location group (type process) per MPI rank, an MPI
``COMM_LOCATIONS`` group listing each rank's first location in rank order,
one ``COMM_GROUP`` per communicator (members are world ranks) and
``MPI_COMM_WORLD`` among the communicators.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

import numpy as np
import pandas as pd

from ...errors import FormatError
from . import capi as _capi
from .wkernel import FUNCTIONS, emit_location, pre_flush

__all__ = ["ArchiveWriter", "role_code", "paradigm_code", "mode_code", "REGION_STACK"]

_UNDEF32 = 0xFFFFFFFF
_LOCATION_TYPES = {"cpu": 1, "gpu": 2, "metric": 3}
_GT_COMM_LOCATIONS, _GT_COMM_GROUP, _GT_COMM_SELF = 4, 5, 6
_PARADIGM_MPI = 4
_TYPE_DOUBLE = 10
_TYPE_UINT8 = 1
#: CallingContextProperty marking a context that ends a region's call stack (the frames above the region)
REGION_STACK = "perflow::region_stack"


def _codes(enum_name: str) -> dict[str, int]:
    import otf2.enums as e

    return {name.lower(): int(v) for v, name in getattr(e, enum_name)._names.items()}


def role_code(role: str) -> int:
    """OTF2 RegionRole value of a lower-case role name (unknown -> UNKNOWN)."""
    return _codes("RegionRole").get(str(role).lower(), 0)


def paradigm_code(paradigm: str) -> int:
    """OTF2 Paradigm value of a lower-case paradigm name (unknown -> UNKNOWN)."""
    return _codes("Paradigm").get(str(paradigm).lower(), 0)


def mode_code(mode: str) -> int:
    """OTF2 MetricMode value of a lower-case mode name (unknown -> ABSOLUTE_POINT)."""
    return _codes("MetricMode").get(str(mode).lower(), 17)


class _FlushCallbacks(ctypes.Structure):
    _fields_ = [("pre_flush", ctypes.c_void_p), ("post_flush", ctypes.c_void_p)]


class ArchiveWriter:
    """An OTF2 archive being written.

    Parameters
    ----------
    path : str or os.PathLike
        The archive directory (the anchor becomes ``<path>/traces.otf2``), or
        the anchor file itself (``<dir>/<name>.otf2``).
    timer_resolution : int
        Ticks per second.
    creator : str
        Recorded as the archive's creator.
    """

    def __init__(self, path: str | os.PathLike[str], timer_resolution: int, creator: str = "perflow") -> None:
        p = os.fspath(path)
        if p.endswith(".otf2"):
            self.dir, self.name = os.path.dirname(os.path.abspath(p)), os.path.basename(p)[:-5]
        else:
            self.dir, self.name = os.path.abspath(p), "traces"
        self.anchor = os.path.join(self.dir, self.name + ".otf2")
        if os.path.exists(self.anchor) or os.path.exists(os.path.join(self.dir, self.name)):
            raise FileExistsError(f"{self.anchor}: an OTF2 archive already exists there")
        os.makedirs(self.dir, exist_ok=True)
        self.resolution = int(timer_resolution)
        self.lib = lib = _capi.lib()
        _capi.clear_errors()
        self.ar = lib.OTF2_Archive_Open(self.dir.encode(), self.name.encode(), 0, 1 << 20, 4 << 20, 1, 1)
        if not self.ar:
            self._fail("cannot create the archive")
        self._flush = _FlushCallbacks(pre_flush.address, None)
        self._check(lib.OTF2_Archive_SetFlushCallbacks(self.ar, ctypes.addressof(self._flush), None))
        self._check(lib.OTF2_Archive_SetSerialCollectiveCallbacks(self.ar))
        self._check(lib.OTF2_Archive_SetCreator(self.ar, creator.encode()))
        self._check(lib.OTF2_Archive_OpenEvtFiles(self.ar))
        self._check(lib.OTF2_Archive_OpenDefFiles(self.ar))
        self.fn = np.array(
            [ctypes.cast(getattr(lib, f"OTF2_EvtWriter_{f}"), ctypes.c_void_p).value for f in FUNCTIONS],
            dtype=np.int64,
        )
        self.mtypes = np.full(256, _TYPE_DOUBLE, dtype=np.uint8)
        self.n_events: dict[int, int] = {}
        self._writer: int | None = None
        self._ref = -1

    def _fail(self, what: str) -> None:
        raise FormatError(self.anchor, f"{what}: {_capi.error_summary()}")

    def _check(self, rc: int) -> None:
        if rc != _capi.OTF2_SUCCESS:
            self._fail(f"OTF2 call failed ({_capi.error_name(rc)})")

    # --- events ------------------------------------------------------------
    def begin_location(self, ref: int) -> None:
        """Start writing the events of location ``ref``."""
        if self._writer is not None:
            raise RuntimeError("end_location() the previous location first")
        self._writer = self.lib.OTF2_Archive_GetEvtWriter(self.ar, ref)
        if not self._writer:
            self._fail(f"cannot open the event writer of location {ref}")
        self._ref = ref

    def write(
        self,
        region: tuple[np.ndarray, ...],
        p2p: Any,
        coll: Any,
        metric: Any,
        thread: Any,
        base: int,
        samples: Any = None,
    ) -> None:
        """Append events of the current location (see :func:`._wkernel.emit_location` for the layout).

        ``coll`` rows have 8 columns (the last: request id) or 7 (blocking only);
        ``samples`` is ``(matrix, ticks)`` of CallingContextSample rows, or None.
        """
        rt, rk, rr = region
        (p, pi), (c, ci), (g, gi, mvals), (h, hi) = p2p, coll, metric, thread
        if c.shape[0] == 7:
            c = np.ascontiguousarray(np.vstack([c, np.full((1, c.shape[1]), -1, dtype=np.int64)]))
        s, si = samples if samples is not None else (np.zeros((4, 0), dtype=np.int64), np.zeros(0, dtype=np.uint64))
        rc = emit_location(
            self._writer, self.fn, base, rt, rk, rr, p, pi, c, ci, g, gi, mvals, self.mtypes, h, hi, s, si
        )
        if rc:
            self._fail(f"writing events of location {self._ref} failed ({_capi.error_name(rc)})")

    def end_location(self) -> int:
        """Close the current location's event writer; return its number of events."""
        n = ctypes.c_uint64()
        self._check(self.lib.OTF2_EvtWriter_GetNumberOfEvents(self._writer, ctypes.byref(n)))
        self._check(self.lib.OTF2_Archive_CloseEvtWriter(self.ar, self._writer))
        dw = self.lib.OTF2_Archive_GetDefWriter(self.ar, self._ref)  # an (empty) local definitions file
        if dw:
            self._check(self.lib.OTF2_Archive_CloseDefWriter(self.ar, dw))
        self.n_events[self._ref] = n.value
        self._writer = None
        return n.value

    # --- definitions -------------------------------------------------------
    def close(
        self,
        locations: pd.DataFrame,
        regions: pd.DataFrame,
        comms: dict[int, np.ndarray],
        comm_names: dict[int, str],
        metrics: pd.DataFrame,
        metric_classes: list[tuple[int, ...]],
        global_offset: int,
        trace_length: int,
        *,
        calling_contexts: pd.DataFrame | None = None,
        interrupt: tuple[str, int] | None = None,
        hosts: dict[int, str] | None = None,
    ) -> str:
        """Write the global definitions, close the archive and return the anchor path.

        Location ``i`` of ``locations`` gets OTF2 ref ``i``; metric class ``k``
        of ``metric_classes`` (a tuple of metric ids) gets metric ref ``k``.
        ``calling_contexts`` (columns ``region``, ``parent``, ``file``,
        ``line``; row ``k`` gets ref ``k``) and ``interrupt`` (name and period
        in nanoseconds of interrupt generator 0) define what samples refer to.
        ``hosts`` maps processes to host names: the system tree is machine ->
        host node -> process (one node "node" when not given).
        """
        lib, ar = self.lib, self.ar
        self._check(lib.OTF2_Archive_CloseEvtFiles(ar))
        self._check(lib.OTF2_Archive_CloseDefFiles(ar))
        gw = lib.OTF2_Archive_GetGlobalDefWriter(ar)
        if not gw:
            self._fail("cannot open the global definitions writer")
        strings: dict[str, int] = {}

        def s(text: Any) -> int:
            text = "" if text is None or (isinstance(text, float) and np.isnan(text)) else str(text)
            if text not in strings:
                strings[text] = len(strings)
                self._check(lib.OTF2_GlobalDefWriter_WriteString(gw, strings[text], text.encode()))
            return strings[text]

        u64 = ctypes.c_uint64
        self._check(
            lib.OTF2_GlobalDefWriter_WriteClockProperties(gw, self.resolution, global_offset, trace_length, 2**64 - 1)
        )
        s("")
        self._check(lib.OTF2_GlobalDefWriter_WriteSystemTreeNode(gw, 0, s("perflow"), s("machine"), _UNDEF32))
        procs = sorted(set(int(x) for x in locations["process"]))
        rank = {p: j for j, p in enumerate(procs)}
        host_of = {p: str((hosts or {}).get(p) or "node") for p in procs}
        node: dict[str, int] = {}
        for h in sorted(set(host_of.values())):
            node[h] = len(node) + 1
            self._check(lib.OTF2_GlobalDefWriter_WriteSystemTreeNode(gw, node[h], s(h), s("node"), 0))
        for p in procs:
            self._check(
                lib.OTF2_GlobalDefWriter_WriteLocationGroup(
                    gw, rank[p], s(f"MPI Rank {p}"), 1, node[host_of[p]], _UNDEF32
                )
            )
        first: dict[int, int] = {}
        for i, row in enumerate(locations.itertuples(index=False)):
            p = int(row.process)
            if p not in first or (row.type == "cpu" and locations["type"].iloc[first[p]] != "cpu"):
                first[p] = i
            ltype = _LOCATION_TYPES.get(str(row.type), 1)
            nev = self.n_events.get(i, 0)
            self._check(lib.OTF2_GlobalDefWriter_WriteLocation(gw, i, s(row.name), ltype, nev, rank[p]))
        for ref, row in zip(regions.index, regions.itertuples(index=False)):
            name = s(row.name)
            role, par = role_code(row.role), paradigm_code(row.paradigm)
            line = int(row.line) if pd.notna(row.line) else 0
            module = getattr(row, "module", "")  # kept in the description (perflow's reader reads it back)
            self._check(
                lib.OTF2_GlobalDefWriter_WriteRegion(
                    gw, int(ref), name, name, s(module), role, par, 0, s(row.file), line, 0
                )
            )
        members = (u64 * len(procs))(*[first[p] for p in procs])
        self._check(
            lib.OTF2_GlobalDefWriter_WriteGroup(gw, 0, s(""), _GT_COMM_LOCATIONS, _PARADIGM_MPI, 0, len(procs), members)
        )
        for k, cid in enumerate(sorted(comms)):
            ranks = [rank.get(int(r), int(r)) for r in comms[cid]]
            gtype = _GT_COMM_GROUP if ranks else _GT_COMM_SELF
            arr = (u64 * max(len(ranks), 1))(*ranks)
            self._check(lib.OTF2_GlobalDefWriter_WriteGroup(gw, k + 1, s(""), gtype, _PARADIGM_MPI, 0, len(ranks), arr))
            name = s(comm_names.get(cid, f"comm {cid}"))
            self._check(lib.OTF2_GlobalDefWriter_WriteComm(gw, int(cid), name, k + 1, _UNDEF32, 0))
        for ref, row in zip(metrics.index, metrics.itertuples(index=False)):
            base = 0 if int(getattr(row, "base", 10) or 10) == 2 else 1
            mtype = 1 if str(row.name).startswith("PAPI_") else 0
            exp = int(getattr(row, "exponent", 0) or 0)
            self._check(
                lib.OTF2_GlobalDefWriter_WriteMetricMember(
                    gw, int(ref), s(row.name), s(""), mtype, mode_code(row.mode), _TYPE_DOUBLE, base, exp, s(row.unit)
                )
            )
        for k, cls in enumerate(metric_classes):
            arr = (ctypes.c_uint32 * max(len(cls), 1))(*cls)
            self._check(lib.OTF2_GlobalDefWriter_WriteMetricClass(gw, k, len(cls), arr, 0, 2))
        if interrupt is not None:  # mode TIME (0), period in 10^-9 s (base DECIMAL = 1)
            name, period_ns = interrupt
            self._check(lib.OTF2_GlobalDefWriter_WriteInterruptGenerator(gw, 0, s(name), 0, 1, -9, int(period_ns)))
        if calling_contexts is not None and len(calling_contexts):
            scl: dict[tuple[str, int], int] = {}
            for ref, row in enumerate(calling_contexts.itertuples(index=False)):
                key = (str(row.file), int(row.line))
                if key not in scl:
                    scl[key] = len(scl)
                    self._check(lib.OTF2_GlobalDefWriter_WriteSourceCodeLocation(gw, scl[key], s(key[0]), key[1]))
                parent = int(row.parent) if int(row.parent) >= 0 else _UNDEF32
                self._check(lib.OTF2_GlobalDefWriter_WriteCallingContext(gw, ref, int(row.region), scl[key], parent))
            if "region_stack" in calling_contexts.columns:  # see perflow.writers.otf2: regions' call stacks
                for ref in np.flatnonzero(calling_contexts["region_stack"].to_numpy()).tolist():
                    self._check(
                        lib.OTF2_GlobalDefWriter_WriteCallingContextProperty(gw, ref, s(REGION_STACK), _TYPE_UINT8, 1)
                    )
        self._check(lib.OTF2_Archive_Close(ar))
        self.ar = None
        return self.anchor
