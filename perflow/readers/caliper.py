"""Caliper profiles: ``.cali`` files and ``json-split`` files.

``.cali`` is Caliper's own text format: one record per line,
``__rec=node,id=...,attr=...,data=...,parent=...`` define the context tree
(attribute definitions are nodes of the attribute ``cali.attribute.name``),
``__rec=ctx,ref=...,attr=...,data=...`` are snapshot records (references to
context-tree nodes plus immediate values) and ``__rec=globals`` the run's
metadata (Adiak values, MPI size, ...). ``json-split`` (``cali-query
-q "... format json-split"``) holds a ``nodes`` table and ``data`` rows whose
non-value columns are node ids. The ``.cali`` text is decoded by
:mod:`perflow.readers._calitext`; this module builds the PAG from its
snapshots and from json-split rows.

The calling-context tree is made of the *nested* attributes (regions such as
``function``, ``loop``, ``annotation``, ``mpi.function``; in json-split the
``path`` column or ``source.function#callpath.address``). Records without a
region are left out of the tree; their metric totals are kept in
``pag.attrs["outside_regions"]``.

Metrics: ``sum#time.duration``/``time.duration`` -> ``time_exc``,
``inclusive#sum#time.duration`` -> ``time_inc``, ``sum#region.count`` ->
``visits``; other numeric values keep their Caliper names. Time values are
converted to seconds: the attribute's ``attribute.unit`` when present, else
seconds for ``.cali`` files of Caliper 2 and later and microseconds for
json-split files and Caliper 1 (``time_unit=`` overrides). Processes are
``mpi.rank`` values (0 when absent); threads ``omp.thread.id`` /
``thread.id`` values.

Cross-rank aggregated profiles (Caliper's ``spot`` channel, as in
``LULESH`` scaling runs) hold ``min#``/``max#``/``avg#``/``sum#inclusive#...``
statistics over ranks and no ranks: they become one location (process 0)
with ``time_inc`` = the average per rank and ``time_inc_min``,
``time_inc_max``, ``time_inc_total`` beside it; ``attrs["aggregated"]`` is
True and ``attrs["nprocs"]`` the run's number of ranks (from ``mpi.world.size``
or Adiak ``jobsize``/``numranks``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import FormatError
from ..kinds import VertexKind, classify_region
from ..pag.pag import PAG, MetricInfo
from ._calitext import expand as _expand
from ._calitext import parse_cali as _parse_cali
from ._common import TIME_UNITS, MetricRows, TreeBuilder, build_profile, head_bytes, load_json, reader_errors

FORMAT = "caliper"
DESCRIPTION = "Caliper profiles (.cali text format, json-split)"

_RANK_ATTRS = ("mpi.rank", "rank")
_THREAD_ATTRS = ("omp.thread.id", "thread.id", "pthread.id")
_NPROCS_ATTRS = ("mpi.world.size", "jobsize", "numranks", "num_ranks", "nprocs", "mpi.size")


def detect(path: Path) -> bool:
    """A ``.cali`` file starting with ``__rec=``, or a JSON object with ``nodes`` and ``data``/``columns``."""
    if not path.is_file():
        return False
    head = head_bytes(path, 1 << 16)
    if head.startswith(b"__rec="):
        return True
    if head.lstrip()[:1] != b"{":
        return False
    try:
        with open(path, "rb") as f:
            f.seek(max(path.stat().st_size - (1 << 20), 0))
            tail = f.read()
    except OSError:
        return False
    both = head + tail
    return b'"data"' in both and b'"nodes"' in both and b'"columns"' in both


_TIME_BASES = ("time.duration", "time.inclusive.duration", "time.duration.ns", "time.offset")


def _canonical(name: str) -> str:
    if name in ("sum#time.duration", "time.duration", "sum#sum#time.duration"):
        return "time_exc"
    if name in ("inclusive#sum#time.duration", "inclusive#time.duration", "sum#time.inclusive.duration"):
        return "time_inc"
    if name in ("sum#region.count", "region.count"):
        return "visits"
    return name


def _is_time(name: str) -> bool:
    parts = name.split("#")
    return parts[-1] in _TIME_BASES and not any(p.endswith("count") for p in parts[:-1])


def _location_id(kv: dict[str, Any], names: tuple[str, ...], where: str) -> int:
    """The rank or thread of a record (0 when absent): a non-negative integer."""
    for a in names:
        if a in kv:
            v = kv[a]
            if isinstance(v, bool) or not isinstance(v, int | float) or v != v or v < 0 or v != int(v) or v >= 2**31:
                raise FormatError("", f"{a} is {v!r}, not a rank or thread number", where=where)
            return int(v)
    return 0


class _Collector:
    def __init__(self, factor: float, units: dict[str, str], source: Path) -> None:
        self.source = source
        self.tree = TreeBuilder()
        self.rows = MetricRows()
        self.outside: dict[str, float] = {}
        self.factor = factor
        self.units = units

    def add(self, path: list[tuple[str, Any]], kv: dict[str, Any], skip: set[str], where: str) -> None:
        proc = _location_id(kv, _RANK_ATTRS, where)
        thr = _location_id(kv, _THREAD_ATTRS, where)
        vals = {}
        for k, v in kv.items():
            if (
                k in skip
                or isinstance(v, bool)
                or not isinstance(v, int | float)
                or k in _RANK_ATTRS
                or k in _THREAD_ATTRS
            ):
                continue
            f = TIME_UNITS.get(self.units.get(k, ""), None)
            if f is None and _is_time(k):
                f = 1e-9 if k.endswith(".ns") else self.factor
            vals[k] = float(v) * (f if f is not None else 1.0)
        if not path:
            for k, v in vals.items():
                self.outside[k] = self.outside.get(k, 0.0) + v
            return
        v_id = -1
        for attr, name in path:
            kind = classify_region(str(name), "loop" if attr == "loop" else None)
            if attr.startswith("mpi"):
                kind = VertexKind.MPI
            v_id = self.tree.add(v_id, (attr, str(name)), str(name), kind=kind.value, attribute=attr)
        for k, v in vals.items():
            self.rows.add(v_id, proc, thr, k, v)


def _finish(col: _Collector, meta: dict[str, Any], fmt: str) -> PAG:
    frame = col.rows.frame()
    rename = {c: _canonical(c) for c in frame.columns if c not in ("vertex", "process", "thread")}
    info: dict[str, MetricInfo] = {}
    aggregated = "avg#inclusive#sum#time.duration" in frame.columns and "time_inc" not in rename.values()
    if aggregated:
        rename.update(
            {
                "avg#inclusive#sum#time.duration": "time_inc",
                "min#inclusive#sum#time.duration": "time_inc_min",
                "max#inclusive#sum#time.duration": "time_inc_max",
                "sum#inclusive#sum#time.duration": "time_inc_total",
            }
        )
        for k, d in (
            ("time_inc_min", "minimum over ranks"),
            ("time_inc_max", "maximum over ranks"),
            ("time_inc_total", "sum over ranks"),
        ):
            info[k] = MetricInfo(k, "s", "inclusive", f"inclusive time, {d}")
        info["time_inc"] = MetricInfo("time_inc", "s", "inclusive", "inclusive time, average per rank")
    seen: set[str] = set()
    for c, new in list(rename.items()):
        if new in seen:
            rename[c] = c
        seen.add(rename[c])
    frame = frame.rename(columns=rename)
    for c, orig in ((new, old) for old, new in rename.items()):
        if c not in info and c not in ("time_inc", "time_exc", "visits"):
            unit = "s" if _is_time(orig) else col.units.get(orig, "")
            mode = "inclusive" if "inclusive" in orig else ("count" if orig.split("#")[-1] == "count" else "other")
            info[c] = MetricInfo(c, unit, mode, f"Caliper {orig}")
    nprocs = next((int(meta[a]) for a in _NPROCS_ATTRS if a in meta and str(meta[a]).lstrip("-").isdigit()), None)
    if nprocs is None:
        nprocs = int(frame["process"].nunique()) if len(frame) else 0
    attrs: dict[str, Any] = {
        "nprocs": nprocs,
        "metadata": meta,
        "outside_regions": col.outside,
        "aggregated": aggregated,
    }
    for k, v in meta.items():
        if isinstance(v, str | int | float | bool) and k not in attrs:
            attrs[k] = v
    return build_profile(col.tree, frame, info=info, attrs=attrs, source=col.source)


def _read_cali(path: Path, time_unit: str | None) -> PAG:
    cali = _parse_cali(path)
    meta: dict[str, Any] = {}
    for rec in cali.globals:
        p, kv = _expand(cali, path, rec)
        meta.update(kv)
        for k, v in p:
            meta.setdefault(k, v)
    version = str(meta.get("cali.caliper.version", "2"))
    factor = TIME_UNITS[time_unit] if time_unit else (1e-6 if version[:1] in ("0", "1") else 1.0)
    units: dict[str, str] = {}
    col = _Collector(factor, units, path)
    records = [(_expand(cali, path, r), r[3]) for r in cali.ctx]
    # attribute.unit metadata: a node of attribute 'attribute.unit' above the attribute's definition
    unit_attr = next((i for i, (at, d, _) in cali.nodes.items() if at == 8 and d == "attribute.unit"), None)
    if unit_attr is not None and not time_unit:
        for _i, (at, d, parent) in cali.nodes.items():
            if at != 8:
                continue
            p = parent
            while p >= 0:
                pat, pd_, pp = cali.nodes[p]
                if pat == unit_attr:
                    units[d] = pd_
                    break
                p = pp
    for (path_, kv), lineno in records:
        col.add(path_, kv, set(), where=f"line {lineno}")
    return _finish(col, meta, "cali")


def _json_paths(path: Path, nodes: list[Any], path_col: str | None) -> list[list[tuple[str, Any]]]:
    """The region path (root first) of every json-split node; a parent cycle or a bad parent is a FormatError."""
    for i, nd in enumerate(nodes):
        if not isinstance(nd, dict) or "label" not in nd:
            raise FormatError(path, f"node {i} is not an object with a 'label'", where=f"nodes[{i}]")
        par = nd.get("parent")
        if par is not None and (isinstance(par, bool) or not isinstance(par, int) or not 0 <= par < len(nodes)):
            raise FormatError(path, f"node {i} has the parent {par!r}, not a node index", where=f"nodes[{i}]")
    paths: list[list[tuple[str, Any]] | None] = [None] * len(nodes)
    for i in range(len(nodes)):
        chain, n, on_chain = [], i, set()
        while n is not None and paths[n] is None:
            if n in on_chain:
                raise FormatError(
                    path,
                    f"node {n} ({nodes[n]['label']!r}) is its own ancestor: the parents form a cycle",
                    f"nodes[{n}]",
                )
            on_chain.add(n)
            chain.append(n)
            n = nodes[n].get("parent")
        base = paths[n] if n is not None else []
        for k in reversed(chain):
            nd = nodes[k]
            base = [*base, (str(nd.get("column", path_col)).split("#")[0], nd["label"])]  # type: ignore[misc]
            paths[k] = base
    return paths  # type: ignore[return-value]


def _read_json(path: Path, time_unit: str | None) -> PAG:
    doc = load_json(path, path.read_bytes())
    if not isinstance(doc, dict) or "data" not in doc or "columns" not in doc or "nodes" not in doc:
        raise FormatError(path, "not a Caliper json-split file: needs 'data', 'columns' and 'nodes'")
    cols = doc["columns"]
    nodes = doc["nodes"]
    if not isinstance(cols, list) or not all(isinstance(c, str) for c in cols):
        raise FormatError(path, "'columns' is not a list of names", where="columns")
    if not isinstance(nodes, list) or not isinstance(doc["data"], list):
        raise FormatError(path, "'nodes' and 'data' must be lists")
    cmeta = doc.get("column_metadata") or [{"is_value": True}] * len(cols)
    if not isinstance(cmeta, list) or len(cmeta) != len(cols) or not all(isinstance(m, dict) for m in cmeta):
        raise FormatError(path, f"'column_metadata' does not describe the {len(cols)} columns", where="column_metadata")
    is_value = [bool(m.get("is_value", False)) for m in cmeta]
    path_col = next((c for c in ("path", "source.function#callpath.address") if c in cols), None)
    if path_col is None:
        path_col = next(
            (
                c
                for c, v in zip(cols, is_value)
                if not v and any(isinstance(n, dict) and n.get("column") == c and "parent" in n for n in nodes)
            ),
            None,
        )
    factor = TIME_UNITS[time_unit] if time_unit else 1e-6
    col = _Collector(factor, {}, path)
    node_path = _json_paths(path, nodes, path_col)
    pi = cols.index(path_col) if path_col else -1
    for ri, row in enumerate(doc["data"]):
        if not isinstance(row, list):
            raise FormatError(path, f"data row {ri} is a {type(row).__name__}, not a list", where=f"data[{ri}]")
        if len(row) != len(cols):
            raise FormatError(path, f"data row {ri} has {len(row)} values, expected {len(cols)}", where=f"data[{ri}]")
        kv = {c: x for c, x, v in zip(cols, row, is_value) if v and x is not None}
        p: list[tuple[str, Any]] = []
        if pi >= 0 and row[pi] is not None:
            ni = row[pi]
            if isinstance(ni, bool) or not isinstance(ni, int) or not 0 <= ni < len(nodes):
                raise FormatError(path, f"data row {ri}: {path_col} is {ni!r}, not a node index", where=f"data[{ri}]")
            p = node_path[ni]
        col.add(p, kv, set(), where=f"data[{ri}]")
    meta = {k: v for k, v in doc.items() if k not in ("data", "columns", "column_metadata", "nodes")}
    return _finish(col, meta, "json-split")


def read(path: Path, *, time_unit: str | None = None, **options: Any) -> PAG:
    """Read a Caliper ``.cali`` or json-split file.

    Parameters
    ----------
    path : Path
        The file.
    time_unit : {"s", "ms", "us", "ns"}, optional
        Unit of ``time.duration`` values when the file does not say (see the
        module docstring for the default).

    Returns
    -------
    PAG
    """
    if options:
        raise TypeError(f"the Caliper reader takes time_unit only (got {', '.join(options)})")
    if time_unit is not None and time_unit not in TIME_UNITS:
        raise ValueError(f"unknown time_unit {time_unit!r}; use one of s, ms, us, ns")
    path = Path(path)
    if not path.is_file():
        raise FormatError(path, "a Caliper profile is one file (.cali or .json)")
    head = head_bytes(path, 64)
    if not head:
        raise FormatError(path, "empty file")
    with reader_errors(path, "Caliper"):
        try:
            return _read_cali(path, time_unit) if head.startswith(b"__rec=") else _read_json(path, time_unit)
        except FormatError as exc:
            if not exc.path:  # raised where the file is not known
                raise FormatError(path, exc.reason, exc.where) from None
            raise
