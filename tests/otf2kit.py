"""Write small OTF2 archives through the OTF2 C library, record by record, for tests.

Any definition or event record OTF2 has can be written, Score-P's forms
included (``COMM_LOCATION_GROUPS`` groups, inter-communicators, RMA windows,
I/O handles, calling contexts, OpenMP and thread events), which the ``otf2``
Python writer cannot all do. Times are given in ticks (resolution 1e9: ns).

>>> a = CArchive(tmp_path)                                      # doctest: +SKIP
>>> main = a.region("main")                                     # doctest: +SKIP
>>> a.enter(0, 10, main); a.leave(0, 20, main); a.close()       # doctest: +SKIP
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

from perflow.codecs.otf2 import capi as _capi

UNDEF32 = 0xFFFFFFFF
UNDEF64 = 0xFFFFFFFFFFFFFFFF
u8, u32, u64, i64 = ctypes.c_uint8, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int64

ROLES = {
    "function": 1, "loop": 3, "code": 4, "parallel": 5, "critical": 12, "critical_sblock": 13, "barrier": 15,
    "implicit_barrier": 16, "task": 20, "file_io": 27, "point2point": 28, "rma": 29, "coll_all2all": 25,
    "coll_one2all": 23, "artificial": 31, "thread_create": 32, "thread_wait": 33, "wrapper": 2,
}  # fmt: skip
PARADIGMS = {"user": 1, "compiler": 2, "openmp": 3, "mpi": 4, "measurement_system": 6, "pthread": 7, "io": 1}
GT_COMM_LOCATIONS, GT_COMM_GROUP, GT_COMM_SELF, GT_COMM_LOCATION_GROUPS = 4, 5, 6, 7


class CArchive:
    """An OTF2 archive being written: definitions and per-location events, written at :meth:`close`.

    Location ``k`` (from :meth:`location`, in call order) has OTF2 ref ``k``.
    """

    def __init__(self, path: str | os.PathLike[str], resolution: int = 10**9, creator: str = "Score-P 8.4") -> None:
        self.dir = os.fspath(path)
        self.resolution, self.creator = resolution, creator
        self.strings: dict[str, int] = {}
        self.defs: list[tuple[str, tuple]] = []  # (GlobalDefWriter function, args after the writer)
        self.n: dict[str, int] = {}
        self.locs: list[tuple[str, int, int]] = []  # name, group, type
        self.events: dict[int, list[tuple[str, tuple]]] = {}
        self.counts: dict[int, int] | None = None
        self.local_defs = True

    # --- definitions -------------------------------------------------------
    def s(self, text: str) -> Any:
        if text not in self.strings:
            self.strings[text] = len(self.strings)
        return u32(self.strings[text])

    def _next(self, kind: str) -> int:
        k = self.n.get(kind, 0)
        self.n[kind] = k + 1
        return k

    def define(self, fn: str, *args: Any, kind: str | None = None) -> int:
        """Any global definition: ``OTF2_GlobalDefWriter_<fn>(writer, ref, *args)`` (ref assigned when ``kind``)."""
        if kind is None:
            self.defs.append((fn, args))
            return -1
        ref = self._next(kind)
        self.defs.append((fn, (u32(ref), *args)))
        return ref

    def region(self, name: str, role: str = "function", paradigm: str = "user", file: str = "", line: int = 0) -> int:
        return self.define(
            "WriteRegion", self.s(name), self.s(name), self.s(""), u8(ROLES[role]), u8(PARADIGMS[paradigm]),
            u32(0), self.s(file), u32(line), u32(0), kind="region",
        )  # fmt: skip

    def location_group(self, name: str, gtype: int = 1, creator: int = UNDEF32) -> int:
        if "node" not in self.n:
            self.define("WriteSystemTreeNode", self.s("node"), self.s("node"), u32(UNDEF32), kind="node")
        return self.define("WriteLocationGroup", self.s(name), u8(gtype), u32(0), u32(creator), kind="lg")

    def location(self, name: str, group: int, ltype: int = 1) -> int:
        self.s(name)
        self.locs.append((name, group, ltype))
        self.events.setdefault(len(self.locs) - 1, [])
        return len(self.locs) - 1

    def group(self, gtype: int, paradigm: str, members: list[int], name: str = "") -> int:
        arr = (u64 * max(len(members), 1))(*members)
        return self.define(
            "WriteGroup", self.s(name), u8(gtype), u8(PARADIGMS[paradigm]), u32(0), u32(len(members)), arr,
            kind="group",
        )  # fmt: skip

    def comm(self, name: str, group: int, parent: int = UNDEF32) -> int:
        return self.define("WriteComm", self.s(name), u32(group), u32(parent), u32(0), kind="comm")

    def inter_comm(self, name: str, group_a: int, group_b: int) -> int:
        return self.define(
            "WriteInterComm", self.s(name), u32(group_a), u32(group_b), u32(UNDEF32), u32(0), kind="comm"
        )

    # --- events ------------------------------------------------------------
    def event(self, loc: int, name: str, t: int, *args: Any) -> None:
        """Any event: ``OTF2_EvtWriter_<name>(writer, NULL, t, *args)`` (ctypes-typed args)."""
        self.events[loc].append((name, (u64(t), *args)))

    def enter(self, loc: int, t: int, region: int) -> None:
        self.event(loc, "Enter", t, u32(region))

    def leave(self, loc: int, t: int, region: int) -> None:
        self.event(loc, "Leave", t, u32(region))

    def call(self, loc: int, t0: int, t1: int, region: int) -> None:
        self.enter(loc, t0, region)
        self.leave(loc, t1, region)

    # --- writing -----------------------------------------------------------
    def close(self, declared: dict[int, int] | None = None) -> str:
        """Write everything; ``declared`` overrides the number of events declared per location."""
        lib = _capi.lib()
        _capi.clear_errors()
        ar = lib.OTF2_Archive_Open(self.dir.encode(), b"traces", 0, 1 << 20, 4 << 20, 1, 1)
        assert ar, _capi.error_summary()

        class Flush(ctypes.Structure):
            _fields_ = [("pre_flush", ctypes.c_void_p), ("post_flush", ctypes.c_void_p)]

        pre = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64, ctypes.c_void_p,
                               ctypes.c_bool)(lambda *a: 1)  # OTF2_FLUSH  # fmt: skip
        flush = Flush(ctypes.cast(pre, ctypes.c_void_p).value, None)
        self._keep = (pre, flush)
        ok = _capi.OTF2_SUCCESS
        assert lib.OTF2_Archive_SetFlushCallbacks(ar, ctypes.addressof(flush), None) == ok
        assert lib.OTF2_Archive_SetSerialCollectiveCallbacks(ar) == ok
        assert lib.OTF2_Archive_SetCreator(ar, self.creator.encode()) == ok
        assert lib.OTF2_Archive_OpenEvtFiles(ar) == ok and lib.OTF2_Archive_OpenDefFiles(ar) == ok
        counts = {}
        tmax = 0
        for loc in range(len(self.locs)):
            w = lib.OTF2_Archive_GetEvtWriter(ar, loc)
            for name, args in self.events[loc]:
                rc = getattr(lib, f"OTF2_EvtWriter_{name}")(ctypes.c_void_p(w), ctypes.c_void_p(None), *args)
                assert rc == ok, (name, _capi.error_summary(rc))
                tmax = max(tmax, args[0].value)
            n = ctypes.c_uint64()
            lib.OTF2_EvtWriter_GetNumberOfEvents(w, ctypes.byref(n))
            counts[loc] = n.value
            assert lib.OTF2_Archive_CloseEvtWriter(ar, w) == ok
            if self.local_defs:
                dw = lib.OTF2_Archive_GetDefWriter(ar, loc)
                lib.OTF2_DefWriter_WriteClockOffset(ctypes.c_void_p(dw), u64(0), i64(0), ctypes.c_double(0.0))
                assert lib.OTF2_Archive_CloseDefWriter(ar, dw) == ok
        self.counts = counts
        assert lib.OTF2_Archive_CloseEvtFiles(ar) == ok and lib.OTF2_Archive_CloseDefFiles(ar) == ok
        gw = ctypes.c_void_p(lib.OTF2_Archive_GetGlobalDefWriter(ar))

        def write(fn: str, *args: Any) -> None:
            rc = getattr(lib, f"OTF2_GlobalDefWriter_{fn}")(gw, *args)
            assert rc == ok, (fn, _capi.error_summary(rc))

        write("WriteClockProperties", u64(self.resolution), u64(0), u64(tmax + 1), u64(UNDEF64))
        self.s("")
        for text, ref in sorted(self.strings.items(), key=lambda kv: kv[1]):
            write("WriteString", u32(ref), text.encode())
        order = ("WriteSystemTreeNode", "WriteLocationGroup")
        for fn, args in [d for d in self.defs if d[0] in order]:
            write(fn, *args)
        for k, (name, group, ltype) in enumerate(self.locs):
            n = (declared or {}).get(k, counts[k])
            write("WriteLocation", u64(k), self.s(name), u8(ltype), u64(n), u32(group))
        for fn, args in [d for d in self.defs if d[0] not in order]:
            write(fn, *args)
        assert lib.OTF2_Archive_Close(ar) == ok
        return os.path.join(self.dir, "traces.otf2")


def omp_example(path: str | os.PathLike[str], processes: int = 1, scale: int = 1) -> str:
    """A worked OpenMP example: ``processes`` identical processes of 3 threads (ticks: microseconds x ``scale``).

    Per process (times in us)::

        parallel #1 (threads enter at 10, 12, 14; all leave at 120)
          work, then an explicit barrier entered at 40, 50, 68, left at 70
            -> omp_barrier_wait 28 (t0), 18 (t1); caused by t2
          critical section (lock 1), entered by all at 70:
            t0 acquires at 70, releases at 80; t1 acquires at 80, releases at 95;
            t2 acquires at 95, releases at 110
            -> lock_contention_critical 10 (t1, caused by t0), 25 (t2, caused by t1)
          implicit barrier entered at 80, 95, 110, left at 120
            -> omp_ibarrier_wait 30 (t0), 15 (t1)
        parallel #2 (threads enter at 140, 141, 142; all leave at 180)
          t0: omp_set_lock(7) 140-142 (acquires at 141), omp_unset_lock 160-161 (releases at 160)
          t1: omp_set_lock(7) 145-161 (acquires at 160), omp_unset_lock 161-162
            -> lock_contention_api 15 (t1, caused by t0)
          implicit barrier entered at 161, 162, 150, left at 180
            -> omp_ibarrier_wait 1 (t0), 12 (t2)

    Totals per process: omp_barrier_wait 46 us, omp_ibarrier_wait 58 us,
    lock_contention_critical 35 us, lock_contention_api 15 us.
    """
    a = CArchive(path, resolution=10**6 * scale)
    main = a.region("main", file="omp.c", line=1)
    par = a.region("!$omp parallel @omp.c:10", "parallel", "openmp", "omp.c", 10)
    bar = a.region("!$omp barrier @omp.c:12", "barrier", "openmp", "omp.c", 12)
    ibar = a.region("!$omp implicit barrier @omp.c:20", "implicit_barrier", "openmp", "omp.c", 20)
    crit = a.region("!$omp critical @omp.c:15", "critical", "openmp", "omp.c", 15)
    sblock = a.region("!$omp critical sblock @omp.c:15", "critical_sblock", "openmp", "omp.c", 15)
    setl = a.region("omp_set_lock", "function", "openmp")
    unsetl = a.region("omp_unset_lock", "function", "openmp")
    work = a.region("work", file="omp.c", line=30)
    m = scale

    def ev(loc: int, name: str, t: int, *args: Any) -> None:
        a.event(loc, name, t * m, *args)

    def call(loc: int, t0: int, t1: int, r: int) -> None:
        a.call(loc, t0 * m, t1 * m, r)

    for p in range(processes):
        _, locs = openmp_process(a, 3, f"process {p}")
        t0, t1, t2 = locs
        team = a.team
        ev(t0, "Enter", 0, u32(main))
        ev(t0, "ThreadFork", 10, u8(3), u32(3))
        # parallel #1
        for loc, te, wend, be in ((t0, 10, 40, 40), (t1, 12, 50, 50), (t2, 14, 68, 68)):
            ev(loc, "ThreadTeamBegin", te, u32(team))
            ev(loc, "Enter", te, u32(par))
            call(loc, te, wend, work)
            call(loc, be, 70, bar)
        for loc, acq, rel, order in ((t0, 70, 80, 0), (t1, 80, 95, 1), (t2, 95, 110, 2)):
            ev(loc, "Enter", 70, u32(crit))
            ev(loc, "ThreadAcquireLock", acq, u8(3), u32(1), u32(order))
            call(loc, acq, rel, sblock)
            ev(loc, "ThreadReleaseLock", rel, u8(3), u32(1), u32(order))
            ev(loc, "Leave", rel, u32(crit))
            call(loc, rel, 120, ibar)
            ev(loc, "Leave", 120, u32(par))
            ev(loc, "ThreadTeamEnd", 120, u32(team))
        ev(t0, "ThreadJoin", 120, u8(3))
        # parallel #2
        ev(t0, "ThreadFork", 140, u8(3), u32(3))
        for loc, te in ((t0, 140), (t1, 141), (t2, 142)):
            ev(loc, "ThreadTeamBegin", te, u32(team))
            ev(loc, "Enter", te, u32(par))
        ev(t0, "Enter", 140, u32(setl))
        ev(t0, "OmpAcquireLock", 141, u32(7), u32(0))
        ev(t0, "Leave", 142, u32(setl))
        call(t0, 142, 160, work)
        ev(t0, "Enter", 160, u32(unsetl))
        ev(t0, "OmpReleaseLock", 160, u32(7), u32(0))
        ev(t0, "Leave", 161, u32(unsetl))
        call(t0, 161, 180, ibar)
        call(t1, 141, 145, work)
        ev(t1, "Enter", 145, u32(setl))
        ev(t1, "OmpAcquireLock", 160, u32(7), u32(1))
        ev(t1, "Leave", 161, u32(setl))
        ev(t1, "Enter", 161, u32(unsetl))
        ev(t1, "OmpReleaseLock", 162, u32(7), u32(1))
        ev(t1, "Leave", 162, u32(unsetl))
        call(t1, 162, 180, ibar)
        call(t2, 142, 150, work)
        call(t2, 150, 180, ibar)
        for loc in locs:
            ev(loc, "Leave", 180, u32(par))
            ev(loc, "ThreadTeamEnd", 180, u32(team))
        ev(t0, "ThreadJoin", 180, u8(3))
        ev(t0, "Leave", 190, u32(main))
    return a.close()


def openmp_process(a: CArchive, threads: int, name: str = "process 0") -> tuple[int, list[int]]:
    """One OpenMP process: a location group, ``threads`` CPU locations and its thread-team group/comm.

    Returns the location group and the locations. The team comm is ``a.team``.
    """
    lg = a.location_group(name)
    locs = [a.location(f"thread {k}", lg) for k in range(threads)]
    g = a.group(GT_COMM_LOCATIONS, "openmp", locs)
    a.team = a.comm("thread team", a.group(GT_COMM_GROUP, "openmp", list(range(threads)), "team"))
    del g
    return lg, locs


def rma_example(path: str | os.PathLike[str]) -> str:
    """A worked MPI one-sided example on 3 ranks (ticks: microseconds), as Score-P records it.

    Window 0 over MPI_COMM_WORLD. Timeline (enter-leave of each call):

    * ``MPI_Win_create`` [1, 5], rank 2 enters at 3: Wait at Create 2 on ranks 0 and 1;
    * fence 1: ranks 0, 1 enter at 10, rank 2 at 40, all leave at 45: Wait at Fence 30 on ranks 0 and 1;
    * rank 0 ``MPI_Put`` 1000 bytes to rank 1 [50, 52], rank 1 ``MPI_Get`` 400 bytes from rank 2 [50, 53]
      (both completed in fence 2 at 70), rank 2 ``MPI_Fetch_and_op`` 8 bytes each way with rank 0 [50, 51]
      (completed in the call);
    * fence 2: enter 60, 62, 65, leave 70: Wait at Fence 5 and 3 on ranks 0 and 1;
    * general active target epoch: rank 1 exposes to ranks 0 and 2 (``MPI_Win_post`` [100, 101],
      ``MPI_Win_wait`` [102, 110]); rank 0 ``MPI_Win_start`` [80, 102] (blocking: Late Post 20),
      ``MPI_Put`` 512 bytes [103, 104], ``MPI_Win_complete`` [105, 108]; rank 2 ``MPI_Win_start`` [90, 91]
      (returns at once), ``MPI_Put`` 256 bytes [92, 93], ``MPI_Win_complete`` [95, 106] (Late Post 5);
      the wait enters 3 before the last complete (105): Early Wait 3;
    * ``MPI_Win_free`` [120, 125], all together: no wait.
    """
    a = CArchive(path, resolution=10**6)
    main = a.region("main")
    reg = {n: a.region(n, "rma", "mpi") for n in (
        "MPI_Win_create", "MPI_Win_fence", "MPI_Put", "MPI_Get", "MPI_Fetch_and_op", "MPI_Win_post", "MPI_Win_start",
        "MPI_Win_complete", "MPI_Win_wait", "MPI_Win_free")}  # fmt: skip
    lgs = [a.location_group(f"MPI Rank {r}") for r in range(3)]
    locs = [a.location("Master thread", lgs[r]) for r in range(3)]
    a.group(GT_COMM_LOCATION_GROUPS, "mpi", lgs)
    world = a.comm("MPI_COMM_WORLD", a.group(GT_COMM_GROUP, "mpi", [0, 1, 2]))
    g1 = a.group(GT_COMM_GROUP, "mpi", [1])
    g02 = a.group(GT_COMM_GROUP, "mpi", [0, 2])
    a.define("WriteRmaWin", a.s("window"), u32(world), u32(0), kind="rmawin")
    win = u32(0)
    PROC_MEM = u32(3)  # OTF2_RMA_SYNC_LEVEL_PROCESS | MEMORY

    def coll(loc: int, t0: int, t1: int, name: str, op: int, record: str | None = None) -> None:
        a.enter(loc, t0, reg[name])
        a.event(loc, "RmaCollectiveBegin", t0)
        if record:
            a.event(loc, record, t0, win)
        a.event(loc, "RmaCollectiveEnd", t1, u8(op), PROC_MEM, win, u32(UNDEF32), u64(0), u64(0))
        a.leave(loc, t1, reg[name])

    def sync(loc: int, t0: int, t1: int, name: str, group: int) -> None:
        a.enter(loc, t0, reg[name])
        a.event(loc, "RmaGroupSync", t1, PROC_MEM, win, u32(group))
        a.leave(loc, t1, reg[name])

    for loc in locs:
        a.enter(loc, 0, main)
    for r, t0 in enumerate((1, 1, 3)):
        coll(locs[r], t0, 5, "MPI_Win_create", 17, "RmaWinCreate")
    for r, t0 in enumerate((10, 10, 40)):
        coll(locs[r], t0, 45, "MPI_Win_fence", 0)
    a.enter(locs[0], 50, reg["MPI_Put"])
    a.event(locs[0], "RmaPut", 51, win, u32(1), u64(1000), u64(1))
    a.leave(locs[0], 52, reg["MPI_Put"])
    a.enter(locs[1], 50, reg["MPI_Get"])
    a.event(locs[1], "RmaGet", 51, win, u32(2), u64(400), u64(7))
    a.leave(locs[1], 53, reg["MPI_Get"])
    a.enter(locs[2], 50, reg["MPI_Fetch_and_op"])
    a.event(locs[2], "RmaAtomic", 50, win, u32(0), u8(5), u64(8), u64(8), u64(2))
    a.event(locs[2], "RmaOpCompleteBlocking", 51, win, u64(2))
    a.leave(locs[2], 51, reg["MPI_Fetch_and_op"])
    for r, t0 in enumerate((60, 62, 65)):
        a.enter(locs[r], t0, reg["MPI_Win_fence"])
        a.event(locs[r], "RmaCollectiveBegin", t0)
        if r < 2:
            a.event(locs[r], "RmaOpCompleteNonBlocking", 70, win, u64((1, 7)[r]))
        a.event(locs[r], "RmaCollectiveEnd", 70, u8(0), PROC_MEM, win, u32(UNDEF32), u64(0), u64(0))
        a.leave(locs[r], 70, reg["MPI_Win_fence"])
    # general active target synchronisation
    sync(locs[1], 100, 101, "MPI_Win_post", g02)
    sync(locs[1], 102, 110, "MPI_Win_wait", g02)
    for r, (s0, s1, p0, c0, c1, nb, m) in ((0, (80, 102, 103, 105, 108, 512, 4)), (2, (90, 91, 92, 95, 106, 256, 5))):
        sync(locs[r], s0, s1, "MPI_Win_start", g1)
        a.enter(locs[r], p0, reg["MPI_Put"])
        a.event(locs[r], "RmaPut", p0, win, u32(1), u64(nb), u64(m))
        a.leave(locs[r], p0 + 1, reg["MPI_Put"])
        a.enter(locs[r], c0, reg["MPI_Win_complete"])
        a.event(locs[r], "RmaOpCompleteBlocking", c1, win, u64(m))
        a.event(locs[r], "RmaGroupSync", c1, PROC_MEM, win, u32(g1))
        a.leave(locs[r], c1, reg["MPI_Win_complete"])
    for loc in locs:
        coll(loc, 120, 125, "MPI_Win_free", 18, "RmaWinDestroy")
        a.leave(loc, 200, main)
    return a.close()
