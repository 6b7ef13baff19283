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

import json
import re
from pathlib import Path
from typing import Any

from ..errors import FormatError
from ..kinds import VertexKind, classify_region
from ..pag.pag import PAG, MetricInfo
from ._common import TIME_UNITS, MetricRows, TreeBuilder, build_profile, head_bytes, reader_errors

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
        self.ctx: list[tuple[list[int], list[int], list[str]]] = []
        self.globals: list[tuple[list[int], list[int], list[str]]] = []

    def attr(self, aid: int) -> tuple[str, str, int]:
        a = self.attrs.get(aid)
        if a is None:
            if aid not in self.nodes:
                raise FormatError("", f"reference to undefined attribute {aid}")
            at, data, parent = self.nodes[aid]
            typ, props, p, hops = "string", 0, parent, 0
            while p >= 0 and hops < 10000:
                pat, pdata, pp = self.nodes[p]
                if p <= 7:
                    typ = _TYPES[p]
                elif pat == 10:
                    props = int(pdata)
                p, hops = pp, hops + 1
            a = (data, typ, props)
            self.attrs[aid] = a
        return a

    def value(self, aid: int, data: str) -> Any:
        typ = self.attr(aid)[1]
        if typ in ("int", "uint"):
            return int(data)
        if typ == "double":
            return float(data)
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
            chain = []
            n, hops = r, 0
            while n >= 0 and hops < 100000:
                at, d, parent = self.nodes[n]
                chain.append((at, d))
                n, hops = parent, hops + 1
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
    with open(path, encoding="utf-8", errors="strict") as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.rstrip("\n")
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
                    cali.nodes[nid] = (aid, _unesc(rec["data"]), int(rec["parent"]) if "parent" in rec else -1)
                elif kind in ("ctx", "globals"):
                    refs = [int(x) for x in _fields(rec["ref"], "=")] if rec.get("ref") else []
                    attrs = [int(x) for x in _fields(rec["attr"], "=")] if rec.get("attr") else []
                    data = [_unesc(x) for x in _fields(rec["data"], "=")] if "data" in rec else []
                    (cali.ctx if kind == "ctx" else cali.globals).append((refs, attrs, data))
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


class _Collector:
    def __init__(self, factor: float, units: dict[str, str]) -> None:
        self.tree = TreeBuilder()
        self.rows = MetricRows()
        self.outside: dict[str, float] = {}
        self.factor = factor
        self.units = units

    def add(self, path: list[tuple[str, Any]], kv: dict[str, Any], skip: set[str]) -> None:
        proc = next((int(kv[a]) for a in _RANK_ATTRS if a in kv), 0)
        thr = next((int(kv[a]) for a in _THREAD_ATTRS if a in kv), 0)
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
    for refs, attrs, data in cali.globals:
        p, kv = cali.expand(refs, attrs, data)
        meta.update(kv)
        for k, v in p:
            meta.setdefault(k, v)
    version = str(meta.get("cali.caliper.version", "2"))
    factor = TIME_UNITS[time_unit] if time_unit else (1e-6 if version[:1] in ("0", "1") else 1.0)
    units: dict[str, str] = {}
    col = _Collector(factor, units)
    records = [cali.expand(*r) for r in cali.ctx]
    # attribute.unit metadata: a node of attribute 'attribute.unit' above the attribute's definition
    unit_attr = next((i for i, (at, d, _) in cali.nodes.items() if at == 8 and d == "attribute.unit"), None)
    if unit_attr is not None and not time_unit:
        for _i, (at, d, parent) in cali.nodes.items():
            if at != 8:
                continue
            p, hops = parent, 0
            while p >= 0 and hops < 1000:
                pat, pd_, pp = cali.nodes[p]
                if pat == unit_attr:
                    units[d] = pd_
                    break
                p, hops = pp, hops + 1
    for path_, kv in records:
        col.add(path_, kv, set())
    return _finish(col, meta, "cali")


def _read_json(path: Path, time_unit: str | None) -> PAG:
    doc = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(doc, dict) or "data" not in doc or "columns" not in doc or "nodes" not in doc:
        raise FormatError(path, "not a Caliper json-split file: needs 'data', 'columns' and 'nodes'")
    cols: list[str] = list(doc["columns"])
    cmeta = doc.get("column_metadata") or [{"is_value": True}] * len(cols)
    nodes = doc["nodes"]
    is_value = [bool(m.get("is_value", False)) for m in cmeta]
    path_col = next((c for c in ("path", "source.function#callpath.address") if c in cols), None)
    if path_col is None:
        path_col = next(
            (c for c, v in zip(cols, is_value) if not v and any(n.get("column") == c and "parent" in n for n in nodes)),
            None,
        )
    factor = TIME_UNITS[time_unit] if time_unit else 1e-6
    col = _Collector(factor, {})
    paths: dict[int, list[tuple[str, Any]]] = {}

    def node_path(i: int) -> list[tuple[str, Any]]:
        if i not in paths:
            chain, n, hops = [], i, 0
            while n is not None and hops < 100000:
                nd = nodes[n]
                chain.append((str(nd.get("column", path_col)).split("#")[0], nd["label"]))
                n, hops = nd.get("parent"), hops + 1
            paths[i] = chain[::-1]
        return paths[i]

    pi = cols.index(path_col) if path_col else -1
    for ri, row in enumerate(doc["data"]):
        if len(row) != len(cols):
            raise FormatError(path, f"data row {ri} has {len(row)} values, expected {len(cols)}", where=f"data[{ri}]")
        kv = {c: x for c, x, v in zip(cols, row, is_value) if v and x is not None}
        p = node_path(int(row[pi])) if pi >= 0 and row[pi] is not None else []
        col.add(p, kv, set())
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
        if head.startswith(b"__rec="):
            try:
                return _read_cali(path, time_unit)
            except FormatError as exc:
                if not exc.path:
                    raise FormatError(path, exc.reason, exc.where) from None
                raise
        return _read_json(path, time_unit)
