"""Resolve recorded native addresses to function, file and line.

An address is first turned into *module + offset* with the process's memory
map (for position-independent modules the load base is subtracted), then each
module's offsets are resolved in one ``addr2line -f -C -i`` run. Inlined
frames are expanded, and modules without line information fall back to their
symbol table (``nm``) or, failing that, to ``[module]``.
"""

from __future__ import annotations

import logging
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np

from .decode import Mapping

__all__ = ["Resolver", "Frame", "is_mpi_module"]

log = logging.getLogger(__name__)

#: A resolved frame: (function, file, line, module).
Frame = tuple[str, str, int, str]

_MPI_MODULE = re.compile(
    r"^(\.?libpfrec|libmpi|libmpich|libmpifort|libopen-(pal|rte)|libpmpi|libpmix|libucp|libucs|libuct|libfabric|"
    r"libhwloc|libevent)"
)
_LOC = re.compile(r"^(.*?):(\d+|\?)(?: \(discriminator \d+\))?$")


def is_mpi_module(module: str) -> bool:
    """Whether a module is part of the MPI library or the recorder (not the user's code)."""
    return bool(_MPI_MODULE.match(Path(module).name))


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

    def __init__(self, timeout: float = 120) -> None:
        self.timeout = timeout
        self._addr2line = shutil.which("addr2line")
        self._nm = shutil.which("nm")
        self._dyn: dict[str, bool] = {}
        self._syms: dict[str, tuple[np.ndarray, list[str]]] = {}
        self._done: dict[tuple[str, int], list[Frame]] = {}

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
        if module and self._addr2line and Path(module).is_file():
            chains = self._run_addr2line(module, todo)
        for off in todo:
            chain = chains.get(off) or [("??", "", 0, module)]
            if chain[-1][0] == "??":
                name = self._symbol(module, off)
                chain[-1] = (name, chain[-1][1], chain[-1][2], module)
            self._done[(module, off)] = chain

    def frames(self, module: str, offset: int) -> list[Frame]:
        """Frames (outermost first; several when inlined) of one resolved offset."""
        key = (module, int(offset))
        if key not in self._done:
            self.resolve(module, [offset])
        return self._done[key]

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
                cur.insert(0, (line.strip(), "" if file == "??" else file, int(ln) if ln.isdigit() else 0, module))
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
