"""Read the recorder's per-process files (see ``csrc/pfrec.h`` for the layout).

Each recorded process ``<pid>`` leaves ``p<pid>.txt`` (metadata, communicator
and Python frame definitions), ``p<pid>.ev`` (fixed-size event records),
``p<pid>.smp`` (samples and call contexts) and, for native programs,
``p<pid>.maps`` (its memory map, to resolve addresses). Each OpenMP worker
thread ``n`` of it leaves ``p<pid>.t<n>.ev`` and ``p<pid>.t<n>.smp`` (the same
layouts), read into :attr:`ProcessData.threads`.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import FormatError
from .functions import REC_DTYPE, S_CTX, S_MAGIC, S_SAMPLE, S_USAMPLE

__all__ = ["ProcessData", "read_process", "read_dir", "Mapping"]

log = logging.getLogger(__name__)


@dataclass
class Mapping:
    """A process's file-backed memory mappings, sorted by start address."""

    start: np.ndarray
    end: np.ndarray
    offset: np.ndarray
    path: list[str]


@dataclass
class ProcessData:
    """Everything one recorded process left behind, decoded.

    Attributes
    ----------
    pid : int
    meta : dict of str to str
        ``key value`` lines of the text file (``rank``, ``size``, ``exe``, ...).
    rank : int
        World rank (from MPI, else from the launcher's environment), -1 if unknown.
    events : numpy.ndarray
        Event records (:data:`REC_DTYPE`), in stream order.
    sample_time, sample_weight : numpy.ndarray of float64
    sample_nregion : numpy.ndarray of int64
        Number of region events recorded before each sample.
    sample_frames : list of numpy.ndarray
        Frames of each sample, innermost first (addresses, or frame ids for Python).
    sample_utop : numpy.ndarray of uint64
        Entry address of the innermost recorded user function (compiler
        instrumentation) open at each sample, 0 when none.
    contexts : dict of int to numpy.ndarray
        Call context id to frames, innermost first.
    comms : list of tuple
        ``(local id, key, creator, world ranks)`` per communicator definition.
    windows : list of tuple
        ``(local id, local communicator id, ordinal)`` per RMA window: the
        window was the ordinal-th created over that communicator (-1 unknown).
    groups : dict of int to numpy.ndarray
        Local group id (of ``MPI_Win_post``/``MPI_Win_start``) to the world ranks of its members.
    frames, sites : dict of int to tuple
        Python only: frame id to ``(name, file, line)``; call-site id to ``(function, file, line)``.
    maps : Mapping or None
    thread : int
        0 for the process (its initial thread); ``n`` for the stream of its
        worker thread ``n``.
    threads : list of ProcessData
        The worker threads' streams (``thread`` 1, 2, ...), each sharing the
        process's definitions (``meta``, ``contexts``, ``comms``, ``maps``, ...)
        and holding its own ``events`` and samples.
    calls : dict of int to tuple
        Compiler instrumentation: entry address of each function called to
        ``(visits, recorded, dropped, seconds of the dropped calls, off)``,
        ``off`` 1 when switched off by ``--min-call``, 2 when excluded by the filter file.
    """

    pid: int
    meta: dict[str, str]
    rank: int
    events: np.ndarray
    sample_time: np.ndarray
    sample_weight: np.ndarray
    sample_nregion: np.ndarray
    sample_frames: list[np.ndarray]
    contexts: dict[int, np.ndarray]
    sample_utop: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    comms: list[tuple[int, int, str, np.ndarray]] = field(default_factory=list)
    windows: list[tuple[int, int, int]] = field(default_factory=list)
    groups: dict[int, np.ndarray] = field(default_factory=dict)
    frames: dict[int, tuple[str, str, int]] = field(default_factory=dict)
    sites: dict[int, tuple[str, str, int]] = field(default_factory=dict)
    maps: Mapping | None = None
    thread: int = 0
    threads: list[ProcessData] = field(default_factory=list)
    calls: dict[int, tuple[int, int, int, float, int]] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        """``"native"`` or ``"python"``."""
        return self.meta.get("kind", "native")

    @property
    def has_init(self) -> bool:
        """Whether the process called MPI_Init (its world rank is known from MPI)."""
        return "size" in self.meta


def _read_text(path: Path) -> tuple[dict[str, str], list, dict, dict, list, dict, dict]:
    meta: dict[str, str] = {}
    calls: dict[int, tuple[int, int, int, float, int]] = {}
    windows: list[tuple[int, int, int]] = []
    groups: dict[int, np.ndarray] = {}
    comms: list[tuple[int, int, str, np.ndarray]] = []
    frames: dict[int, tuple[str, str, int]] = {}
    sites: dict[int, tuple[str, str, int]] = {}
    for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        try:
            if line.startswith(("F\t", "S\t")):
                tag, ident, name, file, lineno = line.split("\t")
                (frames if tag == "F" else sites)[int(ident)] = (name, file, int(lineno))
            elif line.startswith("C "):
                parts = line.split()
                ranks = np.array([int(x) for x in parts[5:]], dtype=np.int64)
                if len(ranks) != int(parts[4]):
                    raise ValueError("member count does not match")
                comms.append((int(parts[1]), int(parts[2]), parts[3], ranks))
            elif line.startswith("R "):
                ident, comm, ordinal = (int(x) for x in line.split()[1:])
                windows.append((ident, comm, ordinal))
            elif line.startswith("G "):
                parts = line.split()
                ranks = np.array([int(x) for x in parts[3:]], dtype=np.int64)
                if len(ranks) != int(parts[2]):
                    raise ValueError("member count does not match")
                groups[int(parts[1])] = ranks
            elif line.startswith("T "):  # a worker thread's stream began (p<pid>.t<n>.*)
                pass
            elif line.startswith("U "):
                a, v, r, d, dt, off = line.split()[1:]
                calls[int(a, 16)] = (int(v), int(r), int(d), float(dt), int(off))
            elif line.startswith("W "):
                size = int(line.split()[1])
                comms.append((0, 1, "MPI_COMM_WORLD", np.arange(size, dtype=np.int64)))
            elif line:
                key, _, value = line.partition(" ")
                meta[key] = value
        except (ValueError, IndexError) as exc:
            raise FormatError(path, f"malformed line: {exc}", where=f"line {n}") from None
    return meta, comms, frames, sites, windows, groups, calls


def _read_maps(path: Path) -> Mapping | None:
    if not path.is_file():
        return None
    rows = []
    for line in path.read_text(errors="replace").splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6 or not parts[5].startswith(("/", "[vdso]")):
            continue
        a, _, b = parts[0].partition("-")
        rows.append((int(a, 16), int(b, 16), int(parts[2], 16), parts[5].strip()))
    rows.sort()
    return Mapping(
        np.array([r[0] for r in rows], dtype=np.uint64),
        np.array([r[1] for r in rows], dtype=np.uint64),
        np.array([r[2] for r in rows], dtype=np.uint64),
        [r[3] for r in rows],
    )


def _split_stream(words: np.ndarray, path: Path) -> list[tuple[int, int, int]]:
    """(type, header index, depth) of every record in a sample stream (headers: 4 words, 5 for S_USAMPLE)."""
    cand = np.flatnonzero((words >> np.uint64(48)) == np.uint64(S_MAGIC >> 48))
    depth = (words[cand] & np.uint64(0xFFFF)).astype(np.int64)
    typ = ((words[cand] >> np.uint64(32)) & np.uint64(0xFF)).astype(np.int64)
    nxt = cand + 4 + (typ == S_USAMPLE) + depth
    if (
        len(cand)
        and cand[0] == 0
        and np.array_equal(cand[1:], nxt[:-1])
        and nxt[-1] == len(words)
        and np.all(np.isin(typ, (S_SAMPLE, S_CTX, S_USAMPLE)))
    ):
        ok = np.ones(len(cand), bool)
    else:  # a frame word looked like a header, or the stream is truncated: follow the chain
        where = {int(c): i for i, c in enumerate(cand)}
        ok = np.zeros(len(cand), bool)
        i = 0
        while i in where:
            k = where[i]
            if nxt[k] > len(words):
                log.warning("%s: ignoring a truncated last sample", path)
                break
            ok[k] = True
            i = int(nxt[k])
        if i < len(words) and i not in where:
            log.warning("%s: sample stream is corrupt after word %d; ignoring the rest", path, i)
    return [(int(t), int(c), int(d)) for t, c, d in zip(typ[ok], cand[ok], depth[ok])]


def read_process(txt: str | Path) -> ProcessData:
    """Decode one process's files, given its ``p<pid>.txt``."""
    txt = Path(txt)
    base = txt.with_suffix("")
    meta, comms, frames, sites, windows, groups, calls = _read_text(txt)
    if meta.get("version") != "1":
        raise FormatError(txt, f"not a perflow recorder file (version {meta.get('version')!r})")
    if int(meta.get("recsize", REC_DTYPE.itemsize)) != REC_DTYPE.itemsize:
        raise FormatError(txt, f"event record size {meta['recsize']} differs from {REC_DTYPE.itemsize}")
    ctx: dict[int, np.ndarray] = {}
    stream = _read_stream(Path(f"{base}.ev"), Path(f"{base}.smp"), ctx)
    rank = int(meta.get("rank", meta.get("env_rank", "-1")) or -1)
    proc = ProcessData(
        pid=int(meta.get("pid", re.sub(r"\D", "", base.name) or -1)),
        meta=meta,
        rank=rank,
        contexts=ctx,
        comms=comms,
        windows=windows,
        groups=groups,
        calls=calls,
        frames=frames,
        sites=sites,
        maps=_read_maps(base.with_suffix(".maps")),
        **stream,
    )
    nums = sorted(int(m.group(1)) for f in base.parent.glob(f"{base.name}.t*.ev") if (m := _THREAD.search(f.name)))
    for num in nums:  # worker threads: their own streams, the process's definitions
        st = _read_stream(Path(f"{base}.t{num}.ev"), Path(f"{base}.t{num}.smp"), ctx)
        proc.threads.append(dataclasses.replace(proc, thread=num, threads=[], calls={}, **st))
    return proc


_THREAD = re.compile(r"\.t(\d+)\.ev$")


def _read_stream(evp: Path, smp: Path, ctx: dict[int, np.ndarray]) -> dict[str, object]:
    """The event records and samples of one thread's files (its call contexts are added to ``ctx``)."""
    raw = evp.read_bytes() if evp.is_file() else b""
    n = len(raw) // REC_DTYPE.itemsize
    if len(raw) % REC_DTYPE.itemsize:
        log.warning("%s: ignoring a truncated last event record", evp)
    events = np.frombuffer(raw[: n * REC_DTYPE.itemsize], dtype=REC_DTYPE)
    words = np.fromfile(smp, dtype="<u8") if smp.is_file() else np.zeros(0, "<u8")
    times, weights, nreg, utop, sframes = [], [], [], [], []
    for typ, i, d in _split_stream(words, smp):
        h = 5 if typ == S_USAMPLE else 4
        fr = words[i + h : i + h + d]
        if typ in (S_SAMPLE, S_USAMPLE):
            times.append(words[i + 1])
            weights.append(words[i + 2])
            nreg.append(words[i + 3])
            utop.append(words[i + 4] if h == 5 else 0)
            sframes.append(fr)
        elif typ == S_CTX:
            ctx[int(words[i + 1])] = fr
    return {
        "events": events,
        "sample_time": np.array(times, dtype=np.uint64).view(np.float64),
        "sample_weight": np.array(weights, dtype=np.uint64).view(np.float64),
        "sample_nregion": np.array(nreg, dtype=np.uint64).astype(np.int64),
        "sample_frames": sframes,
        "sample_utop": np.array(utop, dtype=np.uint64),
    }


def read_dir(path: str | Path) -> list[ProcessData]:
    """Decode every recorded process in a directory and keep one per world rank.

    A rank may have left several files (a wrapper script and the program it
    starts, both with the launcher's rank variable): the process that called
    MPI_Init wins, else the one with the most events.

    Raises
    ------
    FormatError
        When the directory holds no recorded process.
    """
    path = Path(path)
    procs = [read_process(p) for p in sorted(path.glob("p*.txt"))]
    if not procs:
        raise FormatError(path, "no recorded process data (p<pid>.txt files) in this directory")
    if all(p.rank < 0 for p in procs):  # no launcher and no MPI (PERFLOW_RECORD_ALL): number them by start
        for r, p in enumerate(sorted(procs, key=lambda q: float(q.events["t"][0]) if len(q.events) else 0.0)):
            p.rank = r
    best: dict[int, ProcessData] = {}
    for p in procs:
        if p.rank < 0:
            continue
        cur = best.get(p.rank)
        if cur is None or (p.has_init, len(p.events)) > (cur.has_init, len(cur.events)):
            best[p.rank] = p
    return [best[r] for r in sorted(best)]
