"""Caliper profiles: ``.cali`` files and ``json-split`` files.

``.cali`` is Caliper's own text format: one record per line,
``__rec=node,id=...,attr=...,data=...,parent=...`` define the context tree
(attribute definitions are nodes of the attribute ``cali.attribute.name``),
``__rec=ctx,ref=...,attr=...,data=...`` are snapshot records (references to
context-tree nodes plus immediate values) and ``__rec=globals`` the run's
metadata (Adiak values, MPI size, ...). ``json-split`` (``cali-query
-q "... format json-split"``) holds a ``nodes`` table and ``data`` rows whose
non-value columns are node ids.

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

import re
from pathlib import Path
from typing import Any

from ..errors import FormatError
from ..kinds import VertexKind, classify_region
from ..pag.pag import PAG, MetricInfo
from ._common import TIME_UNITS, MetricRows, TreeBuilder, build_profile, head_bytes, load_json, reader_errors

FORMAT = "caliper"
DESCRIPTION = "Caliper profiles (.cali text format, json-split)"

_NESTED = 256
_GLOBAL = 512
_TYPES = {0: "usr", 1: "int", 2: "uint", 3: "string", 4: "addr", 5: "double", 6: "bool", 7: "type"}
_UNESC = re.compile(r"\\(.)")
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


def _fields(s: str, sep: str) -> list[str]:
    out, cur, i, n = [], [], 0, len(s)
    while i < n:
        c = s[i]
        if c == "\\" and i + 1 < n:
            cur.append(s[i : i + 2])
            i += 2
            continue
        if c == sep:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    out.append("".join(cur))
    return out


def _unesc(s: str) -> str:
    return _UNESC.sub(r"\1", s) if "\\" in s else s


class _Cali:
    """The decoded content of a .cali stream."""

    def __init__(self) -> None:
        # node id -> (attr id, raw data, parent id)
        self.nodes: dict[int, tuple[int, str, int]] = {
            0: (9, "usr", -1),
            1: (9, "int", -1),
            2: (9, "uint", -1),
            3: (9, "string", -1),
            4: (9, "addr", -1),
            5: (9, "double", -1),
            6: (9, "bool", -1),
            7: (9, "type", -1),
            8: (8, "cali.attribute.name", 3),
            9: (8, "cali.attribute.type", 7),
            10: (8, "cali.attribute.prop", 1),
            11: (8, "cali.caliper.version", 3),
        }
        self.attrs: dict[int, tuple[str, str, int]] = {}  # attr id -> (name, type, props)
        # (refs, attribute ids, values, line) of the snapshot and globals records
        self.ctx: list[tuple[list[int], list[int], list[str], int]] = []
        self.globals: list[tuple[list[int], list[int], list[str], int]] = []

    def attr(self, aid: int) -> tuple[str, str, int]:
        a = self.attrs.get(aid)
        if a is None:
            if aid not in self.nodes:
                raise FormatError("", f"reference to undefined attribute {aid}")
            at, data, parent = self.nodes[aid]
            typ, props, p = "string", 0, parent
            while p >= 0:  # parents are defined before their children (checked when read): no cycles
                pat, pdata, pp = self.nodes[p]
                if p <= 7:
                    typ = _TYPES[p]
                elif pat == 10:
                    try:
                        props = int(pdata)
                    except ValueError:
                        raise FormatError("", f"attribute {aid}: property value {pdata!r} is not a number") from None
                p = pp
            a = (data, typ, props)
            self.attrs[aid] = a
        return a

    def value(self, aid: int, data: str) -> Any:
        typ = self.attr(aid)[1]
        try:
            if typ in ("int", "uint"):
                return int(data)
            if typ == "double":
                return float(data)
        except ValueError:
            raise FormatError("", f"value {data[:40]!r} of attribute {self.attr(aid)[0]!r} is not a {typ}") from None
        if typ == "bool":
            return data.lower() in ("true", "1")
        return data

    def expand(
        self, refs: list[int], attrs: list[int], data: list[str]
    ) -> tuple[list[tuple[str, Any]], dict[str, Any]]:
        """(nested region path root->leaf, other key/values) of a record."""
        path: list[tuple[str, Any]] = []
        kv: dict[str, Any] = {}
        for r in refs:
            if r not in self.nodes:
                raise FormatError("", f"reference to undefined node {r}")
            chain = []
            n = r
            while n >= 0:  # parents are defined before their children (checked when read): no cycles
                at, d, parent = self.nodes[n]
                chain.append((at, d))
                n = parent
            for at, d in reversed(chain):
                name, _typ, props = self.attr(at)
                if at in (8, 9, 10):
                    continue
                v = self.value(at, d)
                if props & _NESTED:
                    path.append((name, v))
                else:
                    kv.setdefault(name, v)
        if len(attrs) != len(data):
            raise FormatError("", f"record has {len(attrs)} attributes but {len(data)} values")
        for a, d in zip(attrs, data):
            kv[self.attr(a)[0]] = self.value(a, d)
        return path, kv


def _parse_cali(path: Path) -> _Cali:
    cali = _Cali()
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(path, f"not UTF-8 text ({exc.reason})", where=f"byte {exc.start}") from None
    lines = text.split("\n")
    if lines[-1]:
        raise FormatError(
            path, "truncated: the last record is cut off (it does not end with a newline)", where=f"line {len(lines)}"
        )
    for lineno, line in enumerate(lines[:-1], 1):
        if not line:
            continue
        try:
            rec = {}
            for field in _fields(line, ","):
                k, _, v = field.partition("=")
                rec[k] = v
            kind = rec.get("__rec")
            if kind == "node":
                nid, aid = int(rec["id"]), int(rec["attr"])
                parent = int(rec["parent"]) if "parent" in rec else -1
                node = (aid, _unesc(rec["data"]), parent)
                if parent >= 0 and parent not in cali.nodes:
                    # Caliper writes a node's parent before the node: anything else is damage (and could loop)
                    raise FormatError(
                        path, f"node {nid}: its parent {parent} is not defined before it", f"line {lineno}"
                    )
                if cali.nodes.get(nid, node) != node:
                    raise FormatError(path, f"node {nid} is defined twice, differently", where=f"line {lineno}")
                cali.nodes[nid] = node
            elif kind in ("ctx", "globals"):
                refs = [int(x) for x in _fields(rec["ref"], "=")] if rec.get("ref") else []
                attrs = [int(x) for x in _fields(rec["attr"], "=")] if rec.get("attr") else []
                data = [_unesc(x) for x in _fields(rec["data"], "=")] if "data" in rec else []
                if len(attrs) != len(data):
                    raise FormatError(
                        path, f"record has {len(attrs)} attributes but {len(data)} values", where=f"line {lineno}"
                    )
                (cali.ctx if kind == "ctx" else cali.globals).append((refs, attrs, data, lineno))
            elif kind is None:
                raise FormatError(path, f"not a Caliper record: {line[:60]!r}", where=f"line {lineno}")
        except FormatError:
            raise
        except (KeyError, ValueError) as exc:
            raise FormatError(
                path, f"malformed {rec.get('__rec', '')} record ({exc})", where=f"line {lineno}"
            ) from None
    if not cali.ctx and not cali.globals:
        raise FormatError(path, "no Caliper snapshot or globals records (empty or truncated file)")
    return cali


def _expand(cali: _Cali, path: Path, rec: tuple[list[int], list[int], list[str], int]) -> tuple[list, dict]:
    """:meth:`_Cali.expand` of one record; its errors name the file and line."""
    try:
        return cali.expand(*rec[:3])
    except FormatError as exc:
        raise FormatError(path, exc.reason, where=f"line {rec[3]}") from None


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
    def __init__(self, factor: float, units: dict[str, str]) -> None:
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
    return build_profile(col.tree, frame, info=info, attrs=attrs)


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
    col = _Collector(factor, units)
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
    col = _Collector(factor, {})
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
