"""Write small traces by hand: worked examples, tests, notebooks.

>>> tb = TraceBuilder()
>>> tb.call(0, "compute", 0, 4)
>>> tb.call(0, "MPI_Send", 4, 5, send={"to": 1, "bytes": 8})
>>> tb.call(1, "compute", 0, 1)
>>> tb.call(1, "MPI_Recv", 1, 5.5, recv={"frm": 0, "bytes": 8})
>>> pag = tb.build()

Events are kept in Python lists, one per location, in the order they are
added (which must be the order in which they happened on that location).
For large synthetic traces use :mod:`perflow.synthetic`, which is vectorised.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import pandas as pd

from ..errors import TraceError
from ..kinds import P2P, CollectiveOp, CollEv
from .build import build_pag
from .raw import COLL_COLUMNS, METRIC_COLUMNS, P2P_COLUMNS, REGION_COLUMNS, SAMPLE_COLUMNS, RawTrace

__all__ = ["TraceBuilder"]

_OPS = {op.name.lower(): op for op in CollectiveOp}


def _op(op: str | int | CollectiveOp) -> int:
    if isinstance(op, str):
        key = op.lower().removeprefix("mpi_")
        if key not in _OPS:
            raise TraceError(f"unknown collective operation {op!r}; known: {', '.join(sorted(_OPS))}")
        return int(_OPS[key])
    return int(op)


class TraceBuilder:
    """Build a :class:`~perflow.trace.raw.RawTrace` (and a PAG) event by event.

    Parameters
    ----------
    nprocs : int, optional
        Number of processes in MPI_COMM_WORLD (default: the highest process
        used plus one).
    """

    def __init__(self, nprocs: int | None = None) -> None:
        self._nprocs = nprocs
        self._locs: dict[tuple[int, int], dict[str, list[Any]]] = {}
        self._regions: dict[str, int] = {}
        self._region_rows: list[dict[str, Any]] = []
        self._metric_ids: dict[str, int] = {}
        self._stacks: dict[tuple[str, ...], int] = {}
        self._comms: dict[int, tuple[str, list[int]]] = {}
        self._open: dict[tuple[int, int], list[int]] = {}

    # ------------------------------------------------------------- definitions
    def define_region(
        self,
        name: str,
        *,
        role: str = "function",
        paradigm: str | None = None,
        file: str = "",
        line: int = 0,
        stack: Sequence[str] | None = None,
    ) -> int:
        """Define (or look up) a region; MPI_* names get the MPI paradigm.

        ``stack`` (outermost first) is the call stack of the code that calls
        the region, as a recorder intercepting calls knows it: the region is
        then placed below those frames (see :mod:`perflow.trace.contexts`);
        each (name, stack) is a region of its own, like a call site.
        """
        key: Any = name if not stack else (name, tuple(stack))
        if key not in self._regions:
            if paradigm is None:
                paradigm = "mpi" if name.upper().startswith("MPI_") else "user"
            sid = -1
            if stack:
                for frame in stack:
                    self.define_region(frame)
                sid = self._stacks.setdefault(tuple(stack), len(self._stacks))
            self._regions[key] = len(self._region_rows)
            self._region_rows.append(
                {"name": name, "role": role, "paradigm": paradigm, "file": file, "line": line, "module": "",
                 "stack": sid}
            )  # fmt: skip
        return self._regions[key]

    def comm(self, comm_id: int, members: Sequence[int], name: str = "") -> None:
        """Define a communicator: ``members[r]`` is the world rank of its rank ``r``."""
        if comm_id == 0:
            raise TraceError("communicator 0 is MPI_COMM_WORLD; choose another id")
        self._comms[comm_id] = (name or f"comm{comm_id}", list(members))

    def _loc(self, p: int, thread: int) -> dict[str, list[Any]]:
        key = (int(p), int(thread))
        if key not in self._locs:
            self._locs[key] = {"region": [], "p2p": [], "coll": [], "metric": [], "sample": []}
            self._open[key] = []
        return self._locs[key]

    # ------------------------------------------------------------- raw events
    def enter(self, p: int, t: float, name: str, *, thread: int = 0, **region: Any) -> None:
        """Enter a region on process ``p``."""
        loc = self._loc(p, thread)
        rid = self.define_region(name, **region)
        if loc["region"] and t < loc["region"][-1][0]:
            raise TraceError(f"process {p}: enter {name!r} at {t} is earlier than the previous event")
        loc["region"].append((float(t), 0, rid))
        self._open[(p, thread)].append(rid)

    def leave(self, p: int, t: float, *, thread: int = 0) -> None:
        """Leave the innermost open region on process ``p``."""
        loc = self._loc(p, thread)
        stack = self._open[(p, thread)]
        if not stack:
            raise TraceError(f"process {p}: leave at {t} with no open region")
        if loc["region"] and t < loc["region"][-1][0]:
            raise TraceError(f"process {p}: leave at {t} is earlier than the previous event")
        loc["region"].append((float(t), 1, stack.pop()))

    def _p2p(
        self, p: int, t: float, kind: P2P, peer: int, tag: int, nbytes: int, request: int, comm: int, thread: int
    ) -> None:
        loc = self._loc(p, thread)
        loc["p2p"].append(
            (float(t), int(kind), int(peer), int(comm), int(tag), int(nbytes), int(request), len(loc["region"]))
        )

    def send(
        self,
        p: int,
        t: float,
        to: int,
        *,
        tag: int = 0,
        bytes: int = 0,
        comm: int = 0,
        sync: bool = False,
        thread: int = 0,
    ) -> None:  # noqa: A002
        """A blocking send event (``sync=True`` for MPI_Ssend semantics)."""
        self._p2p(p, t, P2P.SSEND if sync else P2P.SEND, to, tag, bytes, -1, comm, thread)

    def isend(
        self, p: int, t: float, to: int, request: int, *, tag: int = 0, bytes: int = 0, comm: int = 0, thread: int = 0
    ) -> None:  # noqa: A002
        """A non-blocking send posted with request id ``request``."""
        self._p2p(p, t, P2P.ISEND, to, tag, bytes, request, comm, thread)

    def isend_complete(self, p: int, t: float, request: int, *, thread: int = 0) -> None:
        """Completion of non-blocking send ``request`` (inside a Wait/Test region)."""
        self._p2p(p, t, P2P.ISEND_COMPLETE, -1, -1, 0, request, 0, thread)

    def recv(self, p: int, t: float, frm: int, *, tag: int = 0, bytes: int = 0, comm: int = 0, thread: int = 0) -> None:  # noqa: A002
        """A blocking receive completion from ``frm``."""
        self._p2p(p, t, P2P.RECV, frm, tag, bytes, -1, comm, thread)

    def irecv_request(self, p: int, t: float, request: int, *, thread: int = 0) -> None:
        """A non-blocking receive posted with request id ``request``."""
        self._p2p(p, t, P2P.IRECV_REQUEST, -1, -1, 0, request, 0, thread)

    def irecv(
        self, p: int, t: float, frm: int, request: int, *, tag: int = 0, bytes: int = 0, comm: int = 0, thread: int = 0
    ) -> None:  # noqa: A002
        """Completion of non-blocking receive ``request`` with a message from ``frm``."""
        self._p2p(p, t, P2P.IRECV, frm, tag, bytes, request, comm, thread)

    def coll_begin(self, p: int, t: float, *, thread: int = 0) -> None:
        """Start of a collective operation."""
        loc = self._loc(p, thread)
        loc["coll"].append((float(t), int(CollEv.BEGIN), -1, 0, -1, 0, 0, len(loc["region"])))

    def coll_end(
        self,
        p: int,
        t: float,
        op: str | int,
        *,
        root: int = -1,
        sent: int = 0,
        received: int = 0,
        comm: int = 0,
        thread: int = 0,
    ) -> None:
        """End of a collective operation, with its operation, root and bytes."""
        loc = self._loc(p, thread)
        loc["coll"].append(
            (float(t), int(CollEv.END), _op(op), int(comm), int(root), int(sent), int(received), len(loc["region"]))
        )

    def metric(self, p: int, t: float, name: str, value: float, *, thread: int = 0) -> None:
        """A sample of an accumulated metric (a counter) on process ``p``."""
        mid = self._metric_ids.setdefault(name, len(self._metric_ids))
        loc = self._loc(p, thread)
        loc["metric"].append((float(t), mid, float(value), len(loc["region"])))

    def sample(self, p: int, t: float, stack: Sequence[str], weight: float, *, thread: int = 0) -> None:
        """A timer sample of a call stack (outermost first) worth ``weight`` seconds."""
        key = tuple(stack)
        for name in key:
            self.define_region(name)
        sid = self._stacks.setdefault(key, len(self._stacks))
        loc = self._loc(p, thread)
        loc["sample"].append((float(t), sid, float(weight), len(loc["region"])))

    # ------------------------------------------------------------- conveniences
    @contextmanager
    def region(self, p: int, name: str, start: float, end: float, *, thread: int = 0, **region: Any) -> Iterator[None]:
        """Enter ``name`` at ``start``; what the block adds is nested inside; leave at ``end``."""
        self.enter(p, start, name, thread=thread, **region)
        yield
        self.leave(p, end, thread=thread)

    def call(
        self,
        p: int,
        name: str,
        start: float,
        end: float,
        *,
        send: dict[str, Any] | None = None,
        recv: dict[str, Any] | None = None,
        coll: dict[str, Any] | None = None,
        thread: int = 0,
        **region: Any,
    ) -> None:
        """A leaf region instance, optionally carrying a send (at ``start``), a receive (at ``end``) or a collective.

        ``coll`` takes ``op`` (default: from the region name), ``root``,
        ``sent``, ``received`` (or ``bytes`` for both) and ``comm``; other
        keywords define the region (``stack``, ``file``, ``line``, ...).
        """
        self.enter(p, start, name, thread=thread, **region)
        if send is not None:
            self.send(p, start, thread=thread, **send)
        if coll is not None:
            c = dict(coll)
            op = c.pop("op", name)
            nb = c.pop("bytes", None)
            if nb is not None:
                c.setdefault("sent", nb)
                c.setdefault("received", nb)
            self.coll_begin(p, start, thread=thread)
            self.coll_end(p, end, op, thread=thread, **c)
        if recv is not None:
            self.recv(p, end, thread=thread, **recv)
        self.leave(p, end, thread=thread)

    # ------------------------------------------------------------- output
    def raw(self) -> RawTrace:
        """The events as a :class:`RawTrace` (locations sorted by process, thread)."""
        keys = sorted(self._locs)
        nprocs = self._nprocs or (max(p for p, _ in keys) + 1 if keys else 0)
        tables: dict[str, dict[str, list[Any]]] = {
            n: {c: [] for c in cols}
            for n, cols in (
                ("region", REGION_COLUMNS),
                ("p2p", P2P_COLUMNS),
                ("coll", COLL_COLUMNS),
                ("metric", METRIC_COLUMNS),
                ("sample", SAMPLE_COLUMNS),
            )
        }
        offset = 0
        for li, key in enumerate(keys):
            ev = self._locs[key]
            for t, k, r in ev["region"]:
                for c, v in zip(("location", "time", "kind", "region"), (li, t, k, r)):
                    tables["region"][c].append(v)
            for row in ev["p2p"]:
                vals = (li, *row[:-1], offset + row[-1])
                for c, v in zip(P2P_COLUMNS, vals):
                    tables["p2p"][c].append(v)
            for row in ev["coll"]:
                vals = (li, *row[:-1], offset + row[-1])
                for c, v in zip(("location", "time", "kind", "op", "comm", "root", "sent", "received", "pos"), vals):
                    tables["coll"][c].append(v)
            for row in ev["metric"]:
                for c, v in zip(METRIC_COLUMNS, (li, *row[:-1], offset + row[-1])):
                    tables["metric"][c].append(v)
            for row in ev["sample"]:
                for c, v in zip(SAMPLE_COLUMNS, (li, *row[:-1], offset + row[-1])):
                    tables["sample"][c].append(v)
            offset += len(ev["region"])
        comms = {0: np.arange(nprocs)}
        names = {0: "MPI_COMM_WORLD"}
        for cid, (nm, members) in self._comms.items():
            comms[cid] = np.asarray(members)
            names[cid] = nm
        stacks = pd.DataFrame(
            [
                {"stack": sid, "depth": d, "region": self._regions[name]}
                for key, sid in self._stacks.items()
                for d, name in enumerate(key)
            ],
            columns=["stack", "depth", "region"],
        )
        return RawTrace(
            locations=pd.DataFrame(
                {
                    "process": [k[0] for k in keys],
                    "thread": [k[1] for k in keys],
                    "name": [f"rank {k[0]} thread {k[1]}" for k in keys],
                    "type": "cpu",
                }
            ),
            regions=pd.DataFrame(
                self._region_rows,
                columns=["name", "role", "paradigm", "file", "line", "module"]
                + (["stack"] if any(r["stack"] >= 0 for r in self._region_rows) else []),
            ),
            region_events={c: np.asarray(v) for c, v in tables["region"].items()},
            p2p_events={c: np.asarray(v) for c, v in tables["p2p"].items()},
            coll_events={c: np.asarray(v) for c, v in tables["coll"].items()},
            metric_events={c: np.asarray(v) for c, v in tables["metric"].items()},
            sample_events={c: np.asarray(v) for c, v in tables["sample"].items()},
            stacks=stacks,
            comms=comms,
            comm_names=names,
            metrics=pd.DataFrame({"name": list(self._metric_ids), "unit": "", "mode": "accumulated"}),
            attrs={"source": "TraceBuilder"},
        )

    def build(self, **kwargs: Any) -> Any:
        """Build the PAG (keyword arguments go to :func:`perflow.trace.build.build_pag`)."""

        return build_pag(self.raw(), **kwargs)
