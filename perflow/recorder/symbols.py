"""Resolve recorded native addresses to function, file and line.

An address is first turned into *module + offset* with the process's memory
map (for position-independent modules the load base is subtracted), then each
module's offsets are resolved in one run of a symbolizer: ``llvm-symbolizer``
(``--inlining``, JSON output) when it is installed, else GNU ``addr2line -f -C
-i`` (which names some inlined frames after their caller: install ``llvm`` for
exact inline chains; ``$PERFLOW_SYMBOLIZER`` = ``addr2line`` or
``llvm-symbolizer`` forces one). Inlined frames are expanded, Fortran names
lose their trailing underscore (module procedures ``__m_MOD_p`` become
``m::p``), and modules without line information fall back to their symbol
table (``nm``) or, failing that, to ``[module]``.

Callers pass the address of the call instruction for return addresses
(return address minus one), so the line of a caller's frame is the line of
its call statement.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..errors import PerflowError
from ..kinds import MPI_MODULE, SYSTEM_DIRS
from .decode import Mapping
from .filters import base_name

__all__ = ["Resolver", "Frame", "is_mpi_module", "is_system_module", "clean_name"]

log = logging.getLogger(__name__)


class Frame(NamedTuple):
    """A resolved frame: where it is (``file``, ``line``) and which function it is in.

    ``function``, ``decl_file`` and ``decl_line`` identify the function the
    same way in every frame of it, inlined or not (see :meth:`Resolver.resolve`):
    the demangled name with parameters of its out-of-line copy, and the file
    and line where it is defined.
    """

    function: str
    file: str
    line: int
    module: str
    decl_file: str = ""
    decl_line: int = 0


_LOC = re.compile(r"^(.*?):(\d+|\?)(?: \(discriminator \d+\))?$")
_FORTRAN_FILE = re.compile(r"\.(f|for|ftn|f77|f90|f95|f03|f08)$", re.IGNORECASE)
_FORTRAN_MOD = re.compile(r"^__(\w+?)_MOD_(\w+)$")


def clean_name(name: str, file: str = "") -> str:
    """A function name as a user wrote it: Fortran module procedures and external names demangled.

    ``__mymod_MOD_solve`` becomes ``mymod::solve``; in Fortran sources (by the
    file's extension) a trailing underscore of an external name is dropped.
    """
    m = _FORTRAN_MOD.match(name)
    if m:
        return f"{m.group(1)}::{m.group(2)}"
    if name.endswith("_") and not name.endswith("__") and _FORTRAN_FILE.search(file or ""):
        return name[:-1]
    return name


def is_mpi_module(module: str) -> bool:
    """Whether a module is part of the MPI library or the recorder (not the user's code)."""
    return bool(MPI_MODULE.match(Path(module).name))


def is_system_module(module: str) -> bool:
    """A system library or the MPI library: its frames keep the symbolizer's names (no user function there)."""
    return os.path.realpath(module).startswith(SYSTEM_DIRS) or is_mpi_module(module)


def _elf_is_dyn(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(18)
    except OSError:
        return True
    if head[:4] != b"\x7fELF" or len(head) < 18:
        return True
    order = "little" if head[5] == 1 else "big"
    return int.from_bytes(head[16:18], order) == 3  # ET_DYN


class Resolver:
    """Resolve (module, offset) pairs, caching per module across processes.

    Parameters
    ----------
    timeout : float
        Seconds allowed for each ``addr2line``/``nm`` run.
    """

    def __init__(self, timeout: float = 120, backend: str | None = None) -> None:
        self.timeout = timeout
        backend = backend or os.environ.get("PERFLOW_SYMBOLIZER") or None
        self._llvm = shutil.which(backend or "llvm-symbolizer") if backend != "addr2line" else None
        self._addr2line = shutil.which("addr2line")
        #: ``"llvm-symbolizer"`` or ``"addr2line"`` (or ``"nm"`` when neither is installed)
        self.backend = "llvm-symbolizer" if self._llvm else ("addr2line" if self._addr2line else "nm")
        #: (function, file) -> line where the function starts (from llvm-symbolizer)
        self.start_line: dict[tuple[str, str], int] = {}
        self._nm = shutil.which("nm")
        self._dyn: dict[str, bool] = {}
        self._syms: dict[str, tuple[np.ndarray, list[str]]] = {}
        self._done: dict[tuple[str, int], list[Frame]] = {}
        self._ident: dict[tuple[str, str, int], tuple[str, str, int]] = {}
        self._fsyms: dict[str, dict[str, list[tuple[int, str]]]] = {}

    # -- module + offset ------------------------------------------------------

    def locate(self, maps: Mapping | None, addrs: np.ndarray) -> tuple[list[str], np.ndarray]:
        """Map addresses of one process to ``(module path, offset)``; module ``""`` when unmapped."""
        addrs = np.asarray(addrs, dtype=np.uint64)
        if maps is None or not len(maps.start):
            return [""] * len(addrs), addrs.astype(np.int64)
        idx = np.searchsorted(maps.start, addrs, side="right") - 1
        ok = (idx >= 0) & (addrs < maps.end[np.maximum(idx, 0)])
        base: dict[str, int] = {}
        for s, o, p in zip(maps.start, maps.offset, maps.path):
            b = int(s) - int(o)
            base[p] = min(base.get(p, b), b)
        mods = [maps.path[i] if k else "" for i, k in zip(idx, ok)]
        offs = np.empty(len(addrs), np.int64)
        for j, (a, m) in enumerate(zip(addrs, mods)):
            if not m:
                offs[j] = int(a)
                continue
            if m not in self._dyn:
                self._dyn[m] = _elf_is_dyn(m)
            offs[j] = int(a) - base[m] if self._dyn[m] else int(a)
        return mods, offs

    # -- resolution -------------------------------------------------------------

    def resolve(self, module: str, offsets: np.ndarray | list[int]) -> None:
        """Resolve a batch of offsets of one module (results cached for :meth:`frames`)."""
        todo = sorted({int(o) for o in offsets} - {o for (m, o) in self._done if m == module})
        if not todo:
            return
        chains: dict[int, list[Frame]] = {}
        if module and Path(module).is_file():
            if self._llvm:
                chains = self._run_llvm(module, todo)
            elif self._addr2line:
                chains = self._run_addr2line(module, todo)
        for off in todo:
            chain = chains.get(off) or [Frame("??", "", 0, module)]
            if chain[-1][0] == "??":
                name = self._symbol(module, off)
                chain[-1] = chain[-1]._replace(function=name)
            self._done[(module, off)] = chain
        if module and self._llvm and Path(module).is_file() and not is_system_module(module):
            self._identify(module, [self._done[(module, o)] for o in todo])
        else:
            for off in todo:
                ch = self._done[(module, off)]
                self._done[(module, off)] = [f._replace(decl_file=f.file, decl_line=f.decl_line or f.line) for f in ch]

    # -- one identity per function ----------------------------------------------

    def _identify(self, module: str, chains: list[list[Frame]]) -> None:
        """Give every frame its function's identity: the out-of-line copy's name, file and line.

        llvm-symbolizer names an out-of-line function by its linkage name
        (``CalcLagrangeElements(Domain&)``) but an inlined frame of a function
        without one by its short DWARF name (``CalcLagrangeElements``), and a
        frame's file is where the frame is (``stl_vector.h`` for an accessor
        whose line-table row is its inlined ``operator[]``), not where its
        function is defined. Each (name, start line) is matched, once, to the
        module's function symbol of that name (exactly, or by its qualified
        name without parameters) whose entry has the same start line; the
        function's file is the file of that entry. A function without an
        out-of-line copy keeps its name, its start line and the file of its
        frames.
        """
        want = {
            (f.function, f.decl_line)
            for ch in chains
            for f in ch
            if (module, f.function, f.decl_line) not in self._ident
        }
        if want:
            self._match(module, want)
        for ch in chains:
            for i, f in enumerate(ch):
                name, file, line = self._ident.get((module, f.function, f.decl_line)) or (f.function, "", f.decl_line)
                ch[i] = f._replace(function=name, decl_file=file or f.file, decl_line=line or f.line)

    def _match(self, module: str, want: set[tuple[str, int]]) -> None:
        if module not in self._fsyms:
            by: dict[str, list[tuple[int, str]]] = {}
            try:
                syms = filtermap.function_symbols(module)
            except PerflowError:
                syms = []
            for a, dem, _ in syms:
                dem = clean_name(dem)
                by.setdefault(dem, []).append((a, dem))
                b = base_name(dem)
                if b != dem:
                    by.setdefault(b, []).append((a, dem))
                    tail = b.rsplit("::", 1)[-1]
                    if tail != b:
                        by.setdefault(tail, []).append((a, dem))
            self._fsyms[module] = by
        by = self._fsyms[module]
        cands = {a for name, _ in want for a, _ in by.get(name, [])[:16]}
        entries = self._run_llvm(module, sorted(cands)) if cands else {}
        for name, start in want:
            hits = {}
            for a, dem in by.get(name, [])[:16]:
                ch = entries.get(a)
                if ch and (ch[0].decl_line == start or not start):
                    hits.setdefault(dem, (dem, ch[0].file, ch[0].decl_line))
            if len(hits) == 1:
                self._ident[(module, name, start)] = next(iter(hits.values()))

    def frames(self, module: str, offset: int) -> list[Frame]:
        """Frames (outermost first; several when inlined) of one resolved offset."""
        key = (module, int(offset))
        if key not in self._done:
            self.resolve(module, [offset])
        return self._done[key]

    def _run_llvm(self, module: str, offs: list[int]) -> dict[int, list[Frame]]:
        inp = "".join(f"0x{o:x}\n" for o in offs)
        argv = [self._llvm, f"--obj={module}", "--inlining", "--demangle", "--functions=linkage", "--output-style=JSON"]
        try:
            p = subprocess.run(argv, input=inp, capture_output=True, text=True, timeout=self.timeout)
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.warning("llvm-symbolizer failed on %s: %s", module, exc)
            return {}
        out: dict[int, list[Frame]] = {}
        for line in p.stdout.splitlines():
            try:
                rec = json.loads(line)
                addr = int(rec["Address"], 16)
            except (ValueError, KeyError, TypeError):
                continue
            chain: list[Frame] = []
            for sym in rec.get("Symbol") or []:  # innermost first
                file = sym.get("FileName") or ""
                file = "" if file == "??" else file
                name = sym.get("FunctionName") or "??"
                name = "??" if name == "<invalid>" else clean_name(name, file)
                start = int(sym.get("StartLine") or 0)
                chain.insert(0, Frame(name, file, int(sym.get("Line") or 0), module, "", start))
                if start:
                    self.start_line.setdefault((name, file), start)
            if chain:
                out[addr] = chain
        return out

    def _run_addr2line(self, module: str, offs: list[int]) -> dict[int, list[Frame]]:
        inp = "".join(f"{o:x}\n" for o in offs)
        try:
            p = subprocess.run(
                [self._addr2line, "-e", module, "-a", "-f", "-C", "-i"],
                input=inp,
                capture_output=True,
                text=True,
                timeout=self.timeout,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.warning("addr2line failed on %s: %s", module, exc)
            return {}
        out: dict[int, list[Frame]] = {}
        cur: list[Frame] | None = None
        lines = p.stdout.splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            if re.fullmatch(r"0x[0-9a-fA-F]+", line):
                cur = []
                out[int(line, 16)] = cur
                i += 1
                continue
            if cur is not None and i + 1 < len(lines):
                m = _LOC.match(lines[i + 1])
                file, ln = (m.group(1), m.group(2)) if m else ("??", "0")
                file = "" if file == "??" else file
                cur.insert(0, Frame(clean_name(line.strip(), file), file, int(ln) if ln.isdigit() else 0, module))
            i += 2
        return out

    def _symbol(self, module: str, off: int) -> str:
        base = Path(module).name.strip("[]") if module else "unknown"
        if module not in self._syms:
            self._syms[module] = self._load_symbols(module)
        addrs, names = self._syms[module]
        if len(addrs):
            i = int(np.searchsorted(addrs, off, side="right")) - 1
            if i >= 0:
                return names[i]
        return f"[{base}]"

    def _load_symbols(self, module: str) -> tuple[np.ndarray, list[str]]:
        if not (module and self._nm and Path(module).is_file()):
            return np.zeros(0, np.int64), []
        for extra in ([], ["-D"]):
            try:
                p = subprocess.run(
                    [self._nm, "-C", "-n", "--defined-only", *extra, module],
                    capture_output=True,
                    text=True,
                    timeout=self.timeout,
                )
            except (OSError, subprocess.TimeoutExpired):
                continue
            rows = []
            for line in p.stdout.splitlines():
                parts = line.split(None, 2)
                if len(parts) == 3 and parts[1] in "TtWwiI" and parts[0].strip("0123456789abcdefABCDEF") == "":
                    rows.append((int(parts[0], 16), parts[2]))
            if rows:
                rows.sort()
                return np.array([r[0] for r in rows], np.int64), [r[1] for r in rows]
        return np.zeros(0, np.int64), []


# The filter map builds on this module (imports it at its top): the module, not its
# names, is imported here, last, so that either can be imported first.
from . import filtermap  # noqa: E402
