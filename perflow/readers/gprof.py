"""GNU gprof text output (``gprof prog gmon.out > prof.txt``, with or without ``-b``).

The flat profile gives each function's own time (``self seconds``) and calls;
the call graph gives, per function, its own and its children's time, how
often it was called (``5+45``: 5 calls from elsewhere, 45 recursive ones) and,
per caller and callee, the share of those that the arc accounts for. gprof
records a caller->callee *graph*: perflow builds the calling-context tree with
:func:`perflow.readers._callgraph.expand_call_graph` (the same approximation
as for cProfile; gprof itself assumes a function's time divides among its
callers in proportion to their calls).

* Arc ``p -> f`` (a parent line ``self children a/b p [i]`` of ``f``'s entry):
  ``a`` calls, ``self`` own time and ``self + children`` inclusive time of
  ``f`` under ``p``. Recursive arcs (``45 walk [5]``) and arcs inside a cycle
  carry calls only.
* Cycle entries (``<cycle 1 as a whole>``) are not vertices; members keep
  their names without the ``<cycle N>`` tag.
* Functions the call graph does not list (a flat profile only, ``gprof -p``)
  are roots with their flat-profile values.
* Metrics: ``time_inc``, ``time_exc`` (seconds), ``visits`` (calls: a
  ``<spontaneous>`` function such as ``main`` has none recorded);
  ``attrs["sample_period"]`` is gprof's ``Each sample counts as ...``.
  gprof prints no files or lines (``gprof -l`` line profiles are not read).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..errors import FormatError
from ..kinds import classify_region
from ..pag.pag import PAG
from ._callgraph import Stats, expand_call_graph
from ._common import MetricRows, TreeBuilder, build_profile, head_bytes, reader_errors

FORMAT = "gprof"
DESCRIPTION = "GNU gprof text output (flat profile and call graph)"

_NUM = r"(\d+(?:\.\d+)?)"
_FLAT = re.compile(rf"^\s*{_NUM}\s+{_NUM}\s+{_NUM}\s+(?:(\d+)\s+{_NUM}\s+{_NUM}\s+)?(\S.*?)\s*$")
_PRIMARY = re.compile(rf"^\[(\d+)\]\s+{_NUM}\s+{_NUM}\s+{_NUM}\s+(?:(\d+)(?:\+(\d+))?\s+)?(\S.*?)\s+\[(\d+)\]\s*$")
_ARC = re.compile(rf"^\s+{_NUM}\s+{_NUM}\s+(\d+)(?:/(\d+))?\s+(\S.*?)\s+\[(\d+)\]\s*$")
_CALLS_ONLY = re.compile(r"^\s+(\d+)\s+(\S.*?)\s+\[(\d+)\]\s*$")
_CYCLE_TAG = re.compile(r"\s*<cycle \d+>$")
_SAMPLE = re.compile(r"Each sample counts as ([\d.]+) (\w+)")
_TOTAL = re.compile(r"granularity:.*? of ([\d.]+) seconds")


def detect(path: Path) -> bool:
    """Text that starts with gprof's ``Flat profile:`` or ``Call graph`` heading."""
    if not path.is_file():
        return False
    head = head_bytes(path, 2048).lstrip()
    return head.startswith((b"Flat profile:", b"\t\t     Call graph", b"Call graph")) or (
        head.startswith(b"\t") and b"Call graph" in head[:64]
    )


def _clean(name: str) -> str:
    return _CYCLE_TAG.sub("", name).strip()


def _parse(path: Path, text: str) -> tuple[dict[str, tuple[float, int]], Stats, dict[str, Any]]:
    """(flat: name -> (self s, calls), call-graph stats, metadata)."""
    lines = text.replace("\r\n", "\n").split("\n")  # not splitlines: form feeds (page breaks) are no lines
    flat: dict[str, tuple[float, int]] = {}
    stats: Stats = {}
    meta: dict[str, Any] = {}
    section = ""
    entry: list[tuple[int, str]] = []
    started = False
    after_sep = False  # just after the header or a separator: the table goes on
    indexes: dict[int, tuple[str, int]] = {}  # [index] -> (function, line of its entry)
    refs: list[tuple[int, str, int]] = []  # [index] named on an arc line, the name, the line
    cumulative = 0.0

    def flush() -> None:
        prim = [i for i, (_, ln) in enumerate(entry) if _PRIMARY.match(ln)]
        if len(prim) != 1:
            if entry:
                raise FormatError(
                    path, "a call-graph entry without exactly one [index] line", where=f"line {entry[0][0]}"
                )
            return
        k = prim[0]
        no, ln = entry[k]
        m = _PRIMARY.match(ln)
        assert m is not None
        name = _clean(m[7])
        indexes[int(m[8])] = (name, no)
        if name.startswith("<cycle") and name.endswith("as a whole>"):
            entry.clear()
            return
        called = int(m[5]) if m[5] else 0
        rec = int(m[6]) if m[6] else 0
        tt, ch = float(m[3]), float(m[4])
        callers: dict[str, tuple[float, float, float, float]] = {}
        outside = 0  # calls from callers outside the function's cycle (arcs with times)
        for lno, pl in entry:
            a = _ARC.match(pl) or _CALLS_ONLY.match(pl)
            if a is not None and lno != no:
                refs.append((int(a[a.re.groups]), _clean(a[a.re.groups - 1]), lno))
            if a is not None and a.re is _ARC and a[4] and int(a[3]) > int(a[4]):
                raise FormatError(path, f"an arc of {a[3]} calls out of {a[4]} in all", where=f"line {lno}")
        for lno, pl in entry[:k]:
            a = _ARC.match(pl)
            if a:
                c = float(a[3])
                callers[_clean(a[5])] = (c, c, float(a[1]), float(a[1]) + float(a[2]))
                outside += int(a[3])
                continue
            c2 = _CALLS_ONLY.match(pl)
            if c2:
                c = float(c2[1])
                callers[_clean(c2[2])] = (c, c, 0.0, 0.0)
                continue
            if pl.strip() != "<spontaneous>":
                raise FormatError(path, f"cannot read this caller line: {pl.strip()!r}", where=f"line {lno}")
        stats[name] = (outside or called, called + rec, tt, tt + ch, callers)
        entry.clear()

    for no, line in enumerate(lines, 1):
        s = line.strip()
        if s.startswith("Flat profile:"):
            section = "flat"
            continue
        if s.startswith("Call graph"):
            if section == "graph":
                flush()
            section = "graph"
            started = False
            continue
        if s.startswith("Index by function name") or s.startswith("Copyright"):
            section = ""
            continue
        if section == "flat":
            ms = _SAMPLE.search(line)
            if ms:
                meta["sample_period"] = float(ms[1])
                continue
            m = _FLAT.match(line)
            if m and not s.startswith(("%", "time")):
                flat[_clean(m[7])] = (float(m[3]), int(m[4]) if m[4] else 0)
                cumulative += float(m[3])
                if abs(float(m[2]) - cumulative) > 0.011 + 0.005 * len(flat):  # each value rounded to 0.01
                    raise FormatError(
                        path,
                        f"cumulative seconds {m[2]} are not the running sum of the self seconds ({cumulative:.2f})",
                        where=f"line {no}",
                    )
            elif flat and s and not m:
                section = ""  # the explanations that follow the table
        elif section == "graph":
            mt = _TOTAL.search(line)
            if mt:
                meta["total_time"] = float(mt[1])
                continue
            if s.startswith("index"):
                started = after_sep = True
                continue
            if not started:
                continue
            if s.startswith("-----"):
                flush()
                after_sep = True
                continue
            if not s:
                after_sep = False
                continue
            if _PRIMARY.match(line) or _ARC.match(line) or _CALLS_ONLY.match(line) or s == "<spontaneous>":
                entry.append((no, line))
            elif entry or after_sep:  # inside an entry: damage, not the explanations
                raise FormatError(path, f"cannot read this call-graph line: {s[:80]!r}", where=f"line {no}")
            else:
                section = ""  # the explanations after the table (after a blank line)
    if section == "graph":
        flush()
    for idx, name, lno in refs:
        if idx not in indexes:
            raise FormatError(path, f"{name} [{idx}] has no entry of its own in the call graph", where=f"line {lno}")
        if indexes[idx][0] != name and not name.startswith("<cycle"):
            raise FormatError(
                path, f"[{idx}] names {name} here but {indexes[idx][0]} in its entry", where=f"line {lno}"
            )
    return flat, stats, meta


def _label(name: str) -> tuple[str, str, int, str]:
    return name, "", -1, classify_region(name).value


def read(path: Path | str, *, max_vertices: int = 100_000, **options: Any) -> PAG:
    """Read gprof's text output.

    Parameters
    ----------
    path : path-like
        The file ``gprof`` printed (full or ``-b`` brief).
    max_vertices : int
        Stop expanding the calling-context tree after this many vertices.

    Returns
    -------
    PAG
    """
    if options:
        raise TypeError(f"the gprof reader takes max_vertices only (got {', '.join(options)})")
    path = Path(path)
    with reader_errors(path, "gprof"):
        text = path.read_bytes().decode("utf-8", errors="replace")
        flat, stats, meta = _parse(path, text)
        if not flat and not stats:
            raise FormatError(path, "no flat-profile rows and no call-graph entries: not gprof output, or empty")
        for name, (self_s, calls) in flat.items():
            if name not in stats:
                stats[name] = (calls, calls, self_s, self_s, {})
        tree, rows = TreeBuilder(), MetricRows()
        expand_call_graph(stats, tree, rows, 0, max_vertices=max_vertices, label=_label, what="gprof")
        attrs = {
            "nprocs": 1,
            "metadata": meta,
            "approximation": "calling contexts derived from gprof's caller->callee graph",
        }
        if "sample_period" in meta:
            attrs["sample_period"] = meta["sample_period"]
        # inclusive times are re-derived from the exclusive ones: the tool's are rounded (and, for gprof2dot,
        # include the nodes it dropped), so they need not add up over the tree
        frame = rows.frame().drop(columns=["time_inc"])
        return build_profile(tree, frame, attrs=attrs, complete=True, source=path)
