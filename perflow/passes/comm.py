"""Communication analyses: process x process matrices, message sizes, traffic over time, per-process summary, pattern.

Point-to-point data comes from the matched messages of a trace
(``pag.trace.messages``); for a PAG without a trace it comes from the
aggregated ``p2p`` edges of the parallel view (explicit communication edges
of a profile), which carry counts, bytes and times but no timestamps.

Collective operations are added to the matrices on request
(``collectives=True``) as the logical traffic they imply, per instance:

* one-to-all (Bcast, Scatter[v]): the root sends each other participant
  the bytes that participant received;
* all-to-one (Gather[v], Reduce): each other participant sends the root the
  bytes it sent;
* all-to-all kinds (Allreduce, Allgather[v], Alltoall[v,w],
  Reduce_scatter, Scan, ...): each participant sends ``sent / (n - 1)``
  bytes to each of the other ``n - 1`` participants;
* barriers (and MPI_Init/Finalize) move no data and are left out.

MPI one-sided (RMA) transfers are added on request (``rma=True``), from
``pag.trace.rma``: a put (and the sent part of an accumulate or atomic)
goes from the origin to the target, a get (and the fetched part) from the
target to the origin; each transfer counts as one message; they contribute
no time (RMA records carry no arrival time at the target).

All matrices are built with one ``np.bincount`` over ``sender * P +
receiver``; the collective part with one outer product per communicator.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from perflow.sdk import PAG, Analysis, CollectiveOp, NoSettings, PassError, WaitSettings, pass_, settings_keywords
from perflow.sdk.profile import as_pag, edge_mask
from perflow.sdk.trace import TRANSFERS

from ._pattern import classify_pattern
from .waitstates import waiting_time

__all__ = [
    "comm_matrix",
    "message_sizes",
    "comm_over_time",
    "comm_summary",
    "comm_pattern",
    "p2p_messages",
    "COMM_METRICS",
]

COMM_METRICS = ("bytes", "count", "time")
_ONE2N = [CollectiveOp.BCAST, CollectiveOp.SCATTER, CollectiveOp.SCATTERV]
_N2ONE = [CollectiveOp.GATHER, CollectiveOp.GATHERV, CollectiveOp.REDUCE]
_NODATA = [
    CollectiveOp.BARRIER,
    CollectiveOp.INIT,
    CollectiveOp.FINALIZE,
    CollectiveOp.CREATE_HANDLE,
    CollectiveOp.DESTROY_HANDLE,
    CollectiveOp.ALLOCATE,
    CollectiveOp.DEALLOCATE,
    CollectiveOp.CREATE_HANDLE_AND_ALLOCATE,
    CollectiveOp.DESTROY_HANDLE_AND_DEALLOCATE,
]


def p2p_messages(pag: PAG) -> pd.DataFrame:
    """Point-to-point traffic as rows: ``src``, ``dst`` (processes), ``count``, ``bytes``, ``time``, ``send_time``.

    One row per message for a trace (``count`` 1, ``time`` the transfer time
    ``max(0, receive completion - send)``, ``send_time`` the send event);
    one row per aggregated ``p2p`` edge otherwise (``send_time`` NaN).
    """
    tr = pag.trace
    if tr is not None:
        m = tr.messages
        return pd.DataFrame(
            {
                "src": m["send_process"].to_numpy().astype(np.int64),
                "dst": m["recv_process"].to_numpy().astype(np.int64),
                "count": np.ones(len(m), dtype=np.int64),
                "bytes": m["bytes"].to_numpy().astype(np.int64),
                "time": np.maximum(0.0, m["recv_time"].to_numpy() - m["send_time"].to_numpy()),
                "send_time": m["send_time"].to_numpy(),
            }
        )
    view = pag.parallel
    et = view.edge_table
    e = et[edge_mask(et, "p2p")]
    proc = view.vertex_frame["process"].to_numpy().astype(np.int64)
    return pd.DataFrame(
        {
            "src": proc[e["src"].to_numpy()],
            "dst": proc[e["dst"].to_numpy()],
            "count": e["count"].to_numpy().astype(np.int64),
            "bytes": e["bytes"].to_numpy().astype(np.int64),
            "time": e["time"].to_numpy(dtype=np.float64),
            "send_time": np.full(len(e), np.nan),
        }
    )


def _axis(pag: PAG, msgs: pd.DataFrame, collectives: bool = True) -> np.ndarray:
    procs = [pag.processes, msgs["src"].to_numpy(), msgs["dst"].to_numpy()]
    if collectives and pag.trace is not None and len(pag.trace.collectives):
        procs.append(pag.trace.collectives["process"].to_numpy().astype(np.int64))
    return np.unique(np.concatenate(procs).astype(np.int64))


def _collective_matrix(pag: PAG, axis: np.ndarray, metric: str) -> np.ndarray:
    P = len(axis)
    out = np.zeros((P, P))
    tr = pag.trace
    if tr is None or not len(tr.collectives) or metric == "time":
        return out
    c = tr.collectives
    op = c["op"].to_numpy()
    proc = np.searchsorted(axis, c["process"].to_numpy().astype(np.int64))
    inst = c["instance"].to_numpy()
    n_inst = np.bincount(inst)[inst]
    sent = c["sent"].to_numpy(dtype=np.float64)
    recv = c["received"].to_numpy(dtype=np.float64)
    root = c["root"].to_numpy().astype(np.int64)
    rootc = np.searchsorted(axis, np.maximum(root, 0))
    unit = metric == "count"
    one2n = np.isin(op, _ONE2N) & (root >= 0) & (c["process"].to_numpy() != root)
    np.add.at(out, (rootc[one2n], proc[one2n]), 1.0 if unit else recv[one2n])
    n2one = np.isin(op, _N2ONE) & (root >= 0) & (c["process"].to_numpy() != root)
    np.add.at(out, (proc[n2one], rootc[n2one]), 1.0 if unit else sent[n2one])
    n2n = ~np.isin(op, _ONE2N + _N2ONE + _NODATA) & (n_inst > 1)
    comm = c["comm"].to_numpy()
    for cid in np.unique(comm[n2n]).tolist():  # one outer product per communicator
        sel = n2n & (comm == cid)
        share = np.ones(sel.sum()) if unit else sent[sel] / (n_inst[sel] - 1)
        s = np.bincount(proc[sel], weights=share, minlength=P)
        members = np.zeros(P)
        members[np.unique(proc[sel])] = 1.0
        block = np.outer(s, members)
        np.fill_diagonal(block, 0.0)
        out += block
    return out


def message_traffic(messages: pd.DataFrame) -> pd.DataFrame:
    """Messages (rows of ``Trace.messages``) summed per (sender, receiver) process: ``count``, ``bytes``, ``time``.

    ``time`` is the transfer time ``max(0, receive completion - send)``.
    """
    df = pd.DataFrame(
        {
            "src": messages["send_process"].to_numpy().astype(np.int64),
            "dst": messages["recv_process"].to_numpy().astype(np.int64),
            "count": np.ones(len(messages), dtype=np.int64),
            "bytes": messages["bytes"].to_numpy().astype(np.int64),
            "time": np.maximum(0.0, messages["recv_time"].to_numpy() - messages["send_time"].to_numpy()),
        }
    )
    return df.groupby(["src", "dst"], sort=True)[["count", "bytes", "time"]].sum().reset_index()


def _traffic_partial(part: Any, s: NoSettings) -> pd.DataFrame:
    return message_traffic(part.messages())


def _traffic_combine(parts: list[pd.DataFrame], s: NoSettings) -> pd.DataFrame:
    df = pd.concat([p for p in parts if len(p)] or parts[:1], ignore_index=True)
    return df.groupby(["src", "dst"], sort=True)[["count", "bytes", "time"]].sum().reset_index()


def _traffic_finish(pag: PAG, df: pd.DataFrame, s: NoSettings) -> pd.DataFrame:
    return df


#: point-to-point traffic of a trace per (sender, receiver) process; partitioned (each partition sums the
#: messages received there)
P2P_TRAFFIC = Analysis(
    "comm.p2p_traffic",
    partial=_traffic_partial,
    combine=_traffic_combine,
    finish=_traffic_finish,
    uses=frozenset({"trace"}),
    doc="messages, bytes and transfer time per (sender, receiver) process",
)


def rma_traffic(pag: PAG) -> pd.DataFrame:
    """RMA transfers of a trace as ``src``, ``dst``, ``count``, ``bytes`` rows (one or two per transfer).

    A put moves ``bytes`` origin -> target, a get ``received`` target ->
    origin; an atomic both. Transfers with an unknown target are left out.
    """

    cols = {"src": np.int64, "dst": np.int64, "count": np.int64, "bytes": np.int64}
    tr = pag.trace
    if tr is None or not len(tr.rma):
        return pd.DataFrame({c: np.zeros(0, dtype=t) for c, t in cols.items()})
    r = tr.rma
    sel = np.isin(r["kind"].to_numpy(), np.array(TRANSFERS, dtype=np.int8)) & (r["remote"].to_numpy() >= 0)
    o = r["process"].to_numpy().astype(np.int64)[sel]
    t = r["remote"].to_numpy().astype(np.int64)[sel]
    out_b, in_b = r["bytes"].to_numpy()[sel], r["received"].to_numpy()[sel]
    put, got = out_b > 0, in_b > 0
    none = ~put & ~got  # a zero-byte transfer still counts as a put
    put |= none
    return pd.DataFrame(
        {
            "src": np.r_[o[put], t[got]],
            "dst": np.r_[t[put], o[got]],
            "count": np.r_[np.ones(int(put.sum()), np.int64), np.where(put[got], 0, 1)],
            "bytes": np.r_[out_b[put], in_b[got]].astype(np.int64),
        }
    )


def _matrix(pag: PAG, metric: str, collectives: bool, rma: bool = False) -> tuple[np.ndarray, np.ndarray]:
    if metric not in COMM_METRICS:
        raise PassError(f"metric must be one of {', '.join(COMM_METRICS)}, not {metric!r}")
    msgs = pag.analyses.get(P2P_TRAFFIC) if pag.trace is not None else p2p_messages(pag)
    if rma:
        extra = rma_traffic(pag).assign(time=0.0)
        msgs = pd.concat([msgs, extra[msgs.columns]], ignore_index=True) if len(extra) else msgs
    axis = _axis(pag, msgs, collectives)
    P = len(axis)
    s = np.searchsorted(axis, msgs["src"].to_numpy())
    d = np.searchsorted(axis, msgs["dst"].to_numpy())
    w = msgs[metric].to_numpy(dtype=np.float64)
    mat = np.bincount(s * P + d, weights=w, minlength=P * P).reshape(P, P) if P else np.zeros((0, 0))
    if collectives:
        mat = mat + _collective_matrix(pag, axis, metric)
    return axis, mat


@pass_(version="2", tags=("trace", "comm"))
def comm_matrix(pag: PAG, *, metric: str = "bytes", collectives: bool = False, rma: bool = False) -> pd.DataFrame:
    """Process x process communication matrix: row = sender, column = receiver.

    Parameters
    ----------
    pag : PAG
        A trace (messages) or a profile with explicit communication edges.
    metric : {"bytes", "count", "time"}
        Bytes sent, number of messages, or summed transfer time (receive
        completion minus send; collectives contribute no time).
    collectives : bool
        Add the logical traffic of collective operations (see the module docstring).
    rma : bool
        Add the MPI one-sided transfers (puts origin -> target, gets target -> origin; see the module docstring).

    Returns
    -------
    pandas.DataFrame
        Square, indexed by sender process (index name ``sender``) with one
        column per receiver process (columns name ``receiver``).
    """
    pag = as_pag(pag)
    axis, mat = _matrix(pag, metric, collectives, rma)
    df = pd.DataFrame(mat, index=pd.Index(axis, name="sender"), columns=pd.Index(axis, name="receiver"))
    if metric == "count" or (metric == "bytes" and np.all(mat == np.round(mat))):
        df = df.astype(np.int64)
    df.attrs.update({"metric": metric, "collectives": collectives, "rma": rma})
    return df


def _need_messages(pag: PAG, what: str) -> pd.DataFrame:
    if pag.trace is None:
        raise PassError(f"{what} needs a trace with individual messages; this PAG has none")
    return p2p_messages(pag)


@pass_(version="1", tags=("trace", "comm"))
def message_sizes(pag: PAG, *, bins: list[float] | None = None) -> pd.DataFrame:
    """Histogram of point-to-point message sizes.

    Parameters
    ----------
    pag : PAG
        A trace.
    bins : list of float, optional
        Bin edges in bytes (increasing). Default: powers of two, bin ``[2^i,
        2^(i+1))`` for every size present, with ``[0, 1)`` for empty messages.

    Returns
    -------
    pandas.DataFrame
        ``low``, ``high`` (bin bounds in bytes, high exclusive), ``count``
        (messages), ``bytes`` (their total size), ``share`` (of the messages).
    """
    msgs = _need_messages(as_pag(pag), "message_sizes")
    size = msgs["bytes"].to_numpy(dtype=np.float64)
    if bins is not None:
        edges = np.asarray(bins, dtype=np.float64)
        if len(edges) < 2 or np.any(np.diff(edges) <= 0):
            raise PassError("bins must be at least two increasing edges")
    else:
        top = int(np.ceil(np.log2(size.max() + 1))) if len(size) and size.max() > 0 else 0
        edges = np.r_[0.0, 2.0 ** np.arange(0, top + 1)]
    idx = np.searchsorted(edges, size, side="right") - 1
    ok = (idx >= 0) & (idx < len(edges) - 1)
    nb = len(edges) - 1
    count = np.bincount(idx[ok], minlength=nb)
    total = np.bincount(idx[ok], weights=size[ok], minlength=nb)
    df = pd.DataFrame({"low": edges[:-1], "high": edges[1:], "count": count, "bytes": total.astype(np.int64)})
    df["share"] = df["count"] / max(int(count.sum()), 1)
    if bins is None:
        df = df[df["count"] > 0].reset_index(drop=True)
    return df


@pass_(version="1", tags=("trace", "comm"))
def comm_over_time(pag: PAG, *, bins: int = 50, collectives: bool = False) -> pd.DataFrame:
    """Messages and bytes per time bin (by send time) over the span of the trace.

    Parameters
    ----------
    pag : PAG
        A trace.
    bins : int
        Number of equal-width time bins over the trace's span.
    collectives : bool
        Also count collective calls (by their begin time) and their bytes sent.

    Returns
    -------
    pandas.DataFrame
        ``t_start``, ``t_end`` (seconds), ``messages``, ``bytes``, and with
        collectives ``collective_calls``, ``collective_bytes``.
    """
    pag = as_pag(pag)
    msgs = _need_messages(pag, "comm_over_time")
    if bins < 1:
        raise PassError(f"bins must be >= 1, not {bins}")
    t0, t1 = pag.trace.span  # type: ignore[union-attr]
    edges = np.linspace(t0, t1 if t1 > t0 else t0 + 1.0, bins + 1)

    def hist(t: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
        i = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, bins - 1)
        return np.bincount(i, weights=w, minlength=bins)

    st = msgs["send_time"].to_numpy()
    df = pd.DataFrame(
        {
            "t_start": edges[:-1],
            "t_end": edges[1:],
            "messages": hist(st).astype(np.int64),
            "bytes": hist(st, msgs["bytes"].to_numpy(dtype=np.float64)).astype(np.int64),
        }
    )
    if collectives:
        c = pag.trace.collectives  # type: ignore[union-attr]
        df["collective_calls"] = hist(c["begin"].to_numpy()).astype(np.int64)
        df["collective_bytes"] = hist(c["begin"].to_numpy(), c["sent"].to_numpy(dtype=np.float64)).astype(np.int64)
    return df


@pass_(version="4", tags=("trace", "comm"))
@settings_keywords(WaitSettings, "wait_settings")
def comm_summary(pag: PAG, *, wait_settings: WaitSettings) -> pd.DataFrame:
    """Per-process communication summary.

    Parameters
    ----------
    pag : PAG
        A trace or a profile with explicit communication edges.

    Returns
    -------
    pandas.DataFrame
        ``process``, ``msgs_sent``, ``bytes_sent``, ``msgs_recv``,
        ``bytes_recv``, ``partners_out``, ``partners_in`` (distinct peers),
        ``p2p_time`` (summed transfer time of received messages),
        ``late_sender_wait`` (Late Sender time as receiver, traces only),
        ``late_receiver_wait`` (Late Receiver time as sender, traces only; both
        from :func:`perflow.passes.waitstates.waiting_time`),
        ``coll_calls``, ``coll_bytes_sent``, ``coll_bytes_recv`` (traces only);
        for traces with MPI one-sided transfers ``rma_ops`` (transfers issued),
        ``rma_bytes_put``, ``rma_bytes_get`` (bytes moved to / fetched from
        targets by the process's transfers) and ``rma_wait`` (RMA
        synchronisation wait states: fences, late posts, early waits).
    """
    pag = as_pag(pag)
    msgs = p2p_messages(pag)
    axis = _axis(pag, msgs)
    P = len(axis)
    s = np.searchsorted(axis, msgs["src"].to_numpy())
    d = np.searchsorted(axis, msgs["dst"].to_numpy())
    cnt = msgs["count"].to_numpy(dtype=np.float64)
    b = msgs["bytes"].to_numpy(dtype=np.float64)
    pair = np.unique(s * P + d) if len(s) else np.zeros(0, np.int64)
    df = pd.DataFrame(
        {
            "process": axis,
            "msgs_sent": np.bincount(s, weights=cnt, minlength=P).astype(np.int64),
            "bytes_sent": np.bincount(s, weights=b, minlength=P).astype(np.int64),
            "msgs_recv": np.bincount(d, weights=cnt, minlength=P).astype(np.int64),
            "bytes_recv": np.bincount(d, weights=b, minlength=P).astype(np.int64),
            "partners_out": np.bincount(pair // max(P, 1), minlength=P),
            "partners_in": np.bincount(pair % max(P, 1), minlength=P),
            "p2p_time": np.bincount(d, weights=msgs["time"].to_numpy(), minlength=P),
        }
    )
    tr = pag.trace
    if tr is not None:
        wt = waiting_time(pag, wait_settings=wait_settings)
        wp = np.searchsorted(axis, wt["process"].to_numpy())
        df["late_sender_wait"] = np.bincount(wp, weights=wt["late_sender"].to_numpy(), minlength=P)
        df["late_receiver_wait"] = np.bincount(wp, weights=wt["late_receiver"].to_numpy(), minlength=P)
        c = tr.collectives
        cp = np.searchsorted(axis, c["process"].to_numpy().astype(np.int64))
        df["coll_calls"] = np.bincount(cp, minlength=P)
        df["coll_bytes_sent"] = np.bincount(cp, weights=c["sent"].to_numpy(dtype=np.float64), minlength=P).astype(
            np.int64
        )
        df["coll_bytes_recv"] = np.bincount(cp, weights=c["received"].to_numpy(dtype=np.float64), minlength=P).astype(
            np.int64
        )
        if len(tr.rma):
            r = tr.rma
            sel = np.isin(r["kind"].to_numpy(), np.array(TRANSFERS, dtype=np.int8))
            rp = np.searchsorted(axis, r["process"].to_numpy().astype(np.int64)[sel])
            df["rma_ops"] = np.bincount(rp, minlength=P)
            for col, src in (("rma_bytes_put", "bytes"), ("rma_bytes_get", "received")):
                w = r[src].to_numpy(dtype=np.float64)[sel]
                df[col] = np.bincount(rp, weights=w, minlength=P).astype(np.int64)
            df["rma_wait"] = np.bincount(wp, weights=wt["rma_sync"].to_numpy(), minlength=P)
    return df


@pass_(version="1", tags=("trace", "comm"))
def comm_pattern(
    pag: PAG,
    *,
    metric: str = "bytes",
    collectives: bool = False,
    max_degree: int = 26,
    dense: float = 0.9,
    hub_share: float = 0.8,
) -> pd.DataFrame:
    """Classify the communication pattern: nearest-neighbour/stencil, ring, all-to-all, gather/master-worker or none.

    The tests, on the communication matrix (see :func:`perflow.passes._pattern.classify_pattern`
    for the exact rules), in this order:

    * ``none``: no traffic;
    * ``all-to-all``: at least ``dense`` of the ``P (P - 1)`` ordered pairs communicate (P >= 3);
    * ``gather/master-worker``: one process takes part in at least ``hub_share`` of the traffic (P >= 3);
    * ``ring``: every process sends to exactly one peer at the same offset ``(j - i) mod P``;
    * ``nearest-neighbour``: every process talks to at most ``max_degree``
      peers (fewer than P - 1) and a few rank offsets (about as many as that
      largest degree) carry 90% of the traffic; with two processes, any exchange.

    Pairs whose traffic is below 1% of the mean non-zero pair count as silent.

    Parameters
    ----------
    pag : PAG
        A trace or a profile with communication edges.
    metric : {"bytes", "count", "time"}
        Matrix the classification weighs traffic by.
    collectives : bool
        Include the logical traffic of collectives.
    max_degree : int
        Most partners a process may have in a nearest-neighbour pattern (26: a 3-D 27-point stencil).
    dense : float
        Fraction of communicating pairs that makes an all-to-all pattern.
    hub_share : float
        Share of the traffic through one process that makes a gather/master-worker pattern.

    Returns
    -------
    pandas.DataFrame
        One row per candidate pattern, the chosen one first: ``pattern``,
        ``matched`` (bool), ``score`` (0-1, how strongly the evidence
        supports it), ``evidence`` (text). ``df.attrs["pattern"]`` is the choice.
    """
    pag = as_pag(pag)
    axis, mat = _matrix(pag, metric, collectives)
    return classify_pattern(mat, axis, max_degree=max_degree, dense=dense, hub_share=hub_share)
