"""The recorder inside a recorded Python process (standard library only).

This package is imported as the top-level ``perflow_pyrec`` (its directory is
put on ``PYTHONPATH``), never through ``perflow``, so that recording does not
import perflow and its dependencies into the program.

Writes the same per-process files as the C library (see ``csrc/pfrec.h``), with
Python frames instead of addresses: frame ids (``F`` lines of ``p<pid>.txt``:
name, file, first line) in samples and call contexts, and call-site ids (``S``
lines: function, file, line) in the ENTER records of MPI calls.

Samples come from :mod:`.sampling`; none are taken inside recorded MPI calls.
"""

from __future__ import annotations

import os
import re
import runpy
import struct
import sys
import threading
import time
from pathlib import Path
from types import CodeType, FrameType

from .sampling import start_sampler

__all__ = ["Recorder", "start_from_env", "FN", "RANK_ENV"]

_DEF = Path(__file__).resolve().parents[2] / "csrc" / "functions.def"
FN: dict[str, int] = {
    n: i for i, n in enumerate(re.findall(r'^PF_FN\(\w+,\s*"([^"]+)"\)', _DEF.read_text(), re.MULTILINE))
}
RANK_ENV = ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "MV2_COMM_WORLD_RANK", "SLURM_PROCID")

_REC = struct.Struct("<dQqqiiiBBH")
_SMP = struct.Struct("<QddQ")
_CTX = struct.Struct("<QQQQ")
R_ENTER, R_LEAVE, R_P2P, R_COLL = 1, 2, 3, 4
S_SAMPLE, S_CTX = 1, 2
MAGIC = 0xFFFF000000000000
_CHUNK = 8192  # event records per flush
SKIP, STOP = -1, -2  # code classes: not a program frame / the bootstrap (end of the program's stack)
NO_SITE = 0xFFFFFFFF  # call-site id of an MPI call made from no Python frame (e.g. at exit)


class Recorder:
    """Per-process recorder: event and sample buffers, frame and call-site tables.

    Parameters
    ----------
    outdir : str
        Directory for ``p<pid>.*``.
    hz : int
        Sampling frequency (0: no sampling).
    program : str
        The script or module run, for the metadata.
    """

    def __init__(self, outdir: str, hz: int, program: str) -> None:
        self.pid = os.getpid()
        base = os.path.join(outdir, f"p{self.pid}")
        self._ev = open(base + ".ev", "wb")  # noqa: SIM115 -- closed in close()
        self._smp = open(base + ".smp", "wb")  # noqa: SIM115
        self._txt = open(base + ".txt", "w", encoding="utf-8")  # noqa: SIM115
        self._evbuf = bytearray(_REC.size * _CHUNK)
        self._nev = 0
        self._smpbuf = bytearray()
        self._lock = threading.Lock()
        self._codes: dict[CodeType, int] = {}
        self._nframes = 0
        self._sites: dict[tuple[CodeType, int], int] = {}
        self._ctx: dict[tuple[int, ...], int] = {}
        self._ctx_cache: dict[tuple[CodeType, FrameType | None], int] = {}
        here = os.path.dirname(os.path.abspath(__file__))
        self.skip_files = {os.path.join(here, n) for n in ("recorder.py", "mpi.py", "mpireq.py", "sampling.py")}
        # the frames of the bootstrap (runpy is frozen in recent Pythons)
        self.stop_files = {os.path.abspath(runpy.__file__), "<frozen runpy>", os.path.join(here, "__main__.py")}
        self.main_ident = threading.get_ident()
        self.nregion = 0
        self.in_mpi = False
        self.t_mpi_exit = 0.0
        self.t_enter = 0.0
        self.closed = False
        rank = next((os.environ[v] for v in RANK_ENV if v in os.environ), "-1")
        m1 = time.monotonic()
        real = time.time()
        m2 = time.monotonic()
        self.txt(
            f"env_rank {rank}\nversion 1\nkind python\npid {self.pid}\nexe {program}\nhz {hz}\n"
            f"clock_offset {real - 0.5 * (m1 + m2):.9f}\nrecsize {_REC.size}\n"
        )
        self.put(time.monotonic(), R_ENTER, fn=FN["program"], n1=-1)
        self.nregion += 1
        self._sampler = start_sampler(self, hz, os.environ.get("PERFLOW_RECORD_PYSAMPLER", ""))
        self.txt(f"sampler {type(self._sampler).__name__ if self._sampler else 'none'}\n")

    # -- output ---------------------------------------------------------------

    def txt(self, text: str) -> None:
        """Append metadata or definition lines."""
        with self._lock:
            self._txt.write(text)

    def put(
        self,
        t: float,
        typ: int,
        kind: int = 0,
        fn: int = 0,
        addr: int = 0,
        n1: int = 0,
        n2: int = 0,
        a: int = 0,
        b: int = 0,
        comm: int = -1,
    ) -> None:
        """Append one event record (main thread only)."""
        if self._nev == _CHUNK:
            self._ev.write(self._evbuf)
            self._nev = 0
        _REC.pack_into(self._evbuf, self._nev * _REC.size, t, addr, n1, n2, a, b, comm, typ, kind, fn)
        self._nev += 1

    def _put_stack(self, head: bytes, ids: list[int]) -> None:
        with self._lock:
            self._smpbuf += head
            self._smpbuf += struct.pack(f"<{len(ids)}Q", *ids)
            if len(self._smpbuf) > (1 << 18):
                self._smp.write(self._smpbuf)
                self._smpbuf = bytearray()

    # -- frames ---------------------------------------------------------------

    def _code(self, code: CodeType) -> int:
        """Frame id of a code object, or SKIP (import machinery, the recorder) or STOP (the bootstrap)."""
        fid = self._codes.get(code)
        if fid is not None:
            return fid
        with self._lock:
            name = code.co_filename
            if name in self.stop_files:
                fid = STOP
            elif name in self.skip_files or name.startswith("<frozen importlib"):
                fid = SKIP
            else:
                fid = self._nframes
                self._nframes += 1
                qual = getattr(code, "co_qualname", code.co_name)
                self._txt.write(f"F\t{fid}\t{qual}\t{name}\t{code.co_firstlineno}\n")
            self._codes[code] = fid
        return fid

    def stack(self, f: FrameType | None) -> list[int]:
        """Frame ids from ``f`` outwards (innermost first), stopping at the boot frames.

        The import machinery's own frames are left out, so that the time spent
        importing a module shows under the importing statement's function.
        """
        ids = []
        codes = self._codes
        while f is not None:
            fid = codes.get(f.f_code)
            if fid is None:
                fid = self._code(f.f_code)
            if fid >= 0:
                ids.append(fid)
            elif fid == STOP:
                break
            f = f.f_back
        return ids

    def user_frame(self) -> FrameType | None:
        """The innermost frame outside the recorder and the import machinery (the caller of an MPI method)."""
        f = sys._getframe(1)
        codes = self._codes
        while f is not None:
            fid = codes.get(f.f_code)
            if fid is None:
                fid = self._code(f.f_code)
            if fid != SKIP:
                return f if fid >= 0 else None
            f = f.f_back
        return None

    def _site(self, f: FrameType) -> int:
        key = (f.f_code, f.f_lineno or 0)
        sid = self._sites.get(key)
        if sid is None:
            sid = self._sites[key] = len(self._sites)
            name = getattr(f.f_code, "co_qualname", f.f_code.co_name)
            self.txt(f"S\t{sid}\t{name}\t{f.f_code.co_filename}\t{key[1]}\n")
        return sid

    def _context(self, f: FrameType) -> int:
        ids = tuple(self.stack(f))
        cid = self._ctx.get(ids)
        if cid is None:
            cid = self._ctx[ids] = len(self._ctx)
            self._put_stack(_CTX.pack(MAGIC | (S_CTX << 32) | len(ids), cid, 0, 0), list(ids))
        return cid

    # -- events ---------------------------------------------------------------

    def begin(self, fn: int) -> bool:
        """Enter a recorded MPI call; False (record nothing) when nested or off the main thread."""
        if self.in_mpi or self.closed or threading.get_ident() != self.main_ident:
            return False
        self.in_mpi = True
        f = self.user_frame()
        if f is None:
            site, ctx = NO_SITE, -1
        else:
            site = self._sites.get((f.f_code, f.f_lineno or 0))
            if site is None:
                site = self._site(f)
            # while the caller's parent frame lives (we hold it), the context above it cannot change
            key = (f.f_code, f.f_back)
            ctx = self._ctx_cache.get(key)
            if ctx is None:
                if len(self._ctx_cache) >= 64:
                    self._ctx_cache.clear()
                ctx = self._ctx_cache[key] = self._context(f)
        t = self.t_enter = time.monotonic()
        self.put(t, R_ENTER, fn=fn, addr=site, n1=ctx)
        self.nregion += 1
        return True

    def end(self, fn: int) -> None:
        """Leave the recorded MPI call entered with :meth:`begin`."""
        t = self.t_mpi_exit = time.monotonic()
        self.put(t, R_LEAVE, fn=fn)
        self.nregion += 1
        self.in_mpi = False

    def p2p(self, kind: int, peer: int, comm: int, tag: int, nbytes: int, req: int, t: float | None = None) -> None:
        """Record a point-to-point event (``nbytes`` -1 when unknown)."""
        if peer is None or peer < -1:  # MPI_PROC_NULL (-2 in Open MPI) and friends
            return
        self.put(time.monotonic() if t is None else t, R_P2P, kind=kind, n1=nbytes, n2=req, a=peer, b=tag, comm=comm)

    def coll(self, kind: int, op: int, comm: int, root: int, sent: int, received: int, t: float | None = None) -> None:
        """Record a collective begin or end event."""
        self.put(
            time.monotonic() if t is None else t, R_COLL, kind=kind, fn=op, n1=sent, n2=received, a=root, comm=comm
        )

    # -- sampling -------------------------------------------------------------

    def sample(self, t: float, weight: float, ids: list[int]) -> None:
        """Record one sample of the main thread (frame ids innermost first)."""
        if ids:
            self._put_stack(_SMP.pack(MAGIC | (S_SAMPLE << 32) | len(ids), t, weight, self.nregion), ids)

    def lock_held(self) -> bool:
        """Whether the recorder is in the middle of writing (a signal handler must not sample then)."""
        return self._lock.locked()

    # -- end ------------------------------------------------------------------

    def close(self) -> None:
        """Stop sampling, close the root region and write everything out (idempotent)."""
        if self.closed or os.getpid() != self.pid:
            return
        was_in_mpi, self.in_mpi = self.in_mpi, True  # no samples of the shutdown
        if self._sampler is not None:
            self._sampler.stop()
        if was_in_mpi:
            self.end(0)
        self.closed = True
        self.put(time.monotonic(), R_LEAVE, fn=FN["program"])
        self.nregion += 1
        self._ev.write(self._evbuf[: self._nev * _REC.size])
        with self._lock:
            self._smp.write(self._smpbuf)
            self._txt.write("end\n")
        for f in (self._ev, self._smp, self._txt):
            f.close()


def start_from_env(program: str) -> Recorder | None:
    """Start recording when ``PERFLOW_RECORD_DIR`` is set and this process is an MPI rank."""
    outdir = os.environ.get("PERFLOW_RECORD_DIR")
    if not outdir:
        return None
    if not any(v in os.environ for v in RANK_ENV) and not os.environ.get("PERFLOW_RECORD_ALL"):
        return None
    try:
        hz = int(os.environ.get("PERFLOW_RECORD_HZ", "100"))
        return Recorder(outdir, hz, program)
    except OSError as exc:
        print(f"perflow-recorder: cannot record into {outdir}: {exc}", file=sys.stderr)
        return None
