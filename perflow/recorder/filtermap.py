"""Apply a filter file to a program before it runs: the entry addresses of the functions it excludes.

``perflow record --filter FILE`` reads the symbol tables of the program and of
the shared libraries it needs outside the system directories (``nm``,
mangled and demangled), decides for every function whether the filter
excludes it (by its demangled name with parameters, by its mangled name for
``MANGLED`` rules, and by the file that defines it, from the debug
information, when the filter has file rules), and writes the excluded ones'
link-time addresses per module to a file the recorder reads
(``PERFLOW_RECORD_FILTER``, layout in ``csrc/pfrec_inst.c``). The recorder
looks each function up once, at its first call, and never records an
excluded one.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field

from ..errors import RecordError
from .filters import Filter
from .symbols import Resolver, is_system_module

__all__ = ["FilterMap", "map_filter", "function_symbols"]

log = logging.getLogger(__name__)

_CLONE = re.compile(r"\s*\[clone [^\]]*\]$")


@dataclass
class FilterMap:
    """What a filter excludes in a program: per module, the excluded functions' addresses and names."""

    excluded: dict[str, dict[int, str]] = field(default_factory=dict)
    functions: int = 0

    def text(self) -> str:
        """The recorder's filter file: ``M <module>`` then one hexadecimal address per line."""
        out = []
        for mod, addrs in self.excluded.items():
            out.append(f"M {mod}")
            out += [f"{a:x}" for a in sorted(addrs)]
        return "\n".join(out) + "\n"

    @property
    def n_excluded(self) -> int:
        return sum(len(a) for a in self.excluded.values())


def _nm(path: str, demangle: bool) -> list[tuple[int, str]]:
    nm = shutil.which("nm")
    if nm is None:
        raise RecordError("applying a filter file needs nm (Debian package binutils)")
    argv = [nm, "-n", "--defined-only", *(["-C"] if demangle else []), path]
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=300, errors="replace")
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RecordError(f"nm failed on {path}: {exc}") from None
    rows = []
    for line in p.stdout.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3 and parts[1] in "TtWwiI" and re.fullmatch(r"[0-9a-fA-F]+", parts[0]):
            rows.append((int(parts[0], 16), parts[2]))
    return rows


def function_symbols(path: str) -> list[tuple[int, str, str]]:
    """``(address, demangled name, mangled name)`` of every function defined in a module (clone suffixes dropped)."""
    plain = _nm(path, False)
    dem = _nm(path, True)
    if len(plain) != len(dem) or any(a != b for (a, _), (b, _) in zip(plain, dem)):
        by_addr: dict[int, str] = {}
        for a, n in dem:
            by_addr.setdefault(a, n)
        dem = [(a, by_addr.get(a, n)) for a, n in plain]
    return [
        (a, _CLONE.sub("", d), m.split(".", 1)[0] if m.startswith("_Z") else m) for (a, m), (_, d) in zip(plain, dem)
    ]


def _modules(program: str) -> list[str]:
    """The program and the shared libraries it needs from outside the system directories."""
    mods = [os.path.realpath(program)]
    ldd = shutil.which("ldd")
    if ldd is None:
        return mods
    try:
        p = subprocess.run([ldd, program], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return mods
    for line in p.stdout.splitlines():
        m = re.search(r"=>\s*(\S+)\s+\(0x", line)
        if m:
            lib = os.path.realpath(m.group(1))
            if not is_system_module(lib) and "libpfrec" not in lib and lib not in mods:
                mods.append(lib)
    return mods


def map_filter(flt: Filter, program: str, resolver: Resolver | None = None) -> FilterMap:
    """Decide, for every function of ``program`` and its non-system libraries, whether ``flt`` excludes it.

    Parameters
    ----------
    flt : Filter
    program : str
        Path of the executable.
    resolver : Resolver, optional
        Symbolizer for the files of the functions (only used when the filter has file rules).

    Returns
    -------
    FilterMap
    """
    out = FilterMap()
    for mod in _modules(program):
        syms = function_symbols(mod)
        out.functions += len(syms)
        files: dict[int, str] = {}
        if flt.files and syms:
            res = resolver or Resolver()
            offs = sorted({a for a, _, _ in syms})
            res.resolve(mod, offs)
            for a in offs:
                chain = res.frames(mod, a)
                files[a] = chain[0][1] if chain else ""
        excl = {
            a: d for a, d, m in syms if flt.excludes(d, files.get(a, ""), m) and not d.startswith(("_init", "_fini"))
        }
        if excl:
            out.excluded[mod] = excl
    log.info("filter %s excludes %d of %d functions of %s", flt.source, out.n_excluded, out.functions, program)
    return out
