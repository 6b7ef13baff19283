"""Distributed OTF2 ingest: each worker decodes its own locations with the fast decoder.

1. The client reads the (small) global definitions once and sends them to
   every worker.
2. **Traffic pass** (:func:`scout_otf2`): each worker decodes a prefix of
   ``scout_events`` events of a contiguous block of locations and reports the
   point-to-point traffic between world ranks it saw (messages and bytes per
   ordered pair). Iterative codes repeat their communication pattern, so a
   prefix is enough to find it; event weights come from the event counts the
   definitions declare (or the event-file sizes when they do not).
3. The ranks are partitioned (:mod:`perflow.trace.partition`), and each
   partition's worker decodes all events of its locations
   (:func:`ingest_otf2`) into a partition raw trace that stays there; all of
   them, and the client, get the region table of the whole archive's read
   (Score-P 8's artificial program region is known from the events only).

Decoding is the OTF2 reader's own (:func:`perflow.readers.otf2._decode.decode_locations_of`):
the C library only ever parses the archive in a forked child, so a crash or
hang on a corrupt file becomes one :class:`~perflow.errors.FormatError`. The
archive must be readable at the same path from every worker (a shared file
system).
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .._arrays import unique
from ..errors import FormatError, PerflowError
from ..readers.otf2._decode import decode_locations_of, definitions_raw, fast_available, program_opened, read_defs
from ..readers.otf2._fast import event_file
from ..trace.partition import Partitioning
from ..trace.raw import RawTrace
from ..trace.split import location_parts, send_traffic

if TYPE_CHECKING:  # pragma: no cover
    from .engine import Engine

__all__ = ["scout_otf2", "ingest_otf2", "OTF2Source"]


def _scout(anchor: str, defs: Any, locs: list[int], max_events: int) -> pd.DataFrame:
    """Traffic between world ranks seen in a prefix of each of some locations."""
    if max_events <= 0 or not locs:
        return pd.DataFrame({"src": [], "dst": [], "count": [], "bytes": []})
    raw = decode_locations_of(anchor, defs, locs, max_events=max_events, jobs=1)
    return send_traffic(raw.p2p_events, raw.locations["process"].to_numpy(dtype=np.int64), raw)


def _ingest(anchor: str, defs: Any, locs: list[int]) -> RawTrace:
    """The raw trace of a partition's locations (the C library runs in a forked child: a crash is a FormatError)."""
    return decode_locations_of(anchor, defs, locs, jobs=1)


def _with_regions(raw: RawTrace, regions: pd.DataFrame) -> RawTrace:
    """A partition raw trace with the whole archive's region table."""
    return dataclasses.replace(raw, regions=regions)


def _weights(anchor: str, defs: Any) -> np.ndarray:
    """Events per location: declared in the definitions, else estimated from the event-file sizes."""

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


def scout_otf2(engine: Engine, path: str, scout_events: int) -> OTF2Source:
    """Read the definitions, send them to the workers and run the traffic pass over a prefix of every location."""
    t0 = time.perf_counter()
    anchor, defs = read_defs(path)
    if not fast_available():
        raise PerflowError(
            f"{anchor}: the Dask engine decodes OTF2 with the fast decoder, which needs numba, llvmlite and the "
            "otf2 C library"
        )
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
    procs = unique(lp)
    w = np.bincount(np.searchsorted(procs, lp), weights=_weights(anchor, defs), minlength=len(procs))
    timings = {"scout": time.perf_counter() - t0}
    return OTF2Source(anchor, defs, dfut, definitions_raw(anchor, defs), procs, w, traffic, timings)


def ingest_otf2(engine: Engine, src: OTF2Source, p: Partitioning) -> list[Any]:
    """Decode every partition's locations on its worker; return the futures of the partition raw traces."""
    from distributed import wait

    t0 = time.perf_counter()
    loc_part = location_parts(src.raw, p.assign, p.processes)
    workers = engine.workers  # asked of the scheduler once, not per partition
    futs = []
    for i in range(p.n_parts):
        locs = np.flatnonzero(loc_part == i).tolist()
        futs.append(
            engine.client.submit(
                _ingest,
                src.anchor,
                src.defs_future,
                locs,
                workers=[engine.worker_of(i, p.n_parts, workers)],
                allow_other_workers=True,
                pure=False,
            )  # fmt: skip
        )
    wait(futs)
    bad = [f for f in futs if f.status == "error"]
    if bad:
        _gather(engine.client, bad[:1], src.anchor)
    futs = _same_regions(engine, src, futs)
    src.timings["ingest"] = time.perf_counter() - t0
    return futs


def _same_regions(engine: Engine, src: OTF2Source, futs: list[Any]) -> list[Any]:
    """Give the client and every partition the region table the whole archive's read has.

    Score-P 8's ProgramBegin/End open an artificial program region that the
    decoders add after the defined regions, named after the first location's
    ProgramBegin; a partition knows only whether its own locations open it.
    """
    n_defined = len(src.defs.regions)
    client = engine.client
    opened = [o for o in client.gather([client.submit(program_opened, f, n_defined, pure=False) for f in futs]) if o]
    if not opened:
        return futs
    src.raw = definitions_raw(src.anchor, src.defs, program=min(opened)[1])
    regions = client.scatter(src.raw.regions, broadcast=True, hash=False)
    workers = engine.workers
    return [
        client.submit(_with_regions, f, regions, workers=[engine.worker_of(i, len(futs), workers)],
                      allow_other_workers=True,
                      pure=False)
        for i, f in enumerate(futs)
    ]  # fmt: skip
