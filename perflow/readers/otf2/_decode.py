"""``decode()``: an OTF2 archive -> :class:`~perflow.trace.raw.RawTrace`, with either decoder."""

from __future__ import annotations

import contextlib
import ctypes
import io
import logging
import multiprocessing as mp
import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..._jit import mode
from ...codecs.otf2 import capi as _capi
from ...errors import FormatError
from ...trace.raw import OPTIONAL_COLUMNS, TABLE_SCHEMAS, RawTrace
from ._arena import Arena
from ._assemble import TABLES, assemble
from ._bindings import decode_events
from ._callbacks import callback_addresses, callbacks_ready
from ._defs import Defs, patch_bindings, read_definitions
from ._fast import LocationResult, check_local_defs, event_file, has_local_defs
from ._forked import CrashError, HangError, run_forked
from ._layout import SKIPPED_EVENTS
from ._paths import resolve_anchor
from ._workers import deadline, plan_locations, run_workers

__all__ = ["decode", "fast_available", "read_defs", "decode_locations_of", "definitions_raw", "program_opened"]

log = logging.getLogger("perflow.readers.otf2")

DECODERS = ("auto", "fast", "bindings")
#: archives with at most this many bytes of event files are decoded by a single child process
SMALL_TRACE_BYTES = 4 << 20
#: engine "auto": archives with at most this many bytes of event files (some 35,000 events) are decoded by the
#: bindings, which is faster than starting numba and loading (or compiling) the fast decoder's callbacks
BINDINGS_TRACE_BYTES = 256 << 10


def fast_available() -> bool:
    """Whether the fast decoder can run here (OTF2 C library, numba and llvmlite present)."""
    if not _capi.available():
        return False
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("llvmlite", "numba"))


def _fast_pays_off(anchor: str) -> bool:
    """Engine "auto": the fast decoder, unless the trace is small and its callbacks are not compiled yet."""
    m = mode()
    if m != "auto":
        return m == "compile"
    return callbacks_ready() or _event_bytes(anchor) > BINDINGS_TRACE_BYTES


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
        lines = [ln.strip() for ln in captured.getvalue().splitlines() if ln.strip()]
        if _capi.error_messages():
            detail = _capi.error_summary()
        else:
            detail = lines[-1] if lines else f"{type(e).__name__}: {e}"
        raise FormatError(path, f"{what}: {detail}") from e


def _check_event_files(anchor: str, defs: Defs) -> list[bool]:
    """Which locations have an event file; a missing one is an error unless the location declares no events."""
    present = []
    for ref, n in zip(defs.loc_refs, defs.loc_events):
        ok = os.path.isfile(f := event_file(anchor, int(ref)))
        if not ok and n > 0:
            raise FormatError(f, f"event file of location {int(ref)} is missing ({int(n)} events declared)")
        present.append(ok)
    return present


def _open_reader(anchor: str) -> Any:
    """Open the archive with the otf2 bindings (reads the global definitions)."""
    import otf2

    lib = _capi.lib()
    _capi.clear_errors()
    handle = lib.OTF2_Reader_Open(anchor.encode())  # the anchor alone, to blame the right file
    if not handle:
        raise FormatError(anchor, f"cannot read the OTF2 anchor file: {_capi.error_summary()}")
    gdef = os.path.splitext(anchor)[0] + ".def"
    try:
        declared, n_locations = _count_global_definitions(lib, handle, gdef)
    finally:
        lib.OTF2_Reader_Close(handle)
    with _otf2_errors(gdef, "cannot read the OTF2 definitions"):
        patch_bindings()
        reader = otf2.reader.Reader(anchor)
    n_defs = len(reader.definitions.locations)
    if n_defs != n_locations:
        with contextlib.suppress(Exception):
            reader.close()
        raise FormatError(gdef, f"defines {n_defs} locations, the anchor file declares {n_locations}")
    return reader


def _count_global_definitions(lib: Any, handle: int, gdef: str) -> tuple[int, int]:
    """Read the global definitions once with the C library, counting records: a file that holds fewer
    than the anchor file declares is truncated or corrupt (the library stops at a damaged record
    without an error). Returns the anchor's declared numbers of definitions and locations."""
    declared, n_locations, got = ctypes.c_uint64(), ctypes.c_uint64(), ctypes.c_uint64()
    if lib.OTF2_Reader_GetNumberOfGlobalDefinitions(handle, ctypes.byref(declared)) != _capi.OTF2_SUCCESS:
        raise FormatError(gdef, f"cannot read the OTF2 anchor file: {_capi.error_summary()}")
    lib.OTF2_Reader_GetNumberOfLocations(handle, ctypes.byref(n_locations))
    gdr = lib.OTF2_Reader_GetGlobalDefReader(handle)
    if not gdr:
        what = "missing" if not os.path.isfile(gdef) else "not readable"
        raise FormatError(gdef, f"the global definitions are {what}: {_capi.error_summary()}")
    try:
        rc = lib.OTF2_Reader_ReadAllGlobalDefinitions(handle, gdr, ctypes.byref(got))
    finally:
        lib.OTF2_Reader_CloseGlobalDefReader(handle, gdr)
    if rc != _capi.OTF2_SUCCESS:
        raise FormatError(gdef, f"cannot read the OTF2 definitions: {_capi.error_summary(rc)}")
    if got.value != declared.value:
        raise FormatError(
            gdef,
            f"holds {got.value} global definitions, the anchor file declares {declared.value}: "
            "the definitions file is truncated or corrupt",
        )
    _capi.clear_errors()
    return declared.value, n_locations.value


def decode(path: str | os.PathLike[str], *, decoder: str = "auto", jobs: int | None = None) -> RawTrace:
    """Decode an OTF2 trace into a :class:`~perflow.trace.raw.RawTrace`.

    Parameters
    ----------
    path : str or os.PathLike
        The anchor file (``traces.otf2``) or the directory that holds it.
    decoder : {"auto", "fast", "bindings"}
        ``"fast"``: the OTF2 C library driven with compiled callbacks, one
        worker process per job. ``"bindings"``: the ``otf2`` Python package's
        reader (slow; the reference). ``"auto"``: fast when available (else
        bindings with a logged warning), except for small traces (at most
        :data:`BINDINGS_TRACE_BYTES` of event files) while the fast decoder
        is not loaded in this process: the bindings read those sooner than
        numba starts (``PERFLOW_JIT=compile`` always takes the fast decoder,
        ``PERFLOW_JIT=python`` the bindings; see :mod:`perflow._jit`).
    jobs : int, optional
        Worker processes for the fast decoder; default: the number of CPU
        cores (at most one per location). The OTF2 C library only ever reads
        the archive in child processes, so that a crash or a hang on a
        corrupted file becomes a :class:`FormatError` (the bindings decoder
        uses one child). ``0`` does everything in this process instead (no
        isolation; for debugging and profiling).

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

    Notes
    -----
    The fast decoder's columns are views of anonymous shared memory mappings
    that its worker processes wrote; a process forked from the caller later
    shares them (in-place writes in such a child show in the parent).
    """
    if decoder not in DECODERS:
        raise ValueError(f"decoder must be one of {DECODERS}, not {decoder!r}")
    if jobs is not None and (not isinstance(jobs, int) or jobs < 0):
        raise ValueError(f"jobs must be a non-negative integer or None, not {jobs!r}")
    anchor = resolve_anchor(path)
    if decoder == "auto":
        decoder = "fast" if fast_available() else "bindings"
        if decoder == "fast" and not _fast_pays_off(anchor):
            decoder = "bindings"
        elif decoder == "bindings":
            log.warning("fast OTF2 decoder unavailable (needs numba, llvmlite and the otf2 C library); using bindings")
    isolate = jobs != 0 and "fork" in mp.get_all_start_methods()
    if decoder == "bindings":
        return _warn_counts(_run_isolated(_bindings_job, anchor, isolate=isolate))
    if isolate:  # compile or load the callbacks here, once: forked workers inherit them
        callback_addresses()
    if isolate and _event_bytes(anchor) <= SMALL_TRACE_BYTES:
        return _warn_counts(_run_isolated(_small_fast_job, anchor, isolate=True))  # one child does it all
    defs = _run_isolated(_definitions_job, anchor, isolate=isolate)
    return _warn_counts(_decode_fast(anchor, defs, jobs))


def _event_bytes(anchor: str) -> int:
    sub = os.path.splitext(anchor)[0]
    if not os.path.isdir(sub):
        return 0
    return sum(e.stat().st_size for e in os.scandir(sub) if e.is_file())


def _small_fast_job(anchor: str) -> RawTrace:
    """Definitions and events of a small trace in one child process (saves a fork)."""
    return _decode_fast(anchor, _definitions_job(anchor), 0)


def _definitions_job(anchor: str) -> Defs:
    """Read and map the definitions (runs in a child process)."""
    reader = _open_reader(anchor)
    try:
        defs = read_definitions(reader, anchor)
    finally:
        with contextlib.suppress(Exception):
            reader.close()
    _check_event_files(anchor, defs)
    return defs


def _bindings_job(anchor: str) -> RawTrace:
    """The whole reference decode (runs in a child process)."""

    reader = _open_reader(anchor)
    try:
        defs = read_definitions(reader, anchor)
        present = _check_event_files(anchor, defs)
        check_local_defs(anchor, [int(r) for r in defs.loc_refs])
        with _otf2_errors(os.path.join(os.path.splitext(anchor)[0], "*.evt"), "cannot decode the events"):
            raw, decoded = decode_events(reader, defs, present)
        over = _check_event_counts(anchor, defs, decoded)
        if over:
            raw.attrs["undeclared_events"] = over
        return raw
    finally:
        with contextlib.suppress(Exception):
            reader.close()


def _run_isolated(fn: Any, anchor: str, *, isolate: bool) -> Any:
    """Run ``fn(anchor)`` in a forked child (a crash or hang of the C library -> FormatError)."""
    if not isolate:
        return fn(anchor)
    try:
        return run_forked([(fn, (anchor,))], deadline(anchor))[0]
    except HangError:
        raise FormatError(anchor, "reading the archive did not finish in time: corrupt trace data") from None
    except CrashError as e:
        raise FormatError(anchor, f"the OTF2 library crashed while reading the archive ({e.detail})") from None


def _decode_fast(anchor: str, defs: Defs, jobs: int | None, max_events: int | None = None) -> RawTrace:
    refs = [int(r) for r in defs.loc_refs]
    maps = {
        "rmap": np.append(defs.region_map, np.int32(len(defs.regions))).astype(np.int32),  # + the program region
        "moff": defs.metric_offsets,
        "mmem": defs.metric_members,
        "max_members": defs.max_members,
        "offset": defs.global_offset,
        "resolution": defs.timer_resolution,
        "local_defs": has_local_defs(anchor),
    }
    n = len(refs)
    if jobs is None:
        jobs = os.cpu_count() or 1
    if "fork" not in mp.get_all_start_methods():
        jobs = 0  # the shared arena needs fork; decode in this process
    jobs = min(jobs, n)
    present = _check_event_files(anchor, defs)
    sizes = [os.path.getsize(event_file(anchor, r)) if ok else 0 for r, ok in zip(refs, present)]
    plan = [[i for i in idx if present[i]] for idx in plan_locations(sizes, max(jobs, 1))]
    plan = [idx for idx in plan if idx]
    arena = Arena(max(len(plan), 1))
    try:
        results, rows = run_workers(anchor, arena, plan, refs, maps, jobs, max_events)
        for i in range(n):
            if results[i] is None:  # no event file, no events declared
                results[i] = LocationResult({t: 0 for t in TABLES}, np.zeros(len(SKIPPED_EVENTS), dtype=np.int64), 0)
        read = np.array([r.n_read for r in results])
        over = {} if max_events is not None else _check_event_counts(anchor, defs, read)
        counts = {t: np.array([r.counts[t] for r in results], dtype=np.int64) for t in TABLES}
        skipped = np.zeros(len(SKIPPED_EVENTS), dtype=np.int64)
        for r in results:
            skipped += r.skipped
        program = next((defs.strings.get(r.program, "") for r in results if r.program >= 0), None)
        del results
        tables = arena.finalize(rows)
    finally:
        arena.close()
    del arena
    raw = assemble(defs, tables, counts, dict(zip(SKIPPED_EVENTS, skipped.tolist())), "fast", program)
    if over:
        raw.attrs["undeclared_events"] = over
    return raw


def _check_event_counts(anchor: str, defs: Defs, decoded: np.ndarray) -> dict[int, tuple[int, int]]:
    """Each location's decoded records against the number its definition declares (0: not declared).

    Fewer than declared is a FormatError: the OTF2 library stops reading a
    damaged event file without an error in some cases, and the declared count
    is how the lost events show. More than declared loses nothing (every
    record was read): returned as ``{location ref: (decoded, declared)}`` for
    :func:`decode` to warn about.
    """
    declared = defs.loc_events.astype(np.int64)
    bad = np.flatnonzero((declared > 0) & (decoded < declared))
    if len(bad):
        i = int(bad[0])
        ref = int(defs.loc_refs[i])
        more = f" (and {len(bad) - 1} more locations)" if len(bad) > 1 else ""
        raise FormatError(
            event_file(anchor, ref),
            f"holds {int(decoded[i])} event records, the definitions declare {int(declared[i])} for location {ref}"
            f"{more}: the event file is truncated or corrupt",
        )
    over = np.flatnonzero((declared > 0) & (decoded > declared))
    return {int(defs.loc_refs[i]): (int(decoded[i]), int(declared[i])) for i in over}


def _warn_counts(raw: RawTrace) -> RawTrace:
    """Log the locations with more event records than declared (in the caller's process)."""
    over = raw.attrs.get("undeclared_events") or {}
    if over:
        ref, (got, want) = next(iter(over.items()))
        more = f" and {len(over) - 1} more locations" if len(over) > 1 else ""
        log.warning(
            "%s: location %d holds %d event records, its definition declares %d%s (all were read)",
            raw.attrs.get("source", "trace"), ref, got, want, more,
        )  # fmt: skip
    return raw


def read_defs(path: str | os.PathLike[str]) -> tuple[str, Defs]:
    """The resolved anchor and the mapped global definitions of an archive (read in a forked child).

    Raises
    ------
    FormatError
        When the archive cannot be read, or the fast decoder is unavailable.
    """
    anchor = resolve_anchor(path)
    if not fast_available():
        raise FormatError(anchor, "decoding a subset of locations needs the fast decoder (numba, llvmlite, otf2)")
    return anchor, _run_isolated(_definitions_job, anchor, isolate="fork" in mp.get_all_start_methods())


def decode_locations_of(
    anchor: str, defs: Defs, locs: list[int] | np.ndarray, *, max_events: int | None = None, jobs: int | None = 0
) -> RawTrace:
    """Decode the events of some locations with the fast decoder, keeping global location ids.

    The result has all of the archive's definitions (locations, regions,
    communicators), and the events of ``locs`` only; ``pos`` indexes its own
    region events. An engine's workers each decode their partition this way.

    Parameters
    ----------
    anchor : str
        The anchor file.
    defs : Defs
        The archive's mapped definitions (:func:`read_defs`).
    locs : list of int
        Location ids (rows of ``defs.locations``).
    max_events : int, optional
        Decode only the first events of each location (a prefix).
    jobs : int, optional
        Worker processes (0: the C library runs in this process).
    """
    import dataclasses

    glocs = np.asarray(sorted(int(x) for x in locs), dtype=np.int64)
    sub = dataclasses.replace(
        defs,
        locations=defs.locations.iloc[glocs].reset_index(drop=True),
        loc_refs=defs.loc_refs[glocs],
        loc_events=defs.loc_events[glocs],
    )
    part = _decode_fast(anchor, sub, jobs, max_events)
    opened = program_opened(part, len(defs.regions))
    # the archive's definition tables, no events; with the program region when these locations open it
    full = definitions_raw(anchor, defs, program=None if opened is None else opened[1])
    ev = {}
    for t in TABLES:
        tab = dict(getattr(part, t))
        tab["location"] = glocs[tab["location"]].astype(np.int32) if len(tab["location"]) else tab["location"]
        ev[t] = tab
    full.attrs["skipped_events"] = part.attrs.get("skipped_events", {})
    return dataclasses.replace(full, stacks=part.stacks, **ev)  # the stacks its samples refer to


def program_opened(raw: RawTrace, n_defined: int) -> tuple[int, str] | None:
    """The first location whose events open the program region (Score-P 8's ProgramBegin), and the region's name.

    ``None`` when no event does. The decoders give the program region the id
    ``n_defined`` (the number of regions the definitions define) and name it
    after the first location's ProgramBegin (:func:`._assemble.program_region`):
    a read of the archive in parts takes the first over its parts and builds
    every part's definitions with ``definitions_raw(anchor, defs, program=name)``,
    so that all of them have the region table of the whole archive's read.
    """
    reg = raw.region_events["region"]
    hit = reg >= n_defined
    if not len(reg) or not hit.any():
        return None
    return int(raw.region_events["location"][hit].min()), str(raw.regions["name"].iloc[n_defined])


def definitions_raw(anchor: str, defs: Defs, program: str | None = None) -> RawTrace:
    """A RawTrace with the archive's definitions and no events.

    With ``program`` (the name of the program region, :func:`program_opened`),
    the region table ends with that region, as when the events were read.
    """

    def dtype(t: str, c: str) -> np.dtype:
        return TABLE_SCHEMAS[t][c] if c in TABLE_SCHEMAS[t] else OPTIONAL_COLUMNS[t][c][0]

    counts = {t: np.zeros(len(defs.locations), dtype=np.int64) for t in TABLES}
    empty = {t: {c: np.zeros(0, dtype=dtype(t, c)) for c in TABLES[t] if c != "location"} for t in TABLES}
    return assemble(defs, empty, counts, {}, "fast", program)
