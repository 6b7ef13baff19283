"""Per-location decoded events + definitions -> one :class:`~perflow.trace.raw.RawTrace`.

Shared by both decoders, so that everything after the per-location decoding
(concatenation in location order, global ``pos``, collective BEGIN rows,
reference checks, attributes) is the same code for both.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pandas as pd

from ...errors import FormatError
from ...kinds import CollEv
from ...trace import raw
from ...trace.match import nth_pairs
from ...trace.rawcheck import region_order
from ._contexts import resolve_samples
from ._defs import Defs

__all__ = ["assemble", "concat_parts", "program_region", "TABLES"]

TABLES = {
    "region_events": raw.REGION_COLUMNS,
    "p2p_events": raw.P2P_COLUMNS,
    "coll_events": {**raw.COLL_COLUMNS, "request": raw.OPTIONAL_COLUMNS["coll_events"]["request"][0]},
    "metric_events": raw.METRIC_COLUMNS,
    "thread_events": {**raw.THREAD_COLUMNS, **{c: d for c, (d, _) in raw.OPTIONAL_COLUMNS["thread_events"].items()}},
    "sample_events": raw.SAMPLE_COLUMNS,
    "io_events": raw.IO_COLUMNS,
    "rma_events": raw.RMA_COLUMNS,
}


def _propagate_collectives(coll: dict[str, np.ndarray]) -> None:
    """Give each BEGIN row the op, communicator and root of its END.

    A blocking BEGIN's END follows it on its location; a non-blocking one
    (NonBlockingCollectiveRequest, ``request`` >= 0) has the END with the same
    request id on its location.
    """
    k, loc = coll["kind"], coll["location"]
    if len(k) < 2:
        return
    pair = np.flatnonzero((k[:-1] == CollEv.BEGIN) & (k[1:] == CollEv.END) & (loc[:-1] == loc[1:]))
    for c in ("op", "comm", "root"):
        coll[c][pair] = coll[c][pair + 1]
    req = coll.get("request")
    if req is None or not (req >= 0).any():
        return

    b = np.flatnonzero((k == CollEv.BEGIN) & (req >= 0))
    e = np.flatnonzero((k == CollEv.END) & (req >= 0))
    span = int(req.max()) + 1
    j = nth_pairs(loc[b].astype(np.int64) * span + req[b], loc[e].astype(np.int64) * span + req[e])
    ok = j >= 0
    for c in ("op", "comm", "root"):
        coll[c][b[ok]] = coll[c][e[j[ok]]]


def program_region(program: str | None) -> pd.DataFrame:
    """The artificial region above ``main`` that Score-P 8's ProgramBegin/ProgramEnd records open and close.

    Named after the program's file name (as Score-P and Scalasca name the
    root of their call trees), role ``artificial``, paradigm ``measurement_system``.
    """
    name = os.path.basename(str(program or "").rstrip("/")) or "program"
    return pd.DataFrame(
        [{"name": name, "role": "artificial", "paradigm": "measurement_system", "file": "", "line": 0, "module": ""}]
    )


def _check_order(defs: Defs, region: dict[str, np.ndarray]) -> None:
    """Region event times must not decrease along a location (else the event data is corrupt)."""
    t, loc = region["time"], region["location"]
    i = region_order(loc, t, region["region"]).back
    if i >= 0:
        li = int(loc[i])
        first = int(np.searchsorted(loc, li))
        path = os.path.join(os.path.splitext(defs.source)[0], f"{int(defs.loc_refs[li])}.evt")
        raise FormatError(
            path,
            f"time goes backwards ({t[i - 1]!r} s then {t[i]!r} s): corrupt time stamps",
            where=f"region event {i - first} of location {int(defs.loc_refs[li])}",
        )


def _check_refs(defs: Defs, tables: dict[str, dict[str, np.ndarray]], source: str) -> None:
    known = np.array(sorted(defs.comms), dtype=np.int64)
    for name, col in (("p2p_events", "comm"), ("coll_events", "comm"), ("thread_events", "team")):
        c = tables[name][col]
        if not len(c):
            continue
        bad = (c != -1) & ~np.isin(c, known)
        if bad.any():
            i = int(np.argmax(bad))
            loc = int(tables[name]["location"][i])
            raise FormatError(
                source,
                f"event refers to undefined communicator {int(c[i])}",
                where=f"location {int(defs.loc_refs[loc])}, {name} row {i}",
            )


def concat_parts(parts: list[Any]) -> tuple[dict[str, dict[str, np.ndarray]], dict[str, np.ndarray]]:
    """Concatenate per-location tables column by column, releasing each source column once copied.

    Returns the tables (without ``location``; ``pos`` still per location) and,
    per table, the row count of each location.
    """
    out: dict[str, dict[str, np.ndarray]] = {}
    counts: dict[str, np.ndarray] = {}
    for table, columns in TABLES.items():
        n = np.array([len(p.tables[table]["time"]) for p in parts], dtype=np.int64)
        counts[table] = n
        cols = {}
        for c, dt in columns.items():
            if c == "location":
                continue
            col = np.empty(int(n.sum()), dtype=dt)
            start = 0
            for p in parts:
                src = p.tables[table].pop(c)
                col[start : start + len(src)] = src
                start += len(src)
            cols[c] = col
        out[table] = cols
    return out, counts


def assemble(
    defs: Defs,
    tables: dict[str, dict[str, np.ndarray]],
    counts: dict[str, np.ndarray],
    skipped: dict[str, int],
    decoder: str,
    program: str | None = None,
) -> raw.RawTrace:
    """Build the RawTrace from concatenated per-location tables.

    Parameters
    ----------
    defs : Defs
        The mapped definitions.
    tables : dict
        Per table, columns in location order, without ``location``; ``pos``
        counts region events of the same location only (made global here, in place).
    counts : dict
        Per table, the number of rows of each location.
    skipped : dict
        Skipped record counts by record name (zeros are dropped).
    decoder : str
        ``"fast"`` or ``"bindings"``, recorded in ``attrs["decoder"]``.
    program : str, optional
        The program name of the ProgramBegin records: their instances (region
        id ``len(defs.regions)``, written by the decoders) are instances of an
        artificial region named after it (:func:`program_region`). Given
        with no events (a partitioned read's definitions), the region table
        still has that region, as the whole archive's read does.
    """
    nloc = len(defs.locations)
    reg_offset = np.zeros(nloc + 1, dtype=np.int64)
    np.cumsum(counts["region_events"], out=reg_offset[1:])
    out: dict[str, dict[str, np.ndarray]] = {}
    for table, columns in TABLES.items():
        n = counts[table]
        cols = {"location": np.repeat(np.arange(nloc, dtype=np.int32), n)}
        cols.update(tables[table])
        if "pos" in cols:
            start = 0
            for li in range(nloc):
                if n[li] and reg_offset[li]:
                    cols["pos"][start : start + n[li]] += reg_offset[li]
                start += int(n[li])
        out[table] = {c: cols[c] for c in columns}
    _check_order(defs, out["region_events"])
    _propagate_collectives(out["coll_events"])

    regions = defs.regions.copy()
    reg = out["region_events"]["region"]
    if program is not None or (len(reg) and int(reg.max()) >= len(regions)):  # ProgramBegin/End were decoded
        regions = pd.concat([regions, program_region(program)], ignore_index=True)
    out["sample_events"], stacks, reg_stack = resolve_samples(
        defs.attrs.get("contexts"), out["sample_events"], len(regions)
    )
    if reg_stack is not None:
        regions["stack"] = reg_stack
    _check_refs(defs, out, defs.source)
    attrs = {
        "source": defs.source,
        "format": "otf2",
        "decoder": decoder,
        "creator": defs.creator,
        "otf2_version": defs.version,
        "timer_resolution": defs.timer_resolution,
        "global_offset": defs.global_offset,
        "trace_length": defs.trace_length / defs.timer_resolution,
        "skipped_events": {k: int(v) for k, v in sorted(skipped.items()) if v},
    }
    for key in ("io_handles", "rma_windows", "rma_groups"):
        if defs.attrs.get(key):
            attrs[key] = dict(defs.attrs[key])
    return raw.RawTrace(
        locations=defs.locations.copy(),
        regions=regions,
        stacks=stacks,
        comms={k: v.copy() for k, v in defs.comms.items()},
        comm_names=dict(defs.comm_names),
        metrics=defs.metrics.copy(),
        attrs=attrs,
        **out,
    )
