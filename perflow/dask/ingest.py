"""Distributed OTF2 ingest: each worker decodes its own locations with the fast decoder.

1. The client reads the (small) global definitions once and sends them to
   every worker.
2. **Traffic pass** (:func:`scout_otf2`): each worker decodes a prefix of
   ``scout_events`` events of a contiguous block of locations and reports the
   point-to-point traffic between world ranks it saw (messages and bytes per
   ordered pair). Iterative codes repeat their communication pattern, so a
   prefix is enough to find it; event weights come from the event counts the
   definitions declare (or the event-file sizes when they do not).
3. The ranks are partitioned (:mod:`perflow.dask.partition`), and each
   partition's worker decodes all events of its locations
   (:func:`ingest_otf2`) into a partition raw trace that stays there.

The archive must be readable at the same path from every worker (a shared
file system). Within one worker process decoding is serialised by a lock
(when fork is unavailable and the C library runs in the worker itself). The
C library only ever parses the archive in forked children, as in
:func:`perflow.readers.otf2.decode`: a crash or hang on a corrupt file
becomes one :class:`~perflow.errors.FormatError`.
"""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import os
import threading
import time
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..errors import FormatError, PerflowError
from ..trace.raw import RawTrace
from .partition import Partitioning
from .split import location_parts, send_traffic
from .tasks import remote

if TYPE_CHECKING:  # pragma: no cover
    from .engine import Engine

__all__ = ["read_defs", "decode_subset", "scout_otf2", "ingest_otf2", "OTF2Source"]

_LOCK = threading.Lock()


def read_defs(path: str) -> Any:
    """The resolved anchor and the mapped global definitions of an OTF2 archive (read in a forked child)."""
    from ..readers.otf2._decode import _definitions_job, _run_isolated, fast_available
    from ..readers.otf2._paths import resolve_anchor

    anchor = resolve_anchor(path)
    if not fast_available():
        raise PerflowError(
            f"{anchor}: the Dask engine decodes OTF2 with the fast decoder, which needs numba, llvmlite and the "
            "otf2 C library"
        )
    return anchor, _run_isolated(_definitions_job, anchor, isolate="fork" in mp.get_all_start_methods())


def _defs_raw(defs: Any) -> RawTrace:
    """A definitions-only raw trace with the attributes :func:`perflow.readers.otf2.decode` records."""
    return RawTrace(
        locations=defs.locations.copy(),
        regions=defs.regions.copy(),
        region_events={"location": [], "time": [], "kind": [], "region": []},
        comms={k: v.copy() for k, v in defs.comms.items()},
        comm_names=dict(defs.comm_names),
        metrics=defs.metrics.copy(),
        attrs={
            "source": defs.source,
            "format": "otf2",
            "decoder": "fast",
            "creator": defs.creator,
            "otf2_version": defs.version,
            "timer_resolution": defs.timer_resolution,
            "global_offset": defs.global_offset,
            "trace_length": defs.trace_length / defs.timer_resolution,
        },
    )


def _decode_events(anchor: str, sub: Any, max_events: int | None) -> tuple[Any, list[Any]]:
    """Decode ``sub``'s locations into a fresh arena, in a forked child (a crash or hang -> FormatError)."""
    from ..readers.otf2._arena import Arena
    from ..readers.otf2._callbacks import callback_addresses
    from ..readers.otf2._decode import _deadline, _segment_rows
    from ..readers.otf2._fast import decode_locations, event_file
    from ..readers.otf2._forked import CrashError, HangError, run_forked

    rows, _ = _segment_rows(anchor, sub)
    if max_events is not None:
        rows = np.minimum(rows, max_events + 1)
    maps = {
        "rmap": sub.region_map,
        "moff": sub.metric_offsets,
        "mmem": sub.metric_members,
        "max_members": sub.max_members,
        "offset": sub.global_offset,
        "resolution": sub.timer_resolution,
    }
    refs = [int(r) for r in sub.loc_refs]
    arena = Arena(rows, sub.max_members)
    args = (anchor, arena, list(range(len(refs))), refs, maps, max_events)
    if "fork" not in mp.get_all_start_methods():
        with _LOCK:  # no isolation possible: one decode at a time in this process
            return arena, decode_locations(*args)
    callback_addresses()  # compile/load here once; the child inherits the code
    try:
        return arena, run_forked([(decode_locations, args)], _deadline(anchor))[0]
    except CrashError as e:
        files = ", ".join(os.path.basename(event_file(anchor, r)) for r in refs[:5]) + (
            ", ..." if len(refs) > 5 else ""
        )
        what = "did not finish in time" if isinstance(e, HangError) else f"crashed the OTF2 library ({e.detail})"
        raise FormatError(anchor, f"decoding event files ({files}) {what}: corrupt trace data") from None


def decode_subset(anchor: str, defs: Any, locs: list[int], max_events: int | None = None) -> RawTrace:
    """Decode the events of some locations (global location ids kept) with the fast decoder.

    Parameters
    ----------
    anchor : str
        The anchor file.
    defs : Defs
        The archive's mapped definitions.
    locs : list of int
        Location ids (rows of ``defs.locations``).
    max_events : int, optional
        Decode only the first events of each location.
    """
    from ..readers.otf2._assemble import TABLES, assemble
    from ..readers.otf2._layout import SKIPPED_EVENTS

    glocs = np.asarray(sorted(locs), dtype=np.int64)
    sub = dataclasses.replace(
        defs,
        locations=defs.locations.iloc[glocs].reset_index(drop=True),
        loc_refs=defs.loc_refs[glocs],
        loc_events=defs.loc_events[glocs],
    )
    arena, results = _decode_events(anchor, sub, max_events)
    counts = {t: np.array([r.counts[t] for r in results], dtype=np.int64) for t in TABLES}
    spills = {(t, i): s for i, r in enumerate(results) for t, s in r.spills.items()}
    skipped = np.zeros(len(SKIPPED_EVENTS), dtype=np.int64)
    for r in results:
        skipped += r.skipped
    tables = arena.finalize(counts, spills)
    del arena, spills, results
    part = assemble(sub, tables, counts, dict(zip(SKIPPED_EVENTS, skipped.tolist())), "fast")
    ev = {}
    for t in TABLES:
        tab = dict(getattr(part, t))
        tab["location"] = glocs[tab["location"]].astype(np.int32) if len(tab["location"]) else tab["location"]
        ev[t] = tab
    full = _defs_raw(defs)
    full.attrs["skipped_events"] = part.attrs.get("skipped_events", {})
    return dataclasses.replace(full, **ev)


@remote
def _scout(anchor: str, defs: Any, locs: list[int], max_events: int) -> pd.DataFrame:
    """Traffic between world ranks seen in a prefix of each of some locations."""
    if max_events <= 0 or not locs:
        return pd.DataFrame({"src": [], "dst": [], "count": [], "bytes": []})
    raw = decode_subset(anchor, defs, locs, max_events)
    return send_traffic(raw.p2p_events, raw.locations["process"].to_numpy(dtype=np.int64), raw)


@remote
def _ingest(anchor: str, defs: Any, locs: list[int]) -> RawTrace:
    return decode_subset(anchor, defs, locs)


def _weights(anchor: str, defs: Any) -> np.ndarray:
    """Events per location: declared in the definitions, else estimated from the event-file sizes."""
    from ..readers.otf2._fast import event_file

    declared = np.asarray(defs.loc_events, dtype=np.float64)
    if len(declared) and (declared > 0).all():
        return declared
    sizes = np.array([os.path.getsize(f) if os.path.isfile(f := event_file(anchor, int(r))) else 0
                      for r in defs.loc_refs], dtype=np.float64)  # fmt: skip
    return np.where(declared > 0, declared, sizes / 12.0)  # ~12 bytes per event record


@dataclasses.dataclass
class OTF2Source:
    """An OTF2 archive being loaded: definitions (here and on every worker), weights and traffic."""

    anchor: str
    defs: Any
    defs_future: Any
    raw: RawTrace
    processes: np.ndarray
    weights: np.ndarray
    traffic: pd.DataFrame
    timings: dict[str, float]


def _gather(client: Any, futs: list[Any], anchor: str = "") -> list[Any]:
    from distributed import KilledWorker

    try:
        return client.gather(futs)
    except KilledWorker:
        raise FormatError(
            anchor, "the OTF2 library crashed worker processes while decoding event files: corrupt trace data"
        ) from None
    except Exception as e:  # a RemoteFormatError carries a FormatError's parts
        if hasattr(e, "restore"):
            raise e.restore() from None
        raise


def scout_otf2(engine: Engine, path: str, scout_events: int) -> OTF2Source:
    """Read the definitions, send them to the workers and run the traffic pass over a prefix of every location."""
    t0 = time.perf_counter()
    anchor, defs = read_defs(path)
    client = engine.client
    workers = engine.workers
    dfut = client.scatter(defs, broadcast=True, hash=False)
    nloc = len(defs.locations)
    blocks = np.array_split(np.arange(nloc), max(1, min(len(workers), nloc)))
    futs = [
        client.submit(
            _scout, anchor, dfut, b.tolist(), int(scout_events), workers=[workers[i % len(workers)]], pure=False
        )
        for i, b in enumerate(blocks)
    ]
    tr = [p for p in _gather(client, futs, anchor) if len(p)]
    traffic = (
        pd.concat(tr, ignore_index=True).groupby(["src", "dst"], sort=True)[["count", "bytes"]].sum().reset_index()
        if tr
        else pd.DataFrame({"src": np.zeros(0, np.int64), "dst": np.zeros(0, np.int64), "count": [], "bytes": []})
    )
    lp = defs.locations["process"].to_numpy(dtype=np.int64)
    procs = np.unique(lp)
    w = np.bincount(np.searchsorted(procs, lp), weights=_weights(anchor, defs), minlength=len(procs))
    timings = {"scout": time.perf_counter() - t0}
    return OTF2Source(anchor, defs, dfut, _defs_raw(defs), procs, w, traffic, timings)


def ingest_otf2(engine: Engine, src: OTF2Source, p: Partitioning) -> list[Any]:
    """Decode every partition's locations on its worker; return the futures of the partition raw traces."""
    from distributed import wait

    t0 = time.perf_counter()
    loc_part = location_parts(src.raw, p.assign, p.processes)
    futs = []
    for i in range(p.n_parts):
        locs = np.flatnonzero(loc_part == i).tolist()
        futs.append(
            engine.client.submit(
                _ingest,
                src.anchor,
                src.defs_future,
                locs,
                workers=[engine.worker_of(i, p.n_parts)],
                allow_other_workers=True,
                pure=False,
            )  # fmt: skip
        )
    wait(futs)
    bad = [f for f in futs if f.status == "error"]
    if bad:
        _gather(engine.client, bad[:1], src.anchor)
    src.timings["ingest"] = time.perf_counter() - t0
    return futs
