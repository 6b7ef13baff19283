"""Turn recorded frames and call sites into the raw trace's regions and stacks.

Regions are: the program's root region (id 0); one *function* region per
sampled or instrumented function (native: function, file, start line and
module from the symbolizer; Python: the code object's name, file and first
line); one *MPI call*
region per MPI function and call site, whose ``file``/``line``/``module`` are
the call site's and whose extra columns ``caller`` and ``stack`` give the
calling function and the calling context (an id in the stacks table: the
function regions from ``main`` down to the caller); and one *OpenMP* region
per construct and source location, named as Score-P names them
(``!$omp parallel @solver.c:42``, ``omp_set_lock``), with OTF2's roles.

Frames are relative to the region instance a sample or call falls in: below
``main``, or, inside an OpenMP construct, below the innermost outlined
function the OpenMP runtime calls (``.omp_outlined.``, ``main._omp_fn.0``).
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import numpy as np
import pandas as pd

from ..kinds import OFF_CPU
from .decode import ProcessData
from .functions import FUNCTIONS, OMP_FUNCTIONS, USER, omp_role, region_role
from .symbols import Frame, Resolver, is_mpi_module

__all__ = ["RegionTable", "NativeFrames", "PythonFrames"]

log = logging.getLogger(__name__)


class RegionTable:
    """Regions and stacks under construction (shared by all processes).

    Parameters
    ----------
    program : str
        Name of the root region (the program).
    program_file : str
        Its file (the executable or script).
    """

    def __init__(self, program: str, program_file: str = "") -> None:
        self._rows: list[dict] = [
            {
                "name": program,
                "role": "function",
                "paradigm": "user",
                "file": program_file,
                "line": 0,
                "module": Path(program_file).name,
                "caller": "",
                "stack": -1,
            }
        ]
        self._index: dict[tuple, int] = {}
        self._stacks: dict[tuple[int, ...], int] = {}

    def function(self, name: str, file: str, line: int, module: str, paradigm: str) -> int:
        """Id of a function region (created on first use; its line is the smallest seen)."""
        key = ("f", name, file, module)
        rid = self._index.get(key)
        if rid is None:
            rid = self._index[key] = len(self._rows)
            self._rows.append(
                {
                    "name": name,
                    "role": "function",
                    "paradigm": paradigm,
                    "file": file,
                    "line": line,
                    "module": Path(module).name,
                    "caller": "",
                    "stack": -1,
                }
            )
        elif line and (not self._rows[rid]["line"] or line < self._rows[rid]["line"]):
            self._rows[rid]["line"] = line
        return rid

    def mpi(self, fn: int, caller: str, file: str, line: int, module: str, stack: int) -> int:
        """Id of the region of MPI function ``fn`` called at a call site in a context."""
        key = ("m", fn, caller, file, line, module, stack)
        rid = self._index.get(key)
        if rid is None:
            name = FUNCTIONS[fn]
            rid = self._index[key] = len(self._rows)
            self._rows.append(
                {
                    "name": name,
                    "role": region_role(name),
                    "paradigm": "mpi",
                    "file": file,
                    "line": line,
                    "module": Path(module).name,
                    "caller": caller,
                    "stack": stack,
                }
            )
        return rid

    def off_cpu(self, stack: int) -> int:
        """Id of the region of time off the CPU below the frames of ``stack`` (see :mod:`.offcpu`)."""
        key = ("o", stack)
        rid = self._index.get(key)
        if rid is None:
            rid = self._index[key] = len(self._rows)
            self._rows.append(
                {
                    "name": OFF_CPU,
                    "role": "artificial",
                    "paradigm": "measurement_system",
                    "file": "",
                    "line": 0,
                    "module": "",
                    "caller": "",
                    "stack": stack,
                }
            )
        return rid

    def omp(self, fn: int, file: str, line: int, module: str, stack: int) -> int:
        """Id of the region of OpenMP construct (or lock call) ``fn`` at a source location."""
        key = ("omp", fn, file, line, module, stack)
        rid = self._index.get(key)
        if rid is None:
            base = FUNCTIONS[fn]
            name = f"{base} @{Path(file).name}:{line}" if base.startswith("!$omp") and file else base
            rid = self._index[key] = len(self._rows)
            self._rows.append(
                {
                    "name": name,
                    "role": omp_role(base),
                    "paradigm": "openmp",
                    "file": file,
                    "line": line,
                    "module": Path(module).name,
                    "caller": "",
                    "stack": stack,
                }
            )
        return rid

    def stack(self, regions: tuple[int, ...]) -> int:
        """Id of a stack (function regions, outermost first)."""
        sid = self._stacks.get(regions)
        if sid is None:
            sid = self._stacks[regions] = len(self._stacks)
        return sid

    def regions_frame(self) -> pd.DataFrame:
        """The regions table, indexed by region id."""
        df = pd.DataFrame(self._rows)
        df["line"] = df["line"].astype(np.int64)
        df["stack"] = df["stack"].astype(np.int64)
        return df

    def stacks_frame(self) -> pd.DataFrame:
        """The stacks table: one row per (stack, depth)."""
        rows = [(sid, d, r) for st, sid in self._stacks.items() for d, r in enumerate(st)]
        arr = np.array(rows, dtype=np.int64).reshape(-1, 3)
        return pd.DataFrame(
            {
                "stack": arr[:, 0].astype(np.int32),
                "depth": arr[:, 1].astype(np.int32),
                "region": arr[:, 2].astype(np.int32),
            }
        )


def _is_recorder(f: Frame) -> bool:
    return Path(f.module).name.startswith(("libpfrec", ".libpfrec"))


#: functions an OpenMP runtime calls to run a parallel region or a task (clang, GCC, Intel)
_OUTLINED = re.compile(r"omp_outlined|^\.omp_task_entry\.|\._omp_fn\.\d+$|^__kmp_invoke_microtask$")


#: the OpenMP runtimes' libraries (LLVM/Intel libomp, GCC libgomp)
_OMP_RUNTIME = re.compile(r"^lib(omp|gomp|iomp5)\b")
#: the runtimes' entry points and internals by name: a frame in the program's own module can bear one (the
#: PLT stub of ``__kmpc_fork_call``, sampled while the initial thread jumps through it)
_OMP_ENTRY = re.compile(r"^(__kmpc_|__kmp_|GOMP_|gomp_)")


def _trim_main(frames: list[Frame]) -> list[Frame]:
    """Drop the frames above the enclosing region (frames are outermost first).

    Inside an OpenMP construct those are the frames down to the innermost
    outlined function (the runtime's, its callers', and the outlined
    function itself); elsewhere the start-up frames above ``main``. A stack
    that then goes into the OpenMP runtime (the initial thread forking or
    joining a team, sampled by the wall-clock timer) stops before it: that
    time is its caller's, as the recorder's own frames are.
    """
    out = frames
    for i in range(len(frames) - 1, -1, -1):
        if _OUTLINED.search(frames[i][0]):
            out = frames[i + 1 :]
            break
    else:
        for i, f in enumerate(frames):
            if f[0] == "main":
                out = frames[i:]
                break
    for i, f in enumerate(out):
        if _OMP_RUNTIME.match(Path(getattr(f, "module", "") or "").name) or _OMP_ENTRY.match(f[0]):
            return out[:i]
    return out


class NativeFrames:
    """Resolve the native addresses of processes into regions and stacks.

    Parameters
    ----------
    table : RegionTable
    resolver : Resolver, optional
    """

    def __init__(self, table: RegionTable, resolver: Resolver | None = None) -> None:
        self.table = table
        self.resolver = resolver or Resolver()
        self._where: dict[int, dict[int, tuple[str, int]]] = {}
        self._memo: dict[tuple[int, bytes], tuple[int, ...]] = {}

    def prepare(self, procs: list[ProcessData]) -> None:
        """Locate every address of every process and resolve them, one batch per module."""
        by_module: dict[str, set[int]] = {}
        for p in procs:
            ev = p.events
            ent = ev["type"] == 1
            parts = [np.asarray(ev["addr"][ent & (ev["fn"] > 0)], np.uint64)]
            parts.append(np.asarray(ev["n2"][ent & (ev["n2"] != 0)]).view(np.uint64))
            parts.append(np.asarray(p.sample_utop[p.sample_utop != 0], np.uint64))
            parts.append(np.fromiter(p.calls, np.uint64, len(p.calls)))
            parts += [np.asarray(f, np.uint64) for f in p.sample_frames]
            parts += [np.asarray(f, np.uint64) for f in p.contexts.values()]
            addrs = np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.uint64)
            mods, offs = self.resolver.locate(p.maps, addrs)
            # (a process's worker threads come as streams of the same pid)
            self._where.setdefault(p.pid, {}).update({int(a): (m, int(o)) for a, m, o in zip(addrs, mods, offs)})
            for m, o in zip(mods, offs):
                by_module.setdefault(m, set()).add(int(o))
        for m, offs in by_module.items():
            self.resolver.resolve(m, sorted(offs))

    def _chain(self, p: ProcessData, addr: int) -> list[Frame]:
        where = self._where.setdefault(p.pid, {})
        w = where.get(int(addr))
        if w is None:
            mods, offs = self.resolver.locate(p.maps, np.array([addr], np.uint64))
            w = where[int(addr)] = (mods[0], int(offs[0]))
        return self.resolver.frames(*w)

    def _function(self, f: Frame) -> int:
        """The region of a frame's function: one per function, whatever frame (inlined or not) it is seen in."""
        return self.table.function(f.function, f.decl_file or f.file, f.decl_line or f.line, f.module, "user")

    def _regions(self, frames: list[Frame]) -> tuple[int, ...]:
        return tuple(self._function(f) for f in frames)

    def user_region(self, p: ProcessData, addr: int) -> int:
        """Region id of the instrumented user function whose entry address is ``addr``.

        At an entry address the outermost frame is the function itself (inner
        frames there belong to code inlined into its first instruction).
        """
        return self._function(self._chain(p, addr)[0])

    def _relative(self, p: ProcessData, frames: list[Frame], utop: int) -> tuple[int, ...]:
        """Function regions of ``frames`` (outermost first) below the enclosing user function ``utop``.

        The frames below the innermost frame of ``utop``'s function; when the
        stack does not show it (an unwinding that lost frames), the innermost
        frame alone, never the whole stack from ``main`` again below it.
        """
        regs = self._regions(frames)
        if utop:
            t = self.user_region(p, utop)
            hits = [k for k, r in enumerate(regs) if r == t]
            if hits:
                return regs[hits[-1] + 1 :]
            return regs[-1:] if regs and regs[-1] != t else ()
        return self._regions(_trim_main(frames))

    def sample_stack(self, p: ProcessData, frames: np.ndarray, utop: int = 0) -> int:
        """Stack id of one sample (frames innermost first), relative to the user function ``utop`` (0: none)."""
        key = (p.pid, np.asarray(frames, np.uint64).tobytes(), int(utop))
        regs = self._memo.get(key)
        if regs is None:
            out: list[Frame] = []
            for a in np.asarray(frames, np.uint64)[::-1]:
                chain = self._chain(p, int(a))
                if any(_is_recorder(f) for f in chain):
                    break  # the recorder's own code (its hooks, their clock reads): the time of the frame above
                out.extend(chain)
            regs = self._memo[key] = self._relative(p, out, int(utop))
        return self.table.stack(regs)

    def call_region(self, p: ProcessData, fn: int, addr: int, ctx: int, utop: int = 0) -> int:
        """Region id of an MPI call of function ``fn`` at ``addr`` with call context ``ctx``.

        ``fn`` :data:`~.functions.USER` is an instrumented user function entered at ``addr``.
        """
        if fn == USER:
            return self.user_region(p, addr)
        if fn in OMP_FUNCTIONS:
            return self.omp_region(p, fn, addr, ctx)
        frames = p.contexts.get(int(ctx)) if ctx >= 0 else None
        if frames is None or not len(frames):
            chain = self._chain(p, addr)
            f = chain[-1]
            return self.table.mpi(fn, f[0], f[1], f[2], f[3], -1)
        addrs = [int(a) for a in frames]
        k = 0  # the call site: the innermost frame outside the MPI library and the recorder
        while k < len(addrs) - 1 and is_mpi_module(self._chain(p, addrs[k])[-1][3]):
            k += 1
        out: list[Frame] = []
        for a in reversed(addrs[k:]):
            out.extend(self._chain(p, a))
        site = out[-1]
        stack = self.table.stack(self._relative(p, out, int(utop)))
        return self.table.mpi(fn, site[0], site[1], site[2], site[3], stack)

    def omp_region(self, p: ProcessData, fn: int, addr: int, ctx: int) -> int:
        """Region id of OpenMP construct ``fn`` at code address ``addr`` (call context ``ctx``, -1 none).

        The construct's source location is the innermost (inlined) frame of
        ``addr``; with a context (a parallel region's fork), its stack is the
        calling context down to the function holding the construct.
        """
        site = self._chain(p, addr)[-1] if addr else ("", "", 0, "")
        frames = p.contexts.get(int(ctx)) if ctx >= 0 else None
        stack = -1
        if frames is not None and len(frames):
            out: list[Frame] = []
            for a in reversed([int(a) for a in frames]):
                out.extend(self._chain(p, a))
            stack = self.table.stack(self._relative(p, out, 0))
        return self.table.omp(fn, site[1], site[2], site[3], stack)


class PythonFrames:
    """Map the Python recorder's frame and call-site ids into regions and stacks."""

    def __init__(self, table: RegionTable) -> None:
        self.table = table
        self._memo: dict[tuple[int, bytes], int] = {}

    def _regions(self, p: ProcessData, ids: np.ndarray) -> tuple[int, ...]:
        out = []
        for i in np.asarray(ids, np.int64)[::-1]:
            name, file, line = p.frames.get(int(i), (f"<frame {int(i)}>", "", 0))
            out.append(self.table.function(name, file, line, "python", "python"))
        return tuple(out)

    def sample_stack(self, p: ProcessData, frames: np.ndarray, utop: int = 0) -> int:
        """Stack id of one sample (frame ids innermost first)."""
        key = (p.pid, np.asarray(frames, np.uint64).tobytes())
        sid = self._memo.get(key)
        if sid is None:
            sid = self._memo[key] = self.table.stack(self._regions(p, frames))
        return sid

    def call_region(self, p: ProcessData, fn: int, site: int, ctx: int, utop: int = 0) -> int:
        """Region id of an MPI call made at call-site id ``site`` in context ``ctx``."""
        func, file, line = p.sites.get(int(site), ("", "", 0))
        frames = p.contexts.get(int(ctx)) if ctx >= 0 else None
        stack = self.table.stack(self._regions(p, frames)) if frames is not None else -1
        return self.table.mpi(fn, func, file, line, "python", stack)
