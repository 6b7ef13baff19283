"""GPU and runtime timelines as a raw trace: host calls, device work on streams, launches and waits as messages.

The readers of Nsight Systems exports (:mod:`perflow.readers.nsys`) and of
rocprof output (:mod:`perflow.readers.rocprof`) turn their files into a
:class:`Timeline` (two tables, times in integer ticks) and call
:func:`timeline_pag`. What becomes of it (see ``docs/formats.md``):

Locations
    Every host thread is a CPU location of its process; every (device,
    stream) a GPU location (``type`` ``"gpu"``) of the process that used
    it, numbered after the process's CPU threads. A GPU location exists from
    its process's first to its last event: between its operations it is in
    the region :data:`perflow.kinds.GPU_IDLE`, so its time adds up to the
    process's span like a thread's.
Call paths
    A GPU operation launched by a host call (same correlation id) is placed
    below the launching call's call path: kernel ``k`` launched by
    ``cudaLaunchKernel`` inside ``main > solve`` is the vertex
    ``main > solve > cudaLaunchKernel > k``, its time on the GPU location
    (the region call-stack mechanism of :mod:`perflow.trace.contexts`: the
    frames are the host's vertices, with inclusive time and no visits on the
    GPU location). Operations without a known launch are roots.
Messages
    On the communicator ``gpu`` (id 1; zero bytes): a *launch* from the host
    call (sent at its enter) to the operation, received by the idle period
    that ends when the operation starts (the stream waited for it) or else
    by the operation itself; a *completion* from the GPU to each host call
    that waits for it (``cudaDeviceSynchronize``, a blocking copy, ...: the
    operation of the process that ends last within the call), sent by the
    region instance that begins when the operation ends (so the Late Sender
    formula charges the host the time until the operation ended) and
    received at the call's end. The wait-state, critical-path and parallel
    view passes then see a host blocked on the GPU as a Late Sender, and a
    stream starved by its host as one too.
Bytes
    Copies and sets carry their bytes as the accumulated metric ``gpu_bytes``
    (inclusive per instance).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..errors import TraceError
from ..kinds import GPU_IDLE, P2P
from ..pag.pag import PAG
from ..trace.raw import RawTrace
from ..trace.scan import scan_regions
from ._chrome_nest import nest_intervals
from ._common import build_trace

__all__ = ["Timeline", "timeline_raw", "timeline_pag", "is_waiting_call", "HOST_COLUMNS", "GPU_COLUMNS", "GPU_COMM"]

log = logging.getLogger(__name__)

#: host calls: one row per call or range on a host thread (times in ticks; ``corr`` -1 when none; ``sync``: the
#: call waits for the device)
HOST_COLUMNS = ("process", "thread", "start", "end", "name", "paradigm", "corr", "sync")
#: device work: one row per kernel, copy or set (``kind`` ``"kernel"``, ``"memcpy"``, ``"memset"``)
GPU_COLUMNS = ("process", "device", "stream", "start", "end", "name", "kind", "corr", "bytes")
#: the communicator of launch and completion messages
GPU_COMM = 1

_HOST, _OP, _IDLE = 0, 1, 2

_WAITING = re.compile(
    r"^(?:(?:cuda|hip)(?:Device|Thread|Stream|Event)Synchronize|cu(?:Ctx|Stream|Event)Synchronize"
    r"|(?:cuda|hip)Memcpy(?:2D|3D)?(?:ToSymbol|FromSymbol)?|(?:cu|hip)Memcpy(?:HtoD|DtoH|DtoD)?"
    r")(?:_v\d+)?(?:_ptsz|_ptds|_spt)?$"
)


def is_waiting_call(name: str) -> bool:
    """Whether a host API call blocks until device work is done.

    The synchronisations (``cudaDeviceSynchronize``, ``cudaStreamSynchronize``,
    ``cudaEventSynchronize``, ``cuCtxSynchronize``, their HIP twins) and the
    blocking copies (``cudaMemcpy``, ``cudaMemcpy2D``, ``cuMemcpyDtoH``,
    ``hipMemcpy``, ...), with nsys's version suffixes (``_v3020``) and the
    per-thread default-stream forms (``_ptsz``). ``cudaMemcpyAsync`` does not.
    """
    return bool(_WAITING.match(name))


@dataclass
class Timeline:
    """Host calls and device work of a run, before they become a raw trace.

    Attributes
    ----------
    host, gpu : pandas.DataFrame
        Columns :data:`HOST_COLUMNS` and :data:`GPU_COLUMNS`; ``start`` and
        ``end`` in ticks (integers or floats), processes and threads as
        small integers (threads ``0..T-1`` per process).
    tick : float
        Seconds per tick.
    api : str
        The paradigm of the device work and of the idle region (``"cuda"``, ``"hip"``).
    thread_names : dict
        ``(process, thread)`` to a name for the location table.
    device_names : dict
        ``(process, device)`` to a name (the GPU model; ``attrs["gpu_models"]`` lists them).
    attrs : dict
        Attributes for the PAG (``source`` at least).
    """

    host: pd.DataFrame
    gpu: pd.DataFrame
    tick: float = 1e-9
    api: str = "cuda"
    thread_names: dict[tuple[int, int], str] = field(default_factory=dict)
    device_names: dict[tuple[int, int], str] = field(default_factory=dict)
    attrs: dict[str, Any] = field(default_factory=dict)


def _frame(df: pd.DataFrame, cols: tuple[str, ...], what: str) -> pd.DataFrame:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise TraceError(f"GPU timeline: the {what} table lacks columns {missing}")
    out = df.loc[:, list(cols)].reset_index(drop=True)
    bad = np.flatnonzero(out["end"].to_numpy(np.float64) < out["start"].to_numpy(np.float64))
    if len(bad):
        r = out.iloc[int(bad[0])]
        raise TraceError(f"GPU timeline: {what} row {int(bad[0])} ({r['name']!r}) ends before it starts")
    return out


def _locations(host: pd.DataFrame, gpu: pd.DataFrame, tl: Timeline) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """The location table (sorted by process, thread) and the location of every host and GPU row."""
    hk = host[["process", "thread"]].drop_duplicates().sort_values(["process", "thread"])
    n_thr = hk.groupby("process")["thread"].max().add(1)
    gk = gpu[["process", "device", "stream"]].drop_duplicates().sort_values(["process", "device", "stream"])
    gk = gk.reset_index(drop=True)
    first = n_thr.reindex(gk["process"]).fillna(0).to_numpy(np.int64)
    gk["thread"] = first + gk.groupby("process").cumcount().to_numpy()
    rows = [
        (int(p), int(t), tl.thread_names.get((int(p), int(t)), f"thread {int(t)}"), "cpu", -1, -1)
        for p, t in hk.itertuples(index=False)
    ]
    for p, d, s, t in gk[["process", "device", "stream", "thread"]].itertuples(index=False):
        where = f"stream {int(s)}" if s >= 0 else "copy engine"
        rows.append((int(p), int(t), f"GPU {int(d)} {where}", "gpu", int(d), int(s)))
    locs = pd.DataFrame(rows, columns=["process", "thread", "name", "type", "device", "stream"])
    locs = locs.sort_values(["process", "thread"], kind="stable").reset_index(drop=True)
    key = locs["process"].to_numpy(np.int64) * (1 << 32) + locs["thread"].to_numpy(np.int64)
    hloc = np.searchsorted(key, host["process"].to_numpy(np.int64) * (1 << 32) + host["thread"].to_numpy(np.int64))
    gmap = gk.merge(locs.reset_index()[["index", "process", "thread"]], on=["process", "thread"])
    gmap = gmap.set_index(["process", "device", "stream"])["index"]
    gloc = gmap.reindex(pd.MultiIndex.from_frame(gpu[["process", "device", "stream"]])).to_numpy(np.int64)
    return locs, hloc.astype(np.int64), gloc


def _shift_overlaps(loc: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Operations of one stream run one after the other: one starting before its predecessor ends starts then."""
    s, e = start.copy(), end.copy()
    if len(s) < 2:
        return s, e, 0
    prev_end = pd.Series(e).groupby(loc).cummax().groupby(loc).shift(1).to_numpy(np.float64)
    late = np.isfinite(prev_end) & (s < prev_end)
    s[late] = prev_end[late]
    e = np.maximum(e, s)
    return s, e, int(late.sum())


def _idle(
    loc: np.ndarray, start: np.ndarray, end: np.ndarray, proc: np.ndarray, pstart: pd.Series, pend: pd.Series
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Idle periods of the GPU locations: before each operation that starts after the previous one ended, and
    after the last one (zero-length when the run ends there). Returns loc, start, end and the operation each
    precedes (-1 for the last)."""
    n = len(loc)
    if not n:
        z = np.zeros(0)
        return z.astype(np.int64), z, z, z.astype(np.int64)
    first = np.r_[True, loc[1:] != loc[:-1]]
    last = np.r_[loc[1:] != loc[:-1], True]
    prev_end = np.empty(n)
    prev_end[1:] = end[:-1]
    prev_end[first] = pstart.reindex(proc[first]).to_numpy(np.float64)
    gap = start > prev_end
    i = np.flatnonzero(gap)
    tail = np.flatnonzero(last)
    t_end = np.maximum(pend.reindex(proc[tail]).to_numpy(np.float64), end[tail])
    return (
        np.r_[loc[i], loc[tail]],
        np.r_[prev_end[i], end[tail]],
        np.r_[start[i], t_end],
        np.r_[i, np.full(len(tail), -1)],
    )


def _factorize_rows(*cols: Any) -> tuple[np.ndarray, list[tuple[Any, ...]]]:
    """Codes of equal rows of some columns (first-appearance order) and the distinct rows."""
    n = len(cols[0])
    if not n:
        return np.zeros(0, dtype=np.int64), []
    # column by column: (codes so far, this column's code) as one integer, factorised again (first appearance
    # order throughout); a MultiIndex of millions of rows would build a tuple per row
    codes = np.zeros(n, dtype=np.int64)
    for c in cols:
        cc, cu = pd.factorize(np.asarray(c), use_na_sentinel=False)
        codes = pd.factorize(codes * len(cu) + cc)[0].astype(np.int64)
    first = np.unique(codes, return_index=True)[1]
    uniq = list(zip(*(np.asarray(c)[first].tolist() for c in cols), strict=True))
    return codes, uniq


def _call_path_frames(cp_parent: np.ndarray, cp_region: np.ndarray, cps: np.ndarray) -> dict[int, list[int]]:
    """The regions from the root down to each call path in ``cps`` (outermost first)."""
    out: dict[int, list[int]] = {}
    for cp in cps.tolist():
        frames = []
        c = cp
        while c >= 0:
            frames.append(int(cp_region[c]))
            c = int(cp_parent[c])
        out[cp] = frames[::-1]
    return out


def _awaited(
    host: pd.DataFrame, sync_rows: np.ndarray, own: np.ndarray, gproc: np.ndarray, gstart: np.ndarray, gend: np.ndarray
) -> tuple[np.ndarray, np.ndarray, int]:
    """For each waiting host call, the device operation it waited for.

    A call with an operation of its own (a blocking copy: the same
    correlation id, ``own`` >= 0) waited for it; any other for the operation
    of its process that ends last within the call (and started before the
    call ended). An operation that does not end within the call's interval
    is not linked: the call returned before it ended (a copy from pageable
    memory returns once the data are staged), or the clocks disagree. Returns
    the host rows that waited, their operations, and the number of own
    operations left unlinked.
    """
    none = np.zeros(0, np.int64)
    if not len(sync_rows) or not len(gproc):
        return none, none, 0
    hp = host["process"].to_numpy(np.int64)[sync_rows]
    hs = host["start"].to_numpy(np.float64)[sync_rows]
    he = host["end"].to_numpy(np.float64)[sync_rows]
    hit = np.where(own >= 0, own, -1)
    order = np.lexsort((gend, gproc))
    gp, gs, ge = gproc[order].astype(np.int64), gstart[order], gend[order]
    for p in np.unique(hp[own < 0]).tolist():
        lo, hi = np.searchsorted(gp, [p, p + 1])
        sel = np.flatnonzero((hp == p) & (own < 0))
        if lo == hi or not len(sel):
            continue
        j = lo + np.maximum(np.searchsorted(ge[lo:hi], he[sel], side="right") - 1, 0)
        ok = (np.searchsorted(ge[lo:hi], he[sel], side="right") > 0) & (gs[j] < he[sel])
        hit[sel[ok]] = order[j[ok]]
    i = np.maximum(hit, 0)
    within = (hit >= 0) & (gend[i] > hs) & (gend[i] <= he)
    unordered = int(((own >= 0) & ~within).sum())
    return sync_rows[within], hit[within], unordered


def timeline_raw(tl: Timeline) -> RawTrace:
    """The raw trace of a :class:`Timeline` (see the module docstring)."""
    src = tl.attrs.get("source", "GPU timeline")
    host = _frame(tl.host, HOST_COLUMNS, "host")
    gpu = _frame(tl.gpu, GPU_COLUMNS, "GPU")
    if not len(host) and not len(gpu):
        raise TraceError(f"{src}: no host calls and no GPU operations: nothing to build a trace from")
    t0 = min(
        float(host["start"].min()) if len(host) else np.inf,
        float(gpu["start"].min()) if len(gpu) else np.inf,
    )
    locs, hloc, gloc = _locations(host, gpu, tl)
    loc_proc = locs["process"].to_numpy(np.int64)
    hs = host["start"].to_numpy(np.float64) - t0
    he = host["end"].to_numpy(np.float64) - t0
    # device work per stream in stream order
    gorder = np.lexsort((gpu["end"].to_numpy(np.float64), gpu["start"].to_numpy(np.float64), gloc))
    gpu = gpu.iloc[gorder].reset_index(drop=True)
    gloc = gloc[gorder]
    gs, ge, shifted = _shift_overlaps(
        gloc, gpu["start"].to_numpy(np.float64) - t0, gpu["end"].to_numpy(np.float64) - t0
    )
    if shifted:
        log.warning("%s: %d GPU operations started before the previous one on their stream ended", src, shifted)
    gproc = gpu["process"].to_numpy(np.int64)
    span = pd.DataFrame({"p": np.r_[host["process"].to_numpy(np.int64), gproc], "s": np.r_[hs, gs], "e": np.r_[he, ge]})
    pstart, pend = span.groupby("p")["s"].min(), span.groupby("p")["e"].max()
    iloc_, istart, iend, ibefore = _idle(gloc, gs, ge, gproc, pstart, pend)

    # regions: host (name, paradigm), the idle region, then device work (name, kind, launching call path)
    hcode, huniq = _factorize_rows(host["name"].astype(str), host["paradigm"].astype(str))
    n_hreg = len(huniq)
    idle_region = n_hreg

    # all intervals: host sorted by (location, start, -end); GPU locations in stream order (idle before its op)
    horder = np.lexsort((-he, hs, hloc))
    seq_op = 2 * np.arange(len(gs)) + 1
    seq_idle = np.where(ibefore >= 0, 2 * ibefore, 2 * len(gs) + 2 * np.arange(len(ibefore)))
    g_loc = np.r_[gloc, iloc_]
    g_seq = np.r_[seq_op, seq_idle]
    g_order = np.lexsort((g_seq, g_loc))
    role = np.r_[np.full(len(horder), _HOST), np.where(g_order < len(gs), _OP, _IDLE)]
    ref = np.r_[horder, np.where(g_order < len(gs), g_order, g_order - len(gs))]
    iv_loc = np.r_[hloc[horder], g_loc[g_order]]
    iv_start = np.r_[hs[horder], np.r_[gs, istart][g_order]]
    iv_end = np.r_[he[horder], np.r_[ge, iend][g_order]]
    iv_reg = np.r_[hcode[horder], np.where(g_order < len(gs), 0, idle_region)].astype(np.int64)
    by_loc = np.argsort(iv_loc, kind="stable")
    role, ref, iv_loc, iv_start, iv_end, iv_reg = (a[by_loc] for a in (role, ref, iv_loc, iv_start, iv_end, iv_reg))
    ev_loc, ev_t, ev_k, ev_r = nest_intervals(iv_loc, iv_start, iv_end, iv_reg)
    res = scan_regions(ev_loc, ev_k, ev_r, time=ev_t)
    if res.error:  # pragma: no cover - nest_intervals emits properly nested events
        raise TraceError(f"{src}: could not nest the timeline's intervals (scan error {res.error})")
    # interval k (in this order) is instance k: its Enter and Leave events
    enter_ev, leave_ev = res.enter, res.leave
    pos_of = {r: np.full(n, -1, dtype=np.int64) for r, n in ((_HOST, len(host)), (_OP, len(gs)), (_IDLE, len(istart)))}
    for r in (_HOST, _OP, _IDLE):
        sel = np.flatnonzero(role == r)
        pos_of[r][ref[sel]] = sel
    h_inst, o_inst, i_inst = pos_of[_HOST], pos_of[_OP], pos_of[_IDLE]

    # launches: host row of each operation by (process, correlation id)
    hcorr = pd.DataFrame(
        {"p": host["process"].to_numpy(np.int64), "c": host["corr"].to_numpy(np.int64), "row": np.arange(len(host))}
    )
    hcorr = hcorr[hcorr["c"] >= 0].drop_duplicates(["p", "c"])
    launch = (
        pd.DataFrame({"p": gproc, "c": gpu["corr"].to_numpy(np.int64)})
        .merge(hcorr, on=["p", "c"], how="left")["row"]
        .fillna(-1)
        .to_numpy(np.int64)
    )
    # the launching call paths become the stacks of the operations' regions
    linked = np.flatnonzero(launch >= 0)
    cp_of_op = np.full(len(gs), -1, dtype=np.int64)
    cp_of_op[linked] = res.callpath[h_inst[launch[linked]]]
    ucp, stack_of_op = np.unique(cp_of_op, return_inverse=True)
    stack_id = np.where(ucp >= 0, np.cumsum(ucp >= 0) - 1, -1)
    frames = _call_path_frames(res.cp_parent, res.cp_region, ucp[ucp >= 0])
    stack_rows = [
        (int(stack_id[i]), d, r) for i, cp in enumerate(ucp.tolist()) if cp >= 0 for d, r in enumerate(frames[cp])
    ]
    ocode, ouniq = _factorize_rows(gpu["name"].astype(str), gpu["kind"].astype(str), stack_id[stack_of_op])
    op_region = n_hreg + 1 + ocode
    ev_r = ev_r.copy()
    ev_r[enter_ev[o_inst]] = op_region
    ev_r[leave_ev[o_inst]] = op_region
    regions = pd.DataFrame(
        [{"name": n, "role": "function", "paradigm": p, "stack": -1} for n, p in huniq]
        + [{"name": GPU_IDLE, "role": "function", "paradigm": tl.api, "stack": -1}]
        + [{"name": n, "role": "function", "paradigm": tl.api, "stack": int(s)} for n, _k, s in ouniq],
        columns=["name", "role", "paradigm", "stack"],
    )
    regions["file"], regions["line"], regions["module"] = "", 0, ""

    p2p = _messages(host, gpu, tl, hloc, gloc, launch, res, h_inst, o_inst, i_inst, ibefore)
    metric_events, metrics = _byte_samples(gpu, gloc, enter_ev, leave_ev, o_inst, ev_t * tl.tick)
    nprocs = int(loc_proc.max()) + 1 if len(loc_proc) else 0
    attrs = {
        **tl.attrs,
        "time_offset": t0 * tl.tick,
        "gpu_api": tl.api,
        "gpu_streams": int((locs["type"] == "gpu").sum()),
        "gpu_models": "; ".join(
            f"{d}: {n}" for d, n in sorted({d: n for (_p, d), n in tl.device_names.items() if n}.items())
        ),
        "gpu_devices": int(gpu[["process", "device"]].drop_duplicates().shape[0]),
        "gpu_kernels": int((gpu["kind"] == "kernel").sum()),
        "gpu_copies": int((gpu["kind"] == "memcpy").sum()),
        "gpu_sets": int((gpu["kind"] == "memset").sum()),
        "gpu_launches_linked": int(len(linked)),
        "gpu_overlaps_shifted": shifted,
        **p2p.pop("_attrs"),
    }
    return RawTrace(
        locations=locs[["process", "thread", "name", "type"]],
        regions=regions,
        region_events={
            "location": ev_loc.astype(np.int32),
            "time": ev_t * tl.tick,
            "kind": ev_k.astype(np.int8),
            "region": ev_r.astype(np.int32),
        },
        p2p_events=p2p,
        metric_events=metric_events,
        metrics=metrics,
        stacks=pd.DataFrame(stack_rows, columns=["stack", "depth", "region"]),
        comms={0: np.arange(nprocs), GPU_COMM: np.arange(nprocs)},
        comm_names={0: "MPI_COMM_WORLD", GPU_COMM: "gpu"},
        attrs=attrs,
    )


def _messages(host, gpu, tl, hloc, gloc, launch, res, h_inst, o_inst, i_inst, ibefore):  # type: ignore[no-untyped-def]
    """Launch and completion messages as p2p events (see the module docstring)."""
    enter_ev, leave_ev = res.enter, res.leave
    t_enter, t_leave = res.t_enter, res.t_leave
    gproc = gpu["process"].to_numpy(np.int64)
    n_ops = len(gproc)
    # launches: sent at the launching call's enter, received where the stream waited for the operation
    ops = np.flatnonzero(launch >= 0)
    hi = h_inst[launch[ops]]
    idle_before = np.full(n_ops, -1, dtype=np.int64)
    has = ibefore >= 0
    idle_before[ibefore[has]] = np.flatnonzero(has)
    ib = idle_before[ops]
    in_idle = ib >= 0
    recv_pos = np.where(in_idle, leave_ev[i_inst[np.maximum(ib, 0)]], enter_ev[o_inst[ops]] + 1)
    l_send = (hloc[launch[ops]], t_enter[hi], enter_ev[hi] + 1, gproc[ops])
    l_recv = (gloc[ops], t_enter[o_inst[ops]], recv_pos, gproc[ops])
    # completions: a waiting host call and the operation it waited for
    sync = np.flatnonzero(host["sync"].to_numpy(bool))
    g_s = t_enter[o_inst] if n_ops else np.zeros(0)
    g_e = t_leave[o_inst] if n_ops else np.zeros(0)
    h_sync = pd.DataFrame(
        {"process": host["process"].to_numpy(np.int64), "start": t_enter[h_inst], "end": t_leave[h_inst]}
    )
    own_of_host = np.full(len(host), -1, dtype=np.int64)
    own_of_host[launch[ops]] = ops
    rows, waited, unordered = _awaited(h_sync, sync, own_of_host[sync], gproc, g_s, g_e)
    # the sender: the instance on the operation's stream that begins when it ends (the idle after it, or the next op)
    nxt = o_inst[waited] + 1
    s_send = (gloc[waited], g_e[waited], enter_ev[nxt] + 1, gproc[waited])
    s_recv = (hloc[rows], t_leave[h_inst[rows]], leave_ev[h_inst[rows]], gproc[waited])
    n_l, n_s = len(ops), len(rows)
    loc = np.r_[l_send[0], l_recv[0], s_send[0], s_recv[0]].astype(np.int64)
    time = np.r_[l_send[1], l_recv[1], s_send[1], s_recv[1]]
    pos = np.r_[l_send[2], l_recv[2], s_send[2], s_recv[2]].astype(np.int64)
    peer = np.r_[l_send[3], l_recv[3], s_send[3], s_recv[3]].astype(np.int64)
    kind = np.r_[
        np.full(n_l, int(P2P.SEND)),
        np.full(n_l, int(P2P.RECV)),
        np.full(n_s, int(P2P.SEND)),
        np.full(n_s, int(P2P.RECV)),
    ]
    # one tag per message and process: the matching is then exact whatever the posting order
    tag = np.r_[np.arange(n_l), np.arange(n_l), n_l + np.arange(n_s), n_l + np.arange(n_s)]
    if len(tag) and tag.max() >= 2**31:
        raise TraceError(f"{tl.attrs.get('source', 'GPU timeline')}: more than 2**31 launches and waits")
    order = np.lexsort((time, pos, loc))
    out: dict[str, Any] = {
        "location": loc[order],
        "time": time[order] * tl.tick,
        "kind": kind[order],
        "peer": peer[order],
        "comm": np.full(len(loc), GPU_COMM),
        "tag": tag[order],
        "bytes": np.zeros(len(loc), dtype=np.int64),
        "request": np.full(len(loc), -1),
        "pos": pos[order],
    }
    out["_attrs"] = {
        "gpu_waits_linked": int(n_s),
        "gpu_waits_unlinked": unordered,
        "gpu_launches_into_idle": int(in_idle.sum()),
    }
    return out


def _byte_samples(gpu, gloc, enter_ev, leave_ev, o_inst, ev_time) -> tuple[dict[str, Any], pd.DataFrame]:  # type: ignore[no-untyped-def]
    """The accumulated metric ``gpu_bytes``: two samples per copy or set (at its start and end), per stream.

    ``ev_time`` holds the region events' times in seconds.
    """
    b = gpu["bytes"].to_numpy(np.float64)
    b = np.where(np.isfinite(b) & (b > 0), b, 0.0)
    ops = np.flatnonzero(b > 0)
    if not len(ops):
        return {"location": [], "time": [], "metric": [], "value": [], "pos": []}, pd.DataFrame(
            {"name": [], "unit": [], "mode": []}
        )
    cum = pd.Series(b).groupby(gloc).cumsum().to_numpy()
    before, after = cum[ops] - b[ops], cum[ops]
    e, lv = enter_ev[o_inst[ops]], leave_ev[o_inst[ops]]
    loc = np.repeat(gloc[ops], 2)
    ev = {
        "location": loc.astype(np.int32),
        "time": np.c_[ev_time[e], ev_time[lv]].ravel(),
        "metric": np.zeros(2 * len(ops), dtype=np.int32),
        "value": np.c_[before, after].ravel(),
        "pos": np.c_[e + 1, lv].ravel(),
    }
    return ev, pd.DataFrame({"name": ["gpu_bytes"], "unit": ["bytes"], "mode": ["accumulated"]})


def timeline_pag(tl: Timeline) -> PAG:
    """Build the PAG of a :class:`Timeline` (MPI calls recorded as ranges are collectives by name)."""
    raw = timeline_raw(tl)
    return build_trace(raw, infer_collectives=True)
