"""Charm++ Projections logs: entry methods, idle time and messages per PE.

A run traced with ``+tracemode projections`` leaves ``PROG.sts`` (the
definitions: chares, entry methods, user events, the PE count) and one log
per PE, ``PROG.<pe>.log`` or ``PROG.<pe>.log.gz`` (text records, times in
microseconds). Give the ``.sts`` file or the directory holding it.

What is read
------------
* Every PE is a process (thread 0) named ``PE n``.
* ``BEGIN_PROCESSING``/``END_PROCESSING`` pairs are region instances of the
  entry method, named ``Chare::entry(signature)``; ``BEGIN_IDLE``/``END_IDLE``
  are instances of ``Idle`` (:data:`perflow.kinds.IDLE_REGIONS`: the
  breakdown's ``idle``), ``BEGIN_PACK``/``END_PACK`` and the unpack pair of
  ``Pack``/``Unpack``, ``BEGIN_USER_EVENT_PAIR``/``END_USER_EVENT_PAIR`` of
  the user event's name. Time outside them (Projections' overhead) is outside
  every region.
* Messages: a ``CREATION`` (or ``CREATION_BCAST``, ``CREATION_MULTICAST``)
  record and each ``BEGIN_PROCESSING`` naming its PE, event number and entry
  method are a message (``msglen`` bytes; a broadcast is one message per
  receiving PE). The send is a zero-length instance of ``message send``
  inside the creating entry method at the creation time (so a late sender is
  measured from the creation, not from the sender's entry); the receive is in
  the ``Idle`` instance just before the entry method when the PE was idle
  waiting for work (no other entry method began in between), else in the
  entry method at its start. Processing records whose creation was not
  traced are counted in ``attrs["unmatched_processing"]``.
* Other records (user events and notes, memory usage, enqueue/dequeue,
  ``USER_STAT``) are checked for their type and skipped.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._inflate import inflate
from ..errors import FormatError, TraceError
from ..kinds import P2P
from ..pag.pag import PAG
from ..trace.raw import RawTrace
from ..trace.scan import scan_regions
from ._chrome_nest import nest_intervals, pair_begin_end
from ._common import build_trace, head_bytes

FORMAT = "projections"
DESCRIPTION = "Charm++ Projections logs (.sts and one .log/.log.gz per PE): entry methods, idle, messages"

# record types (Charm++ trace-common.h)
CREATION, BEGIN_PROCESSING, END_PROCESSING = 1, 2, 3
BEGIN_COMPUTATION, END_COMPUTATION = 6, 7
BEGIN_IDLE, END_IDLE, BEGIN_PACK, END_PACK, BEGIN_UNPACK, END_UNPACK = 14, 15, 16, 17, 18, 19
CREATION_BCAST, CREATION_MULTICAST = 20, 21
BEGIN_USER_EVENT_PAIR, END_USER_EVENT_PAIR = 98, 99
#: every record type a log may hold (the others are an error)
KNOWN_TYPES = frozenset(range(1, 34)) | {98, 99, 100}
#: fewest fields (after the type) of the records read
_MIN_FIELDS = {CREATION: 7, CREATION_BCAST: 8, CREATION_MULTICAST: 8, BEGIN_PROCESSING: 8, END_PROCESSING: 7,
               BEGIN_COMPUTATION: 1, END_COMPUTATION: 1, BEGIN_USER_EVENT_PAIR: 4, END_USER_EVENT_PAIR: 4}  # fmt: skip
_PAIRS = {  # begin type -> (end type, region name)
    BEGIN_IDLE: (END_IDLE, "Idle"),
    BEGIN_PACK: (END_PACK, "Pack"),
    BEGIN_UNPACK: (END_UNPACK, "Unpack"),
}
SEND_REGION = "message send"
_STS_LINE = re.compile(r'^(CHARE|ENTRY CHARE)\s+(-?\d+)\s+"(.*)"\s+(-?\d+)(?:\s+(-?\d+))?\s*$')


def _sts_of(path: Path) -> Path | None:
    if path.is_file():
        return path if path.suffix == ".sts" else None
    if path.is_dir():
        sts = sorted(path.glob("*.sts"))
        return sts[0] if len(sts) == 1 else None
    return None


def detect(path: Path) -> bool:
    """A ``.sts`` file (or a directory with exactly one) that starts as a Projections definition file."""
    sts = _sts_of(path)
    return sts is not None and head_bytes(sts, 64).startswith((b"PROJECTIONS_ID", b"VERSION"))


def _parse_sts(sts: Path) -> dict[str, Any]:
    try:
        lines = sts.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        raise FormatError(sts, f"cannot read: {exc}") from None
    out: dict[str, Any] = {"chares": {}, "entries": {}, "events": {}, "pes": None, "papi": 0, "version": ""}
    for i, line in enumerate(lines, 1):
        t = line.split(None, 1)
        if not t:
            continue
        key = t[0]
        try:
            if key == "PROCESSORS":
                out["pes"] = int(t[1])
            elif key == "VERSION":
                out["version"] = t[1].strip()
            elif key == "TOTAL_PAPI_EVENTS":
                out["papi"] = int(t[1])
            elif key in ("CHARE", "ENTRY"):
                m = _STS_LINE.match(line)
                if not m:
                    raise ValueError("unexpected layout")
                if key == "CHARE":
                    out["chares"][int(m[2])] = (m[3], int(m[4]))
                else:
                    out["entries"][int(m[2])] = (m[3], int(m[4]))
            elif key == "EVENT":
                k, _, name = t[1].partition(" ")
                out["events"][int(k)] = name.strip()
        except (ValueError, IndexError):
            raise FormatError(sts, f"malformed {key} line: {line.strip()!r}", where=f"line {i}") from None
    if out["pes"] is None or out["pes"] < 1:
        raise FormatError(sts, "no PROCESSORS line: not a Projections .sts file")
    return out


def _log_files(sts: Path, pes: int) -> list[Path]:
    prefix = sts.name[: -len(".sts")]
    files = []
    for pe in range(pes):
        cands = [sts.parent / f"{prefix}.{pe}.log.gz", sts.parent / f"{prefix}.{pe}.log"]
        f = next((c for c in cands if c.is_file()), None)
        if f is None:
            raise FormatError(sts, f"the .sts file names {pes} PEs but the log of PE {pe} ({cands[0].name}) is missing")
        files.append(f)
    return files


def _read_log(f: Path, pe: int, defs: dict[str, Any]) -> dict[str, list[Any]]:
    """The records of one PE's log that perflow reads, as lists."""
    try:
        raw = f.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = inflate(raw, "gzip", f, what="the log")  # bounded: a gzip bomb is a FormatError
        text = raw.decode("utf-8")
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise FormatError(f, f"cannot read the log ({type(exc).__name__}: {exc})") from None
    lines = text.splitlines()
    if not lines or not lines[0].startswith("PROJECTIONS-RECORD"):
        raise FormatError(f, "not a Projections log (no PROJECTIONS-RECORD header)", where="line 1")
    rec: dict[str, list[Any]] = {"begin": [], "end": [], "pairs": [], "create": [], "span": []}
    entries, chares = defs["entries"], defs["chares"]
    for ln, line in enumerate(lines[1:], 2):
        tok = line.split()
        if not tok:
            continue
        try:
            v = [int(x) for x in tok]
        except ValueError:
            raise FormatError(f, f"a non-integer field in {line.strip()!r}", where=f"line {ln}") from None
        big = next((x for x in v if not -(2**62) < x < 2**62), None)
        if big is not None:
            raise FormatError(f, f"line {ln}: field {big} is too large for any time, size or id", where=f"line {ln}")
        typ, fld = v[0], v[1:]
        if typ not in KNOWN_TYPES:
            raise FormatError(f, f"unknown record type {typ}", where=f"line {ln}")
        need = _MIN_FIELDS.get(typ, 2 if typ in _PAIRS or typ in (END_IDLE, END_PACK, END_UNPACK) else 0)
        if len(fld) < need:
            raise FormatError(
                f, f"record type {typ} has {len(fld)} fields, expected at least {need}", where=f"line {ln}"
            )
        if typ == BEGIN_PROCESSING:
            eidx = fld[1]
            if eidx not in entries:
                raise FormatError(f, f"entry method {eidx} is not defined in the .sts file", where=f"line {ln}")
            # mIdx eIdx time event pe msglen recvTime id... cpuTime [papi...]
            rec["begin"].append((fld[2], eidx, fld[3], fld[4], fld[5], ln))
        elif typ == END_PROCESSING:
            rec["end"].append((fld[2], fld[1], ln))
        elif typ in (CREATION, CREATION_BCAST, CREATION_MULTICAST):
            rec["create"].append((fld[2], fld[1], fld[3], fld[5]))  # time, eIdx, event, msglen
        elif typ in _PAIRS or typ in (END_IDLE, END_PACK, END_UNPACK):
            rec["pairs"].append((typ, fld[0]))
        elif typ in (BEGIN_USER_EVENT_PAIR, END_USER_EVENT_PAIR):
            rec["pairs"].append((typ, fld[1], fld[0]))
        elif typ in (BEGIN_COMPUTATION, END_COMPUTATION):
            rec["span"].append(fld[0])
    del chares
    return rec


def read(path: Path | str) -> PAG:
    """Read a Charm++ Projections trace (the ``.sts`` file or its directory) into a trace-backed PAG.

    Returns
    -------
    PAG
        One process per PE; ``attrs`` has ``pes``, ``unmatched_processing``.
    """
    p = Path(path)
    sts = _sts_of(p)
    if sts is None:
        raise FormatError(p, "no Projections .sts file (give the .sts file or a directory holding exactly one)")
    defs = _parse_sts(sts)
    files = _log_files(sts, defs["pes"])
    logs = [_read_log(f, pe, defs) for pe, f in enumerate(files)]
    try:
        raw = _raw(defs, logs, files, sts)
        return build_trace(raw, sts, placement=False, close_open=True)  # receives placed in the idle time before
    except TraceError as exc:
        raise FormatError(sts, f"inconsistent events: {exc}") from None


def _entry_name(defs: dict[str, Any], eidx: int) -> str:
    name, chare = defs["entries"][eidx]
    cname = defs["chares"].get(chare, (None, 0))[0]
    return f"{cname}::{name}" if cname else name


def _raw(defs: dict[str, Any], logs: list[dict[str, list[Any]]], files: list[Path], sts: Path) -> RawTrace:
    npe = len(logs)
    # regions: entry methods (by id), then the fixed ones, then user events
    entry_ids = sorted({b[1] for lg in logs for b in lg["begin"]})
    reg_rows = [{"name": _entry_name(defs, e), "paradigm": "charm"} for e in entry_ids]
    reg_of_entry = {e: i for i, e in enumerate(entry_ids)}
    fixed = {name: len(reg_rows) + i for i, name in enumerate([*[n for _, n in _PAIRS.values()], SEND_REGION])}
    reg_rows += [{"name": n, "paradigm": "charm"} for n in fixed]
    user_ids = sorted(
        {q[2] for lg in logs for q in lg["pairs"] if q[0] in (BEGIN_USER_EVENT_PAIR, END_USER_EVENT_PAIR)}
    )
    reg_of_user = {u: len(reg_rows) + i for i, u in enumerate(user_ids)}
    reg_rows += [{"name": defs["events"].get(u, f"user event {u}"), "paradigm": "user"} for u in user_ids]

    iv: list[pd.DataFrame] = []
    entry_iv: list[pd.DataFrame] = []
    unmatched_end = 0
    for pe, lg in enumerate(logs):
        b = np.asarray([x[:5] for x in lg["begin"]], dtype=np.int64).reshape(-1, 5)
        e = np.asarray(lg["end"], dtype=np.int64).reshape(-1, 3)
        # entry methods: BEGIN/END_PROCESSING pairs in stream (file) order
        order = np.argsort(np.r_[[x[5] for x in lg["begin"]], e[:, 2]], kind="stable")
        t = np.r_[b[:, 0], e[:, 0]][order].astype(np.float64)
        is_b = np.r_[np.ones(len(b), bool), np.zeros(len(e), bool)][order]
        src = np.r_[np.arange(len(b)), np.full(len(e), -1)][order]
        s, en, bi, un = pair_begin_end(np.zeros(len(t), np.int64), t, is_b)
        unmatched_end += un
        k = src[bi]
        entry_iv.append(
            pd.DataFrame(
                {
                    "loc": pe,
                    "start": s,
                    "end": en,
                    "region": [reg_of_entry[x] for x in b[k, 1]],
                    "event": b[k, 2],
                    "src_pe": b[k, 3],
                    "eidx": b[k, 1],
                    "bytes": b[k, 4],
                    "role": "entry",
                }
            )  # fmt: skip
        )
        for beg, (end_t, name) in _PAIRS.items():
            recs = [q for q in lg["pairs"] if q[0] in (beg, end_t)]
            tt = np.asarray([q[1] for q in recs], dtype=np.float64)
            s2, e2, _bi, un = pair_begin_end(np.zeros(len(tt), np.int64), tt, np.asarray([q[0] == beg for q in recs]))
            unmatched_end += un
            iv.append(pd.DataFrame({"loc": pe, "start": s2, "end": e2, "region": fixed[name], "role": name}))
        recs = [q for q in lg["pairs"] if q[0] in (BEGIN_USER_EVENT_PAIR, END_USER_EVENT_PAIR)]
        for u in user_ids:
            ru = [q for q in recs if q[2] == u]
            tt = np.asarray([q[1] for q in ru], dtype=np.float64)
            s3, e3, _bi, un = pair_begin_end(
                np.zeros(len(tt), np.int64), tt, np.asarray([q[0] == BEGIN_USER_EVENT_PAIR for q in ru])
            )
            unmatched_end += un
            iv.append(pd.DataFrame({"loc": pe, "start": s3, "end": e3, "region": reg_of_user[u], "role": "user"}))
    entries = pd.concat(entry_iv, ignore_index=True)
    # messages: a creation (PE, event, entry) and every processing that names it
    cr = pd.DataFrame(
        [(pe, c[0], c[1], c[2], c[3]) for pe, lg in enumerate(logs) for c in lg["create"]],
        columns=["src_pe", "t_create", "eidx", "event", "create_bytes"],
    ).drop_duplicates(["src_pe", "event", "eidx"])
    ent = entries.reset_index().rename(columns={"index": "entry"})
    msg = ent.merge(cr, on=["src_pe", "event", "eidx"], how="inner")
    used = (
        msg[["src_pe", "event", "eidx", "t_create"]].drop_duplicates(["src_pe", "event", "eidx"]).reset_index(drop=True)
    )
    used["send"] = np.arange(len(used))
    msg = msg.merge(used[["src_pe", "event", "eidx", "send"]], on=["src_pe", "event", "eidx"])
    sends = pd.DataFrame({"loc": used["src_pe"], "start": used["t_create"], "end": used["t_create"],
                          "region": fixed[SEND_REGION], "role": "send"})  # fmt: skip
    allv = pd.concat([entries[["loc", "start", "end", "region", "role"]], *iv, sends], ignore_index=True)
    allv["ref"] = np.r_[np.arange(len(entries)), np.full(sum(len(x) for x in iv), -1), np.arange(len(sends))]
    allv = allv.sort_values(["loc", "start", "end"], ascending=[True, True, False], kind="stable").reset_index(
        drop=True
    )
    ev_loc, ev_t, ev_k, ev_r = nest_intervals(
        allv["loc"].to_numpy(np.int64), allv["start"].to_numpy(np.float64), allv["end"].to_numpy(np.float64),
        allv["region"].to_numpy(np.int64),
    )  # fmt: skip
    res = scan_regions(ev_loc, ev_k, ev_r)
    inst = np.arange(len(allv))
    role = allv["role"].to_numpy()
    ref = allv["ref"].to_numpy(np.int64)
    entry_inst = np.empty(len(entries), np.int64)
    entry_inst[ref[role == "entry"]] = inst[role == "entry"]
    send_inst = np.empty(len(sends), np.int64)
    send_inst[ref[role == "send"]] = inst[role == "send"]
    recv_pos = _receive_positions(allv, res, entry_inst[msg["entry"].to_numpy()], role)
    n = len(msg)
    loc = np.r_[msg["src_pe"].to_numpy(np.int64), msg["loc"].to_numpy(np.int64)]
    time = np.r_[msg["t_create"].to_numpy(np.float64), msg["start"].to_numpy(np.float64)]
    pos = np.r_[res.enter[send_inst[msg["send"].to_numpy()]] + 1, recv_pos]
    peer = np.r_[msg["loc"].to_numpy(np.int64), msg["src_pe"].to_numpy(np.int64)]
    kind = np.r_[np.full(n, int(P2P.SEND)), np.full(n, int(P2P.RECV))]
    tag = np.r_[np.arange(n), np.arange(n)]
    nbytes = np.r_[msg["bytes"].to_numpy(np.int64), msg["bytes"].to_numpy(np.int64)]
    o = np.lexsort((time, pos, loc))
    regions = pd.DataFrame(reg_rows)
    regions["role"], regions["file"], regions["line"], regions["module"] = "function", "", 0, ""
    return RawTrace(
        locations=pd.DataFrame({"process": np.arange(npe), "thread": 0, "name": [f"PE {i}" for i in range(npe)]}),
        regions=regions,
        region_events={"location": ev_loc, "time": ev_t * 1e-6, "kind": ev_k, "region": ev_r},
        p2p_events={
            "location": loc[o],
            "time": time[o] * 1e-6,
            "kind": kind[o],
            "peer": peer[o],
            "comm": np.zeros(2 * n),
            "tag": tag[o],
            "bytes": nbytes[o],
            "request": np.full(2 * n, -1),
            "pos": pos[o],
        },  # fmt: skip
        comms={0: np.arange(npe)},
        comm_names={0: "charm"},
        attrs={
            "source": str(sts),
            "creator": f"Charm++ Projections {defs['version']}".strip(),
            "pes": npe,
            "unmatched_processing": int(len(entries) - n),
            "unmatched_end_records": int(unmatched_end),
            "timer_resolution": 1e-6,
        },
    )


def _receive_positions(allv: pd.DataFrame, res: Any, inst: np.ndarray, role: np.ndarray) -> np.ndarray:
    """Where each message's receive goes: the Idle instance just before its entry method, else the entry itself.

    "Just before": the last Idle that ended at or before the entry method began
    on that PE, with no other entry method beginning in between.
    """
    loc = allv["loc"].to_numpy(np.int64)
    start = allv["start"].to_numpy(np.float64)
    end = allv["end"].to_numpy(np.float64)
    out = res.enter[inst] + 1
    idle = np.flatnonzero(role == "Idle")
    ent = np.flatnonzero(role == "entry")
    for pe in np.unique(loc[inst]).tolist():
        sel = np.flatnonzero(loc[inst] == pe)
        il = idle[loc[idle] == pe]
        el = ent[loc[ent] == pe]
        if not len(il):
            continue
        io = il[np.argsort(end[il], kind="stable")]
        t = start[inst[sel]]
        j = np.searchsorted(end[io], t, side="right") - 1
        ok = j >= 0
        cand = io[np.maximum(j, 0)]
        # no other entry method began between the idle's end and this one's start
        es = np.sort(start[el])
        between = np.searchsorted(es, t, side="left") - np.searchsorted(es, end[cand], side="left")
        ok &= between == 0
        out[sel[ok]] = res.leave[cand[ok]]
    return out
