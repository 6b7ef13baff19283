"""Per-location decoded events + definitions -> one :class:`~perflow.trace.raw.RawTrace`.

Shared by both decoders, so that everything after the per-location decoding
(concatenation in location order, global ``pos``, collective BEGIN rows,
reference checks, attributes) is the same code for both.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from ...errors import FormatError
from ...kinds import CollEv
from ...trace import raw
from ._defs import Defs

__all__ = ["assemble", "TABLES"]

TABLES = {
    "region_events": raw.REGION_COLUMNS,
    "p2p_events": raw.P2P_COLUMNS,
    "coll_events": raw.COLL_COLUMNS,
    "metric_events": raw.METRIC_COLUMNS,
    "thread_events": raw.THREAD_COLUMNS,
}


def _propagate_collectives(coll: dict[str, np.ndarray]) -> None:
    """Give each BEGIN row the op, communicator and root of the END that follows it on its location."""
    k, loc = coll["kind"], coll["location"]
    if len(k) < 2:
        return
    pair = np.flatnonzero((k[:-1] == CollEv.BEGIN) & (k[1:] == CollEv.END) & (loc[:-1] == loc[1:]))
    for c in ("op", "comm", "root"):
        coll[c][pair] = coll[c][pair + 1]


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


def assemble(defs: Defs, per_location: Iterable[Any], skipped: dict[str, int], decoder: str) -> raw.RawTrace:
    """Concatenate per-location tables (in location order) into a RawTrace.

    Parameters
    ----------
    defs : Defs
        The mapped definitions.
    per_location : iterable
        One object per location, in location order, with a ``tables`` attribute
        (``{table: {column: array}}``, columns without ``location``, ``pos``
        local to the location). Consumed (and released) table by table.
    skipped : dict
        Skipped record counts by record name (zeros are dropped).
    decoder : str
        ``"fast"`` or ``"bindings"``, recorded in ``attrs["decoder"]``.
    """
    parts = list(per_location)
    nloc = len(defs.locations)
    if len(parts) != nloc:
        raise FormatError(defs.source, f"decoded {len(parts)} locations, the definitions declare {nloc}")
    reg_counts = np.array([len(p.tables["region_events"]["time"]) for p in parts], dtype=np.int64)
    reg_offset = np.zeros(nloc + 1, dtype=np.int64)
    np.cumsum(reg_counts, out=reg_offset[1:])
    out: dict[str, dict[str, np.ndarray]] = {}
    for table, columns in TABLES.items():
        counts = np.array([len(p.tables[table]["time"]) for p in parts], dtype=np.int64)
        total = int(counts.sum())
        cols = {c: np.empty(total, dtype=dt) for c, dt in columns.items()}
        start = 0
        for li, p in enumerate(parts):
            n = int(counts[li])
            src = p.tables.pop(table)
            if n:
                sl = slice(start, start + n)
                cols["location"][sl] = li
                for c in columns:
                    if c == "location":
                        continue
                    cols[c][sl] = src[c]
                if "pos" in cols:
                    cols["pos"][sl] += reg_offset[li]
            start += n
        out[table] = cols
    _propagate_collectives(out["coll_events"])
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
    return raw.RawTrace(
        locations=defs.locations.copy(),
        regions=defs.regions.copy(),
        comms={k: v.copy() for k, v in defs.comms.items()},
        comm_names=dict(defs.comm_names),
        metrics=defs.metrics.copy(),
        attrs=attrs,
        **out,
    )


def iter_chunks(parts: list[Any]) -> Iterator[Any]:
    """Yield and drop list items one by one (lets the caller free memory as it goes)."""
    while parts:
        yield parts.pop(0)
