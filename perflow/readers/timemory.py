"""timemory's hierarchical JSON (``<component>.tree.json``, e.g. ``wall.tree.json``).

``{"timemory": {COMPONENT: {"properties", "unit_repr", "mpi": [rank, ...]}}}``
(``"graph"`` instead of ``"mpi"`` without MPI, ``"upcxx"``/``"upc"`` for
UPC++ ranks after the MPI ones). A rank is a list of trees; a tree node is
``{"node": {"prefix", "tid", "pid", "inclusive": {"entry", "stats"},
"exclusive": {...}}, "children": [...]}``.

* Vertices: one per call path of prefixes. A prefix ``func@file:line/tag``
  gives name ``tag`` (``func`` when there is no tag) with ``file`` and
  ``line``; ``func/tag`` gives ``tag``; ``label [func/file:line]`` gives
  ``label``; any other prefix is the name. The vertex attributes
  ``function`` and ``prefix`` keep the enclosing function and the prefix;
  names with ``loop`` in them are loops. timemory's root node (``hash`` 0, ``unknown-hash=0``) is not a
  vertex: its children are the roots.
* Processes: the position in the ``mpi`` list (then ``upcxx``). Threads:
  each distinct ``tid`` list of a process, numbered from 0 in order of
  appearance; a node timemory merged over several threads (``tid: [1, 2]``)
  is one location (``attrs["thread_ids"][str(process)][thread]`` is
  timemory's ``tid`` list).
* Metrics, from each entry's ``repr_data`` (the value in ``unit_repr``):
  ``wall_clock`` gives ``time_inc``/``time_exc`` in seconds; other components
  give ``<id>_inc``/``<id>_exc`` (``cpu_clock_inc``, ``peak_rss_exc``, ...:
  time units converted to seconds, others as timemory's ``unit_repr``; a
  vector-valued component one pair per label). ``visits`` is the number of
  measurements (``stats.count``; the entry's ``laps`` when there are no
  statistics) of the time component. Without ``wall_clock`` the first time
  component gives ``time_inc``/``time_exc``.
* Not read: timemory's flat ``<component>.json`` (no tree: read the
  ``.tree.json`` beside it), text and ``.txt`` reports, statistics other than
  the count (min, max, stddev).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import FormatError
from ..kinds import classify_region
from ..pag.pag import PAG, MetricInfo
from ._common import TIME_UNITS, MetricRows, TreeBuilder, build_profile, head_bytes, load_json, reader_errors

FORMAT = "timemory"
DESCRIPTION = "timemory hierarchical JSON (<component>.tree.json)"

_AT = re.compile(r"^(?P<func>[^@\s]+)@(?P<file>.+?):(?P<line>\d+)(?:/(?P<tail>.*))?$")
_TAGGED = re.compile(r"^(?P<func>[A-Za-z_]\w*)/(?P<tail>\S.*)$")
_BRACKET = re.compile(r"^(?P<head>.+?)\s+\[(?P<func>[^\]/]+)/(?P<file>[^\]]+):(?P<line>\d+)\]$")
_UNIT_ALIASES = {"sec": "s", "msec": "ms", "usec": "us", "nsec": "ns"}


def detect(path: Path) -> bool:
    """A JSON object whose first key is ``timemory``."""
    if not path.is_file():
        return False
    head = head_bytes(path, 256).lstrip()
    return head[:1] == b"{" and re.match(rb'\{\s*"timemory"\s*:', head) is not None


def _split_prefix(prefix: str) -> tuple[str, str, str, int]:
    """(name, function, file, line) of a timemory prefix."""
    m = _AT.match(prefix)
    if m:
        return (m["tail"] or m["func"]), m["func"], m["file"], int(m["line"])
    m = _BRACKET.match(prefix)
    if m:
        return m["head"].strip(), m["func"], m["file"], int(m["line"])
    m = _TAGGED.match(prefix)
    if m:
        return m["tail"], m["func"], "", -1
    return prefix, "", "", -1


def _time_scale(unit: str) -> float | None:
    return TIME_UNITS.get(_UNIT_ALIASES.get(unit, unit))


def _labels(comp: Mapping[str, Any], n: int, cid: str) -> list[str]:
    t = comp.get("type")
    if isinstance(t, list) and len(t) == n:
        return [re.sub(r"\W+", "_", str(x)).strip("_") or f"{cid}{i}" for i, x in enumerate(t)]
    return [f"{cid}_{i}" for i in range(n)]


def read(path: Path | str, **options: Any) -> PAG:
    """Read a timemory ``.tree.json`` file.

    Parameters
    ----------
    path : path-like
        The file.

    Returns
    -------
    PAG
    """
    if options:
        raise TypeError(f"the timemory reader takes no options (got {', '.join(options)})")
    path = Path(path)
    with reader_errors(path, "timemory"):
        doc = load_json(path, path.read_bytes())
        comps = doc.get("timemory") if isinstance(doc, Mapping) else None
        if not isinstance(comps, Mapping) or not comps:
            raise FormatError(path, "no 'timemory' object of components")
        return _build(path, comps)


def _component_info(key: str, comp: Mapping[str, Any]) -> tuple[str, str, float | None]:
    props = comp.get("properties") if isinstance(comp.get("properties"), Mapping) else {}
    cid = str(props.get("id") or key).lower().replace("tim::", "").replace("component::", "")
    unit = str(comp.get("unit_repr") or "")
    return cid, unit, _time_scale(unit)


def _build(path: Path, comps: Mapping[str, Any]) -> PAG:
    infos = {k: _component_info(k, v) for k, v in comps.items() if isinstance(v, Mapping)}
    if not infos:
        raise FormatError(path, "the 'timemory' object holds no component")
    primary = next((k for k, (cid, _, s) in infos.items() if cid == "wall_clock" and s), None)
    primary = primary or next((k for k, (_, _, s) in infos.items() if s), None)
    tree, rows = TreeBuilder(), MetricRows()
    info: dict[str, MetricInfo] = {}
    thread_ids: dict[int, dict[tuple[int, ...], int]] = {}
    found_tree = False
    for key, comp in comps.items():
        if key not in infos:
            continue
        cid, unit, scale = infos[key]
        if key == primary:
            names = ("time_inc", "time_exc")
        else:
            names = (f"{cid}_inc", f"{cid}_exc")
            for n, mode in zip(names, ("inclusive", "exclusive")):
                info[n] = MetricInfo(n, "s" if scale else unit, mode, f"timemory {cid} ({mode})")
        ranks: list[tuple[int, Any]] = []
        for part in ("mpi", "graph", "upcxx", "upc"):
            block = comp.get(part)
            if isinstance(block, list):
                ranks.extend((len(ranks), r) for r in block)
        if not ranks:
            if "ranks" in comp:
                raise FormatError(
                    path,
                    f"component {key!r} is timemory's flat JSON (no call tree): read the .tree.json file timemory "
                    "writes beside it",
                )
            continue
        found_tree = True
        for proc, rank in ranks:
            trees = rank if isinstance(rank, list) else [rank]
            tmap = thread_ids.setdefault(proc, {})
            for t in trees:
                _walk(path, t, tree, rows, proc, tmap, names, scale or 1.0, key == primary, cid, comp, info)
    if not found_tree:
        raise FormatError(path, "no component holds a call tree ('mpi' or 'graph' lists)")
    if not len(tree):
        raise FormatError(path, "the call trees hold no nodes")
    attrs: dict[str, Any] = {
        "nprocs": max(len(thread_ids), 1),
        "components": [infos[k][0] for k in infos],
        "thread_ids": {str(p): [list(tid) for tid in m] for p, m in thread_ids.items()},
    }
    if primary is None:
        attrs["approximation"] = "no time component: time_inc/time_exc are zero"
    frame = rows.frame()
    for c in ("time_inc", "time_exc"):
        if c not in frame.columns:
            frame[c] = 0.0
    return build_profile(tree, frame, info=info, attrs=attrs, complete=False, source=path)


def _num(x: Any) -> float:
    if isinstance(x, bool) or not isinstance(x, int | float):
        raise ValueError(f"expected a number, got {x!r}")
    return float(x)


def _walk(
    path: Path,
    root: Any,
    tree: TreeBuilder,
    rows: MetricRows,
    proc: int,
    tmap: dict[tuple[int, ...], int],
    names: tuple[str, str],
    scale: float,
    primary: bool,
    cid: str,
    comp: Mapping[str, Any],
    info: dict[str, MetricInfo],
) -> None:
    stack: list[tuple[Any, int]] = [(root, -1)]
    while stack:
        item, parent = stack.pop()
        if not isinstance(item, Mapping) or not isinstance(item.get("node"), Mapping):
            raise FormatError(path, f"a tree node of process {proc} is not an object with 'node'")
        node = item["node"]
        children = item.get("children") or []
        if not isinstance(children, list):
            raise FormatError(path, f"'children' of {node.get('prefix')!r} (process {proc}) is not a list")
        if node.get("hash") == 0 and parent < 0:  # timemory's root: its children are the roots
            stack.extend((c, -1) for c in reversed(children))
            continue
        prefix = node.get("prefix")
        if not isinstance(prefix, str):
            raise FormatError(path, f"a node of process {proc} has no text 'prefix'")
        name, function, file, line = _split_prefix(prefix)
        kind = classify_region(name, "loop" if "loop" in name.lower() else None).value
        v = tree.add(parent, prefix, name, file=file, line=line, kind=kind, function=function, prefix=prefix)
        tid = node.get("tid", [0])
        key = tuple(int(x) for x in tid) if isinstance(tid, list) else (int(tid),)
        thread = tmap.setdefault(key, len(tmap))
        where = f"node {prefix!r} (process {proc})"
        for part, mname in (("inclusive", names[0]), ("exclusive", names[1])):
            block = node.get(part)
            if not isinstance(block, Mapping) or not isinstance(block.get("entry"), Mapping):
                raise FormatError(path, f"{where} has no {part} entry")
            val = block["entry"].get("repr_data")
            if isinstance(val, list):
                labels = _labels(comp, len(val), cid)
                for lab, x in zip(labels, val):
                    n = f"{lab}_{'inc' if part == 'inclusive' else 'exc'}"
                    info.setdefault(n, MetricInfo(n, str(comp.get("unit_repr") or ""), part, f"timemory {cid} {lab}"))
                    rows.add(v, proc, thread, n, _num(x))
                continue
            try:
                rows.add(v, proc, thread, mname, _num(val) * scale)
            except ValueError as exc:
                raise FormatError(path, f"{where}: {part} value: {exc}") from None
        if primary:
            inc = node["inclusive"]
            stats = inc.get("stats") if isinstance(inc.get("stats"), Mapping) else {}
            count = stats.get("count") or inc["entry"].get("laps") or 0
            rows.add(v, proc, thread, "visits", _num(count))
        stack.extend((c, v) for c in reversed(children))
