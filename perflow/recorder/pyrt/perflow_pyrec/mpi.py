"""Record mpi4py communication by wrapping its communicator classes (standard library only).

When the recorded program imports ``mpi4py.MPI``, an import hook times the
import (it calls MPI_Init), then replaces ``MPI.COMM_WORLD``/``MPI.COMM_SELF``
with instances of recording subclasses of ``Intracomm`` (same handles), whose
point-to-point, collective and communicator-creating methods record events
and return recording objects in turn, and ``MPI.Request`` with a recording
subclass (see :mod:`.mpireq`). MPI_Finalize is recorded at exit (or when the
program calls it).

Sizes: buffer methods (``Send``, ``Allreduce``, ...) record the buffer's
size; pickle-based methods (``send``, ``bcast``, ...) record receives from the
status and leave sends at -1, filled in after the run from the matching
receive; their collectives record 0 bytes.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.abc
import importlib.util
import socket
import sys
from typing import Any

from .mpireq import build_request_class, wrap_request
from .names import (
    BEGIN,
    COLLECTIVES,
    CREATORS,
    END,
    IRECV_REQUEST,
    ISEND,
    ISENDS,
    RECV,
    SEND,
    SENDS,
)
from .recorder import FN, Recorder

__all__ = ["install"]


def _arg(args: tuple, kw: dict, pos: int, name: str, default: Any) -> Any:
    if len(args) > pos:
        return args[pos]
    return kw.get(name, default)


def _with_status(args: tuple, kw: dict, pos: int, status_cls: type) -> tuple[tuple, dict, Any]:
    """Make sure a call passes a Status (the caller's, or a new one) and return it."""
    if len(args) > pos and args[pos] is not None:
        return args, kw, args[pos]
    if kw.get("status") is not None:
        return args, kw, kw["status"]
    st = status_cls()
    if len(args) > pos:
        return args[:pos] + (st,) + args[pos + 1 :], kw, st
    return args, {**kw, "status": st}, st


def _key(*parts: object) -> int:
    digest = hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & 0x7FFFFFFFFFFFFFFF


class _Patcher:
    """Builds the recording classes for one mpi4py module and patches it."""

    def __init__(self, MPI: Any, rec: Recorder) -> None:  # noqa: N803
        self.MPI, self.rec = MPI, rec
        self.next_comm = 2
        self.next_req = 0
        self.world_group = None
        self.Request = build_request_class(MPI, rec)
        mixin = type("_RecordingComm", (), {})
        for name in SENDS:
            setattr(mixin, name, self._send(name))
        for name in ISENDS:
            setattr(mixin, name, self._isend(name))
        for name in ("recv", "Recv", "sendrecv", "Sendrecv"):
            setattr(mixin, name, self._recv(name))
        for name in ("irecv", "Irecv"):
            setattr(mixin, name, self._irecv(name))
        for name in COLLECTIVES:
            if hasattr(MPI.Intracomm, name):
                setattr(mixin, name, self._coll(name))
        for name in CREATORS:
            if hasattr(MPI.Intracomm, name):
                setattr(mixin, name, self._create(name, CREATORS[name], MPI.Intracomm))
        self.classes: dict[type, type] = {}
        for base in (MPI.Intracomm, MPI.Cartcomm, MPI.Graphcomm, MPI.Distgraphcomm):
            ns: dict[str, Any] = {}
            if base is MPI.Cartcomm:
                ns["Sub"] = self._create("Sub", "MPI_Cart_sub", MPI.Cartcomm)
            self.classes[base] = type(base.__name__, (mixin, base), ns)

    # -- wrappers ---------------------------------------------------------------

    def _peer(self, p: Any) -> int:
        MPI = self.MPI  # noqa: N806
        return -1 if p == MPI.ANY_SOURCE else (-2 if p == MPI.PROC_NULL else int(p))

    def _nbytes(self, spec: Any) -> int:
        MPI = self.MPI  # noqa: N806
        if spec is None or spec is MPI.IN_PLACE:
            return 0
        if isinstance(spec, list | tuple):
            if not spec:
                return 0
            if len(spec) >= 3 and isinstance(spec[1], int) and isinstance(spec[-1], MPI.Datatype):
                return spec[1] * spec[-1].Get_size()
            return self._nbytes(spec[0])
        try:
            return memoryview(spec).nbytes
        except TypeError:
            return 0

    def _send(self, name: str) -> Any:
        fn, kind, pickled = SENDS[name]
        base, fid, rec = getattr(self.MPI.Intracomm, name), FN[fn], self.rec

        def method(comm: Any, *args: Any, **kw: Any) -> Any:
            if not rec.begin(fid):
                return base(comm, *args, **kw)
            try:
                size = -1 if pickled else self._nbytes(_arg(args, kw, 0, "buf", None))
                dest = self._peer(_arg(args, kw, 1, "dest", 0))
                rec.p2p(kind, dest, getattr(comm, "_pf_id", -1), _arg(args, kw, 2, "tag", 0), size, -1, rec.t_enter)
                return base(comm, *args, **kw)
            finally:
                rec.end(fid)

        return method

    def _isend(self, name: str) -> Any:
        fn, pickled = ISENDS[name]
        base, fid, rec = getattr(self.MPI.Intracomm, name), FN[fn], self.rec

        def method(comm: Any, *args: Any, **kw: Any) -> Any:
            if not rec.begin(fid):
                return base(comm, *args, **kw)
            try:
                size = -1 if pickled else self._nbytes(_arg(args, kw, 0, "buf", None))
                dest, tag = self._peer(_arg(args, kw, 1, "dest", 0)), _arg(args, kw, 2, "tag", 0)
                req = base(comm, *args, **kw)
                if dest < -1:
                    return req
                rid, self.next_req = self.next_req, self.next_req + 1
                cid = getattr(comm, "_pf_id", -1)
                rec.p2p(ISEND, dest, cid, tag, size, rid, rec.t_enter)
                return wrap_request(self.Request, req, (rid, False, dest, tag, cid, size))
            finally:
                rec.end(fid)

        return method

    def _irecv(self, name: str) -> Any:
        base, fid, rec = getattr(self.MPI.Intracomm, name), FN["MPI_Irecv"], self.rec

        def method(comm: Any, *args: Any, **kw: Any) -> Any:
            if not rec.begin(fid):
                return base(comm, *args, **kw)
            try:
                size = self._nbytes(_arg(args, kw, 0, "buf", None))
                src = self._peer(_arg(args, kw, 1, "source", self.MPI.ANY_SOURCE))
                tag = _arg(args, kw, 2, "tag", self.MPI.ANY_TAG)
                req = base(comm, *args, **kw)
                if src < -1:
                    return req
                rid, self.next_req = self.next_req, self.next_req + 1
                cid = getattr(comm, "_pf_id", -1)
                rec.p2p(IRECV_REQUEST, src, cid, tag, size, rid, rec.t_enter)
                return wrap_request(self.Request, req, (rid, True, src, tag, cid, size))
            finally:
                rec.end(fid)

        return method

    def _recv(self, name: str) -> Any:
        base, rec = getattr(self.MPI.Intracomm, name), self.rec
        sendrecv = name.lower() == "sendrecv"
        fid = FN["MPI_Sendrecv" if sendrecv else "MPI_Recv"]

        def method(comm: Any, *args: Any, **kw: Any) -> Any:
            if not rec.begin(fid):
                return base(comm, *args, **kw)
            try:
                cid = getattr(comm, "_pf_id", -1)
                if sendrecv:
                    size = -1 if name == "sendrecv" else self._nbytes(_arg(args, kw, 0, "sendbuf", None))
                    dest = self._peer(_arg(args, kw, 1, "dest", 0))
                    rec.p2p(SEND, dest, cid, _arg(args, kw, 2, "sendtag", 0), size, -1, rec.t_enter)
                args, kw, st = _with_status(args, kw, 6 if sendrecv else 3, self.MPI.Status)
                res = base(comm, *args, **kw)
                rec.p2p(RECV, self._peer(st.Get_source()), cid, st.Get_tag(), st.Get_count(self.MPI.BYTE), -1)
                return res
            finally:
                rec.end(fid)

        return method

    def _coll(self, name: str) -> Any:
        fn, op, root_pos, rule = COLLECTIVES[name]
        base, fid, rec = getattr(self.MPI.Intracomm, name), FN[fn], self.rec

        def method(comm: Any, *args: Any, **kw: Any) -> Any:
            if not rec.begin(fid):
                return base(comm, *args, **kw)
            try:
                cid = getattr(comm, "_pf_id", -1)
                root = _arg(args, kw, root_pos, "root", 0) if root_pos is not None else -1
                rec.coll(BEGIN, op, cid, root, 0, 0, rec.t_enter)
                res = base(comm, *args, **kw)
                sent, got = self._sizes(rule, comm, args, kw, root)
                rec.coll(END, op, cid, root, sent, got)
                return res
            finally:
                rec.end(fid)

        return method

    def _sizes(self, rule: str, comm: Any, args: tuple, kw: dict, root: int) -> tuple[int, int]:
        if rule == "none":
            return 0, 0
        if rule == "bcast":
            n = self._nbytes(_arg(args, kw, 0, "buf", None))
            return (n, 0) if comm.Get_rank() == root else (0, n)
        sb, rb = _arg(args, kw, 0, "sendbuf", None), _arg(args, kw, 1, "recvbuf", None)
        s, r = self._nbytes(sb), self._nbytes(rb)
        if rule in ("reduce_all", "reduce"):
            n = s if sb is not self.MPI.IN_PLACE else r
            return n, (n if rule == "reduce_all" or comm.Get_rank() == root else 0)
        me = comm.Get_rank()
        if rule == "gather":
            return s, (r if me == root else 0)
        if rule == "scatter":
            return (s if me == root else 0), r
        return s, r

    def _create(self, name: str, fn: str, cls: type) -> Any:
        base, fid, rec = getattr(cls, name), FN[fn], self.rec

        def method(comm: Any, *args: Any, **kw: Any) -> Any:
            recorded = rec.begin(fid)
            try:
                return self.register(comm, base(comm, *args, **kw), fn)
            finally:
                if recorded:
                    rec.end(fid)

        return method

    # -- communicators --------------------------------------------------------

    def register(self, parent: Any, new: Any, creator: str) -> Any:
        """Wrap and define a communicator created from ``parent`` (on every member)."""
        MPI = self.MPI  # noqa: N806
        if not hasattr(parent, "_pf_key"):
            return new
        parent._pf_nchild += 1
        if new == MPI.COMM_NULL or new.Is_inter() or type(new) not in self.classes:
            return new
        group = new.Get_group()
        ranks = group.Translate_ranks(list(range(new.Get_size())), self.world_group)
        group.Free()
        out = self.classes[type(new)](new)
        out._pf_id, self.next_comm = self.next_comm, self.next_comm + 1
        out._pf_key = _key(parent._pf_key, parent._pf_nchild, ranks[0])
        out._pf_nchild = 0
        self.rec.txt(f"C {out._pf_id} {out._pf_key} {creator} {len(ranks)} {' '.join(map(str, ranks))}\n")
        return out

    def after_init(self) -> None:
        """Write rank, size and the predefined communicators, and patch the module."""
        MPI, rec = self.MPI, self.rec  # noqa: N806
        world, me = MPI.COMM_WORLD, MPI.COMM_WORLD.Get_rank()
        self.world_group = world.Get_group()
        size = world.Get_size()
        self_key = _key("self", me)
        rec.txt(f"rank {me}\nsize {size}\nhost {socket.gethostname()}\nW {size}\nC 1 {self_key} MPI_COMM_SELF 1 {me}\n")
        for attr, cid, key in (("COMM_WORLD", 0, 1), ("COMM_SELF", 1, self_key)):
            c = self.classes[MPI.Intracomm](getattr(MPI, attr))
            c._pf_id, c._pf_key, c._pf_nchild = cid, key, 0
            setattr(MPI, attr, c)

    def finalize(self, real: Any) -> Any:
        """Record MPI_Finalize around ``real()``."""
        rec, fid = self.rec, FN["MPI_Finalize"]
        if self.world_group is not None:
            self.world_group.Free()
            self.world_group = None
        if not rec.begin(fid):
            return real()
        try:
            return real()
        finally:
            rec.end(fid)

    def patch(self, initialized_now: bool) -> None:
        """Replace the module's communicators, ``Request``, ``Init*`` and ``Finalize``."""
        MPI = self.MPI  # noqa: N806
        MPI.Request = self.Request
        real_finalize = MPI.Finalize
        MPI.Finalize = lambda: self.finalize(real_finalize)
        if MPI.Is_initialized():
            self.after_init()
        else:
            for name in ("Init", "Init_thread"):
                real = getattr(MPI, name)
                setattr(MPI, name, self._init_wrapper(real, name))

        def at_exit() -> None:
            if MPI.Is_initialized() and not MPI.Is_finalized():
                self.finalize(real_finalize)

        atexit.register(at_exit)

    def _init_wrapper(self, real: Any, name: str) -> Any:
        fid = FN["MPI_" + name]

        def init(*args: Any, **kw: Any) -> Any:
            recorded = self.rec.begin(fid)
            try:
                res = real(*args, **kw)
                self.after_init()
                return res
            finally:
                if recorded:
                    self.rec.end(fid)

        return init


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: Any, rec: Recorder, init_at_import: bool) -> None:
        self.inner, self.rec, self.init = inner, rec, init_at_import
        self.recorded = False

    def create_module(self, spec: Any) -> Any:
        if self.init:
            self.recorded = self.rec.begin(FN["MPI_Init"])
        return self.inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        try:
            self.inner.exec_module(module)
            _Patcher(module, self.rec).patch(self.init)
        finally:
            if self.recorded:
                self.rec.end(FN["MPI_Init"])


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, rec: Recorder) -> None:
        self.rec = rec

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "mpi4py.MPI":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        rc = getattr(sys.modules.get("mpi4py"), "rc", None)
        spec.loader = _Loader(spec.loader, self.rec, bool(getattr(rc, "initialize", True)))
        return spec


def install(rec: Recorder) -> None:
    """Arrange for ``mpi4py.MPI`` to be recorded when the program imports it."""
    sys.meta_path.insert(0, _Finder(rec))
