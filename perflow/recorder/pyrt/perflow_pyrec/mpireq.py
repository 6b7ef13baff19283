"""Record the completion of mpi4py requests (standard library only).

Non-blocking calls of the wrapped communicators return :class:`RecRequest`
copies of mpi4py's requests (same handle, same buffer), which carry what the
posting call recorded; their completion methods (``Wait``/``wait``/``Test``/
``test`` and the ``*all``/``*any``/``*some`` class methods) record the
completion events. ``mpi4py.MPI.Request`` itself is replaced by the subclass so
that ``MPI.Request.Waitall(requests)`` is recorded too.
"""

from __future__ import annotations

from typing import Any

from .recorder import FN, Recorder

__all__ = ["build_request_class", "IRECV", "ISEND_COMPLETE", "REQUEST_TEST", "REQUEST_CANCELLED"]

# perflow.kinds.P2P values (duplicated: this module runs in the recorded interpreter)
ISEND_COMPLETE, IRECV, REQUEST_TEST, REQUEST_CANCELLED = 2, 5, 6, 7


def build_request_class(MPI: Any, rec: Recorder) -> type:  # noqa: N803 -- the mpi4py module
    """Return a recording subclass of ``MPI.Request``."""
    Base = MPI.Request  # noqa: N806
    Status = MPI.Status  # noqa: N806
    BYTE = MPI.BYTE  # noqa: N806
    UNDEFINED = MPI.UNDEFINED  # noqa: N806

    def done(req: Any, st: Any) -> None:
        info = getattr(req, "_pf", None)
        if not info:
            return
        req._pf = None
        rid, recv, peer, tag, comm, nbytes = info
        if st.Is_cancelled():
            rec.p2p(REQUEST_CANCELLED, peer, comm, tag, 0, rid)
        elif recv:
            rec.p2p(IRECV, st.Get_source(), comm, st.Get_tag(), st.Get_count(BYTE), rid)
        else:
            rec.p2p(ISEND_COMPLETE, peer, comm, tag, nbytes, rid)

    def single(method: str, fn: str, test: bool) -> Any:
        base = getattr(Base, method)
        fid = FN[fn]

        def call(self: Any, status: Any = None) -> Any:
            if not rec.begin(fid):
                return base(self, status)
            try:
                st = status if status is not None else Status()
                res = base(self, st)
                flag = (res[0] if isinstance(res, tuple) else res) if test else True
                if flag:
                    done(self, st)
                elif getattr(self, "_pf", None):
                    rid, _, peer, tag, comm, _ = self._pf
                    rec.p2p(REQUEST_TEST, peer, comm, tag, 0, rid)
                return res
            finally:
                rec.end(fid)

        call.__name__ = method
        return call

    def many(method: str, fn: str, kind: str) -> Any:
        base = getattr(Base, method)
        fid = FN[fn]

        def call(cls: Any, requests: Any, statuses: Any = None) -> Any:
            if not rec.begin(fid):
                return base(requests, statuses)
            try:
                reqs = list(requests)
                if kind == "any":
                    st = statuses if statuses is not None else Status()
                    res = base(requests, st)
                    index = res[0] if isinstance(res, tuple) else res
                    flag = res[1] if method.lower() == "testany" else True
                    if flag and index is not None and index != UNDEFINED and 0 <= index < len(reqs):
                        done(reqs[index], st)
                    return res
                if kind == "some":
                    sts = statuses if statuses is not None else []
                    res = base(requests, sts)
                    for k, index in enumerate(res or []):
                        if k < len(sts):
                            done(reqs[index], sts[k])
                    return res
                sts = statuses if statuses is not None else [Status() for _ in reqs]
                res = base(requests, sts)
                flag = (res[0] if isinstance(res, tuple) else res) if method.lower() == "testall" else True
                if flag:
                    for q, st in zip(reqs, sts):
                        done(q, st)
                return res
            finally:
                rec.end(fid)

        call.__name__ = method
        return classmethod(call)

    ns: dict[str, Any] = {
        "_pf": None,
        "Wait": single("Wait", "MPI_Wait", False),
        "wait": single("wait", "MPI_Wait", False),
        "Test": single("Test", "MPI_Test", True),
        "test": single("test", "MPI_Test", True),
        "Waitall": many("Waitall", "MPI_Waitall", "all"),
        "waitall": many("waitall", "MPI_Waitall", "all"),
        "Testall": many("Testall", "MPI_Testall", "all"),
        "testall": many("testall", "MPI_Testall", "all"),
        "Waitany": many("Waitany", "MPI_Waitany", "any"),
        "waitany": many("waitany", "MPI_Waitany", "any"),
        "Testany": many("Testany", "MPI_Testany", "any"),
        "testany": many("testany", "MPI_Testany", "any"),
        "Waitsome": many("Waitsome", "MPI_Waitsome", "some"),
        "Testsome": many("Testsome", "MPI_Testsome", "some"),
    }

    def free(self: Any) -> None:
        self._pf = None
        Base.Free(self)

    ns["Free"] = free
    return type("Request", (Base,), ns)


def wrap_request(cls: type, req: Any, info: tuple) -> Any:
    """A recording copy of ``req`` carrying ``info`` = (id, is_recv, peer, tag, comm, bytes)."""
    out = cls(req)
    out._pf = info
    out._pf_orig = req  # keeps the original object (and anything it references) alive
    return out
