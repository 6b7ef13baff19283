"""``decode()``: an OTF2 archive -> :class:`~perflow.trace.raw.RawTrace`, with either decoder."""

from __future__ import annotations

import contextlib
import io
import logging
import multiprocessing as mp
import os
import warnings
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import numpy as np

from ...errors import FormatError
from ...trace.raw import RawTrace
from . import _capi
from ._arena import Arena
from ._assemble import TABLES, assemble
from ._defs import Defs, read_definitions
from ._layout import SKIPPED_EVENTS
from ._paths import resolve_anchor

__all__ = ["decode", "fast_available"]

log = logging.getLogger("perflow.readers.otf2")

ENGINES = ("auto", "fast", "bindings")


def fast_available() -> bool:
    """Whether the fast decoder can run here (OTF2 C library, numba and llvmlite present)."""
    if not _capi.available():
        return False
    try:
        import llvmlite.binding  # noqa: F401
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


@contextlib.contextmanager
def _otf2_errors(path: str, what: str) -> Iterator[None]:
    """Turn whatever the otf2 bindings raise (or print) into one FormatError."""
    _capi.lib()  # our error handler replaces OTF2's printing one
    _capi.clear_errors()
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            yield
    except FormatError:
        raise
    except Exception as e:  # noqa: BLE001 - the bindings raise bare Exceptions, KeyErrors, ...
        msgs = _capi.error_messages()
        lines = [ln.strip() for ln in captured.getvalue().splitlines() if ln.strip()]
        detail = "; ".join(msgs[-3:]) or (lines[-1] if lines else f"{type(e).__name__}: {e}")
        raise FormatError(path, f"{what}: {detail}") from None


def _open_reader(anchor: str) -> Any:
    import otf2

    with _otf2_errors(anchor, "cannot read the OTF2 definitions"):
        return otf2.reader.Reader(anchor)


def decode(path: str | os.PathLike[str], *, engine: str = "auto", jobs: int | None = None) -> RawTrace:
    """Decode an OTF2 trace into a :class:`~perflow.trace.raw.RawTrace`.

    Parameters
    ----------
    path : str or os.PathLike
        The anchor file (``traces.otf2``) or the directory that holds it.
    engine : {"auto", "fast", "bindings"}
        ``"fast"``: the OTF2 C library driven with compiled callbacks, one
        worker process per job. ``"bindings"``: the ``otf2`` Python package's
        reader (slow; the reference). ``"auto"``: fast when available, else
        bindings with a logged warning.
    jobs : int, optional
        Worker processes for the fast decoder; default: the number of CPU
        cores (at most one per location). ``0`` decodes in this process
        (no isolation from a crash of the C library).

    Returns
    -------
    RawTrace
        Events in per-location stream order, times in seconds since the
        trace's global offset; ``attrs`` holds ``source``, ``creator``,
        ``timer_resolution``, ``global_offset``, ``trace_length`` (seconds),
        ``skipped_events`` (record name -> count) and ``decoder``.

    Raises
    ------
    FormatError
        When the path is missing, not an OTF2 archive, or any of its files is
        truncated or corrupt; the message names the file.
    """
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, not {engine!r}")
    if jobs is not None and (not isinstance(jobs, int) or jobs < 0):
        raise ValueError(f"jobs must be a non-negative integer or None, not {jobs!r}")
    anchor = resolve_anchor(path)
    if engine == "auto":
        engine = "fast" if fast_available() else "bindings"
        if engine == "bindings":
            log.warning("fast OTF2 decoder unavailable (needs numba, llvmlite and the otf2 C library); using bindings")
    reader = _open_reader(anchor)
    try:
        defs = read_definitions(reader, anchor)
        if engine == "bindings":
            from ._bindings import decode_events

            with _otf2_errors(anchor, "cannot decode the events"):
                return decode_events(reader, defs)
    finally:
        with contextlib.suppress(Exception):
            reader.close()
    return _decode_fast(anchor, defs, jobs)


#: the arena of the decode in progress; forked workers inherit it (mappings cannot be pickled)
_ARENA: Arena | None = None


def _worker(anchor: str, locs: list[int], refs: list[int], maps: dict[str, Any]) -> tuple[Any, ...]:
    from ._fast import decode_locations

    try:
        return ("ok", decode_locations(anchor, _ARENA, locs, refs, maps))
    except FormatError as e:  # exceptions with custom __init__ do not pickle; send the parts
        return ("error", e.path, e.reason, e.where)


def _plan(sizes: list[int], n_tasks: int) -> list[list[int]]:
    """Split location indices into n_tasks bins of similar total size (longest first)."""
    bins: list[list[int]] = [[] for _ in range(n_tasks)]
    load = [0] * n_tasks
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        k = load.index(min(load))
        bins[k].append(i)
        load[k] += sizes[i] + 1
    return [sorted(b) for b in bins if b]


def _segment_rows(anchor: str, defs: Defs) -> tuple[np.ndarray, list[int]]:
    """Rows to reserve per location (declared events + 1, bounded by the file size) and event file sizes."""
    from ._fast import event_file

    sizes = [os.path.getsize(f) if os.path.isfile(f := event_file(anchor, int(r))) else 0 for r in defs.loc_refs]
    declared = defs.loc_events.astype(np.int64)
    bound = np.array(sizes, dtype=np.int64) // 2 + 1  # an event record takes at least two bytes
    rows = np.where((declared > 0) & (declared < bound), declared, bound) + 1
    return rows, sizes


def _run_workers(anchor: str, plan: list[list[int]], refs: list[int], maps: dict, jobs: int) -> list[Any]:
    results: list[Any] = [None] * len(refs)
    if jobs == 0:
        from ._fast import decode_locations

        for idx in plan:
            for i, r in zip(idx, decode_locations(anchor, _ARENA, idx, [refs[i] for i in idx], maps)):
                results[i] = r
        return results
    from ._callbacks import callback_addresses
    from ._fast import event_file

    callback_addresses()  # compile/load once here; forked workers inherit the code
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
        with ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("fork")) as ex:
            futures = [(idx, ex.submit(_worker, anchor, idx, [refs[i] for i in idx], maps)) for idx in plan]
            for idx, fut in futures:
                try:
                    out = fut.result()
                except BrokenProcessPool:
                    files = ", ".join(os.path.basename(event_file(anchor, refs[i])) for i in idx[:5])
                    raise FormatError(
                        anchor,
                        f"the OTF2 library crashed while decoding event files ({files}"
                        f"{', ...' if len(idx) > 5 else ''}): corrupt trace data",
                    ) from None
                if out[0] == "error":
                    raise FormatError(out[1], out[2], where=out[3])
                for i, r in zip(idx, out[1]):
                    results[i] = r
    return results


def _decode_fast(anchor: str, defs: Defs, jobs: int | None) -> RawTrace:
    global _ARENA
    refs = [int(r) for r in defs.loc_refs]
    maps = {
        "rmap": defs.region_map,
        "moff": defs.metric_offsets,
        "mmem": defs.metric_members,
        "max_members": defs.max_members,
        "offset": defs.global_offset,
        "resolution": defs.timer_resolution,
    }
    n = len(refs)
    if jobs is None:
        jobs = os.cpu_count() or 1
    if "fork" not in mp.get_all_start_methods():
        jobs = 0  # the shared arena needs fork; decode in this process
    jobs = min(jobs, n)
    rows, sizes = _segment_rows(anchor, defs)
    plan = _plan(sizes, min(n, 4 * jobs) if jobs and n > jobs else max(jobs, 1))
    arena = Arena(rows, defs.max_members)
    _ARENA = arena
    try:
        results = _run_workers(anchor, plan, refs, maps, jobs)
    finally:
        _ARENA = None
    counts = {t: np.array([r.counts[t] for r in results], dtype=np.int64) for t in TABLES}
    spills = {(t, i): s for i, r in enumerate(results) for t, s in r.spills.items()}
    skipped = np.zeros(len(SKIPPED_EVENTS), dtype=np.int64)
    for r in results:
        skipped += r.skipped
    del results
    tables = arena.finalize(counts, spills)
    del arena, spills
    return assemble(defs, tables, counts, dict(zip(SKIPPED_EVENTS, skipped.tolist())), "fast")
