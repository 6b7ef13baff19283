"""CUBE4 profiles (``.cubex``) written by Score-P and Scalasca.

A ``.cubex`` file is a tar archive (optionally gzip-compressed) holding

* ``anchor.xml``: metric definitions (``<metric type="INCLUSIVE|EXCLUSIVE">``
  with ``uniq_name``, ``dtype``, ``uom``), regions, the call tree of
  ``<cnode id calleeId>`` elements, and the system tree (location groups
  = processes with a ``rank``, locations = threads with a ``rank``);
* per stored metric ``<id>.index`` (``CUBEX.INDEX``, an endianness word,
  version, index type: 0 dense / 1 sparse with a list of cnode positions:
  depth-first pre-order for EXCLUSIVE metrics, "all children of a node, then
  descend" order for INCLUSIVE metrics) and
  ``<id>.data`` (``CUBEX.DATA`` then one value per (listed cnode, location),
  or ``ZCUBEX.DATA`` with zlib-compressed segments, one per cnode).

Mapping to the PAG
------------------
* one vertex per cnode; the region gives name, file (``mod``), line
  (``begin``) and kind (paradigm/role); the cnode's call site (``mod``,
  ``line`` attributes) and ``<parameter>`` children are kept as the vertex
  attributes ``call_file``, ``call_line`` and ``parameters``. Sibling cnodes of regions with the same
  name and parameters (e.g. Score-P's sampled ``MPI_Bcast`` wrapper next to
  the instrumented ``MPI_Bcast``) are merged; their values add up (``MIN``/``MAX`` types take
  the minimum/maximum);
* processes are location-group ranks, threads are location ranks;
* ``time`` (INCLUSIVE in Score-P files) becomes ``time_inc`` and ``time_exc``
  is derived (inclusive minus the children's inclusive time, per location);
  an EXCLUSIVE ``time`` is read as ``time_exc`` and ``time_inc`` derived.
  Every other stored metric keeps its ``uniq_name`` with its unit and
  mode, except ``bytes_received``, which becomes ``bytes_recv`` (the name
  every other perflow source uses). Derived metrics (CubePL expressions) have no data and are
  not read.
"""

from __future__ import annotations

import logging
import struct
import tarfile
import zlib
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import numpy as np
import pandas as pd

from .._inflate import inflate, inflate_limit, open_inflated
from ..errors import FormatError
from ..pag.pag import PAG, MetricInfo
from ..trace.build import region_kinds
from ._common import build_profile, head_bytes, reader_errors

FORMAT = "cube"
DESCRIPTION = "CUBE4 profiles (.cubex) from Score-P and Scalasca"

log = logging.getLogger(__name__)

_DTYPES: dict[str, str] = {
    "DOUBLE": "f8",
    "MINDOUBLE": "f8",
    "MAXDOUBLE": "f8",
    "FLOAT": "f8",  # CUBE4 FLOAT values are 8-byte doubles (as Scalasca writes them)
    "INT64": "i8",
    "UINT64": "u8",
    "INTEGER": "i8",
    "INT": "i8",
    "SIGNED INT": "i8",
    "SIGNED INTEGER": "i8",
    "UNSIGNED INT": "u8",
    "UNSIGNED INTEGER": "u8",
    "INT32": "i4",
    "UINT32": "u4",
    "INT16": "i2",
    "UINT16": "u2",
    "SHORT INT": "i2",
    "SIGNED SHORT INT": "i2",
    "UNSIGNED SHORT INT": "u2",
    "INT8": "i1",
    "UINT8": "u1",
    "CHAR": "i1",
}
_UNITS = {"sec": "s", "occ": "count", "bytes": "bytes"}


#: Score-P metric names that perflow spells differently everywhere else
_RENAME = {"bytes_received": "bytes_recv"}


def detect(path: Path) -> bool:
    """A ``.cubex`` file, or a tar archive whose first member is ``anchor.xml`` or a metric file."""
    if not path.is_file():
        return False
    if path.suffix == ".cubex":
        return True
    head = head_bytes(path, 512)
    return (
        len(head) >= 262
        and head[257:262] == b"ustar"
        and head[:100].rstrip(b"\0").endswith((b"anchor.xml", b".index", b".data", b".spec"))
    )


def _members(path: Path) -> dict[str, bytes]:
    """The archive's anchor.xml and metric members; a compressed archive inflates within the limit of perflow._inflate."""
    out: dict[str, bytes] = {}
    try:
        f, kind = open_inflated(path)
        # everything read is either in the file (plain tar) or inflated within the limit
        budget = inflate_limit(path.stat().st_size) if kind else path.stat().st_size
        with f, tarfile.open(fileobj=f, mode="r|" if kind else "r:") as tf:
            for m in tf:
                if m.isfile() and (m.name == "anchor.xml" or m.name.endswith((".index", ".data"))):
                    if m.size > budget:
                        raise FormatError(
                            path,
                            f"member {m.name} announces {m.size} bytes, more than the archive can hold "
                            f"({budget} bytes{' inflated' if kind else ''})",
                            where=m.name,
                        )
                    budget -= m.size
                    x = tf.extractfile(m)
                    out[m.name] = x.read() if x is not None else b""
    except FormatError:
        raise
    except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
        raise FormatError(path, f"not a readable CUBE4 archive ({type(exc).__name__}: {exc})") from None
    if "anchor.xml" not in out:
        raise FormatError(path, "the archive has no anchor.xml (not a CUBE4 file, or truncated)")
    return out


def _index(path: Path, name: str, raw: bytes, all_ids: np.ndarray) -> tuple[np.ndarray, str]:
    if raw[:11] != b"CUBEX.INDEX":
        raise FormatError(path, f"{name}: bad magic {raw[:11]!r}, expected b'CUBEX.INDEX'", where=f"{name} offset 0")
    if len(raw) < 18:
        raise FormatError(path, f"{name}: truncated header ({len(raw)} bytes)", where=f"{name} offset {len(raw)}")
    endian = "<" if struct.unpack_from("<i", raw, 11)[0] == 1 else ">"
    if struct.unpack_from(endian + "i", raw, 11)[0] != 1:
        raise FormatError(path, f"{name}: bad endianness word", where=f"{name} offset 11")
    kind = raw[17]
    if kind == 0:
        return all_ids, endian
    if kind != 1:
        raise FormatError(path, f"{name}: unknown index type {kind}", where=f"{name} offset 17")
    (n,) = struct.unpack_from(endian + "I", raw, 18)
    if 22 + 4 * n > len(raw):
        raise FormatError(
            path, f"{name}: announces {n} cnode ids but holds {(len(raw) - 22) // 4}", where=f"{name} offset 18"
        )
    return np.frombuffer(raw, dtype=endian + "u4", count=n, offset=22).astype(np.int64), endian


def _data(path: Path, name: str, raw: bytes, dtype: np.dtype, n: int, nloc: int, endian: str) -> np.ndarray:
    want = n * nloc * dtype.itemsize
    if raw[:11] == b"ZCUBEX.DATA":
        (nseg,) = struct.unpack_from(endian + "I", raw, 11)
        if nseg > len(raw):
            raise FormatError(path, f"{name}: implausible segment count {nseg}", where=f"{name} offset 11")
        if 15 + 12 * nseg > len(raw):
            raise FormatError(path, f"{name}: segment table runs past the end", where=f"{name} offset 15")
        hdr = np.frombuffer(raw, dtype=endian + "u4", count=3 * nseg, offset=15).reshape(-1, 3)
        pos = 15 + 12 * nseg
        parts = []
        left = want  # the values never take more: a segment inflating beyond them is damage (or a bomb)
        for k, (_u, _c, size) in enumerate(hdr.tolist()):
            if pos + size > len(raw):
                raise FormatError(path, f"{name}: compressed segment runs past the end", where=f"{name} offset {pos}")
            part = inflate(
                raw[pos : pos + size],
                "zlib",
                path,
                what=f"{name} segment {k}",
                limit=left,
                why=f"more than the {n} cnodes x {nloc} locations hold (damaged data)",
            )
            left -= len(part)
            parts.append(part)
            pos += size
        body = b"".join(parts)
    elif raw[:10] == b"CUBEX.DATA":
        body = raw[10:]
    else:
        raise FormatError(path, f"{name}: bad magic {raw[:11]!r}, expected b'CUBEX.DATA'", where=f"{name} offset 0")
    if len(body) < want:
        raise FormatError(
            path,
            f"{name}: holds {len(body)} bytes of values, expected {want} "
            f"({n} cnodes x {nloc} locations x {dtype.itemsize} bytes)",
            where=f"{name} offset {len(raw)}",
        )
    return np.frombuffer(body, dtype=dtype, count=n * nloc).reshape(n, nloc)


def _check_values(path: Path, member: str, metric: str, vals: np.ndarray, *, minmax: bool) -> None:
    """Reject values no profile holds (a damaged data member): NaN, infinities in sums, negative or fractional visits."""
    bad = np.isnan(vals) if minmax else ~np.isfinite(vals)
    what = "not a number" if minmax else "not finite"
    if metric == "visits" and not bad.any():
        bad = (vals < 0) | (vals != np.round(vals)) | (vals > 2.0**53)  # counts are exact integers in a double
        what = "not a visit count"
    if bad.any():
        r, c = (int(x[0]) for x in np.nonzero(bad))
        raise FormatError(
            path,
            f"metric {metric!r}: value {float(vals[r, c])!r} at stored cnode row {r}, location {c} is {what} "
            "(the data member is damaged)",
            where=member,
        )


def _combine(df: pd.DataFrame, aggs: dict[str, str]) -> pd.DataFrame:
    """One row per (vertex, process, thread): each metric combined as its ``aggs`` entry says.

    A cnode tree may map several cnodes to one vertex; the metrics of one kind are combined
    together (one groupby reduction per kind, not one column at a time).
    """
    g = df.groupby(["vertex", "process", "thread"], sort=True)
    kinds: dict[str, list[str]] = {}
    for name, how in aggs.items():
        kinds.setdefault(how, []).append(name)
    parts = [getattr(g[names], how)() for how, names in kinds.items()]
    return pd.concat(parts, axis=1)[list(aggs)].reset_index()


def _enumerations(cnodes: list[tuple[int, int, str]]) -> tuple[np.ndarray, np.ndarray]:
    """Rows (document pre-order) of the cnodes in the two orders the index files use.

    Values of EXCLUSIVE metrics are stored in depth-first pre-order; values of
    INCLUSIVE metrics in an order that lists all children of a node together
    before descending into the first of them.
    """
    n = len(cnodes)
    children: dict[int, list[int]] = {}
    roots = []
    pos = {c[0]: i for i, c in enumerate(cnodes)}
    for i, (_cid, parent, _r) in enumerate(cnodes):
        if parent < 0:
            roots.append(i)
        else:
            children.setdefault(pos[parent], []).append(i)
    deep = np.arange(n, dtype=np.int64)  # document order is depth-first pre-order
    wide: list[int] = []
    for r in roots:
        wide.append(r)
        stack = [r]
        while stack:
            k = children.get(stack.pop(), [])
            wide.extend(k)
            stack.extend(reversed(k))
    return deep, np.asarray(wide, dtype=np.int64)


def _int(path: Path, e: ET.Element, attr: str, default: int | None = None) -> int:
    """An integer XML attribute of anchor.xml (a missing one is an error unless there is a default)."""
    v = e.get(attr)
    if v is None and default is not None:
        return default
    try:
        return int(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise FormatError(path, f"<{e.tag}> has {attr}={v!r}, not an integer", where="anchor.xml") from None


def _rank(path: Path, e: ET.Element) -> int:
    """The ``<rank>`` of a location group or location: a non-negative integer."""
    t = _text(e, "rank", "0")
    if not t.isdigit() or len(t) > 9:
        raise FormatError(path, f"<{e.tag}> has the rank {t!r}, not a process or thread number", where="anchor.xml")
    return int(t)


def _text(e: ET.Element | None, tag: str, default: str = "") -> str:
    c = e.find(tag) if e is not None else None
    return (c.text or "").strip() if c is not None and c.text else default


def read(path: Path, *, merge_siblings: bool = True, **options: Any) -> PAG:
    """Read a CUBE4 ``.cubex`` profile.

    Parameters
    ----------
    path : Path
        The ``.cubex`` file.
    merge_siblings : bool
        Merge sibling cnodes whose regions have the same name (default).

    Returns
    -------
    PAG
    """
    if options:
        raise TypeError(f"the CUBE reader takes merge_siblings only (got {', '.join(options)})")
    path = Path(path)
    if path.is_file() and path.stat().st_size == 0:
        raise FormatError(path, "empty file")
    members = _members(path)
    with reader_errors(path, "CUBE4"):
        try:
            root = ET.fromstring(members["anchor.xml"])
        except ET.ParseError as exc:
            raise FormatError(path, f"anchor.xml is not well-formed XML ({exc})", where="anchor.xml") from None
        return _build(path, root, members, merge_siblings)


def _build(path: Path, root: ET.Element, members: dict[str, bytes], merge: bool) -> PAG:
    prog = root.find("program")
    system = root.find("system")
    if prog is None or system is None or root.find("metrics") is None:
        raise FormatError(path, "anchor.xml lacks <metrics>, <program> or <system>", where="anchor.xml")
    regions = {}
    for r in prog.iter("region"):
        regions[r.get("id")] = {
            "name": _text(r, "name"),
            "role": _text(r, "role", "function"),
            "paradigm": _text(r, "paradigm", "user"),
            "file": r.get("mod", ""),
            "line": _int(path, r, "begin", -1),
        }
    # cnodes in document (pre-)order
    cnodes: list[tuple[int, int, str]] = []  # (cnode id, parent cnode id, region id)
    call_sites: list[tuple[str, int, str]] = []  # (file, line, parameters) of each cnode's call site
    stack = [(c, -1) for c in reversed(prog.findall("cnode"))]
    seen_ids: set[int] = set()
    while stack:
        c, parent = stack.pop()
        cid = _int(path, c, "id")
        if cid in seen_ids:  # values are stored by cnode position: a repeated id would misplace them
            raise FormatError(path, f"cnode id {cid} is defined twice", where="anchor.xml")
        seen_ids.add(cid)
        if c.get("calleeId") not in regions:
            raise FormatError(
                path, f"cnode {cid} calls region {c.get('calleeId')!r}, which is not defined", "anchor.xml"
            )
        cnodes.append((cid, parent, c.get("calleeId")))
        params = ",".join(f"{p.get('parkey', '')}={p.get('parvalue', '')}" for p in c.findall("parameter"))
        call_sites.append((c.get("mod", ""), _int(path, c, "line", -1), params))
        stack.extend((k, cid) for k in reversed(c.findall("cnode")))
    if not cnodes:
        raise FormatError(path, "anchor.xml defines no call-tree nodes (cnodes)", where="anchor.xml")
    ids = np.array([c[0] for c in cnodes], dtype=np.int64)
    row_of = {cid: i for i, cid in enumerate(ids.tolist())}
    reg = pd.DataFrame([regions[c[2]] for c in cnodes])
    kinds = region_kinds(reg)
    # merge siblings of the same region name
    vid = np.empty(len(cnodes), dtype=np.int64)
    seen: dict[tuple[int, str, str], int] = {}
    vrows: list[dict[str, Any]] = []
    for i, (_cid, parent, _rid) in enumerate(cnodes):
        pv = int(vid[row_of[parent]]) if parent >= 0 else -1
        key = (pv, reg["name"].iat[i], call_sites[i][2]) if merge else (pv, str(i), "")
        if key not in seen:
            seen[key] = len(vrows)
            vrows.append(
                {
                    "name": reg["name"].iat[i],
                    "kind": kinds[i],
                    "parent": pv,
                    "file": reg["file"].iat[i],
                    "line": int(reg["line"].iat[i]),
                    "paradigm": reg["paradigm"].iat[i],
                    "cnode": int(ids[i]),
                    "call_file": call_sites[i][0],
                    "call_line": call_sites[i][1],
                    "parameters": call_sites[i][2],
                }
            )
        vid[i] = seen[key]
    # locations
    procs, thrs = [], []
    locs = []
    for lg in system.iter("locationgroup"):
        pr = _rank(path, lg)
        for loc in lg.findall("location"):
            locs.append((_int(path, loc, "Id"), pr, _rank(path, loc)))
    locs.sort()
    if not locs:
        raise FormatError(path, "anchor.xml defines no locations", where="anchor.xml")
    if len({x[0] for x in locs}) != len(locs):
        raise FormatError(path, "two locations have the same Id", where="anchor.xml")
    procs = np.array([x[1] for x in locs], dtype=np.int64)
    thrs = np.array([x[2] for x in locs], dtype=np.int64)
    nloc = len(locs)
    all_ids = np.arange(len(ids), dtype=np.int64)
    deep, wide = _enumerations(cnodes)
    cols: dict[str, np.ndarray] = {}
    info: dict[str, MetricInfo] = {}
    aggs: dict[str, str] = {}
    n = len(cnodes)
    for m in root.find("metrics").iter("metric"):
        mid = m.get("id")
        uniq = _text(m, "uniq_name") or _text(m, "disp_name") or f"metric{mid}"
        mtype = (m.get("type") or "EXCLUSIVE").upper()
        dt = _text(m, "dtype", "DOUBLE").upper()
        if f"{mid}.data" not in members or f"{mid}.index" not in members:
            continue  # derived, or not stored
        if dt not in _DTYPES:
            log.warning("%s: metric %r has unsupported data type %s; skipped", path, uniq, dt)
            continue
        idx, endian = _index(path, f"{mid}.index", members[f"{mid}.index"], all_ids)
        dtype = np.dtype(endian + _DTYPES[dt]) if _DTYPES[dt][1] != "1" else np.dtype(_DTYPES[dt])
        vals = _data(path, f"{mid}.data", members[f"{mid}.data"], dtype, len(idx), nloc, endian).astype(np.float64)
        _check_values(path, f"{mid}.data", uniq, vals, minmax=dt in ("MINDOUBLE", "MAXDOUBLE"))
        full = np.zeros((n, nloc))
        if len(idx) and (idx.min() < 0 or idx.max() >= n):
            raise FormatError(
                path,
                f"{mid}.index lists cnode position {int(idx.max())}, anchor.xml defines {n} cnodes",
                where=f"{mid}.index",
            )
        full[(wide if mtype == "INCLUSIVE" else deep)[idx]] = vals
        unit = _UNITS.get(_text(m, "uom"), _text(m, "uom"))
        if uniq == "time":
            name = "time_inc" if mtype == "INCLUSIVE" else "time_exc"
        else:
            name = _RENAME.get(uniq, uniq)
        mode = "count" if uniq == "visits" else mtype.lower()
        aggs[name] = "min" if dt == "MINDOUBLE" else ("max" if dt == "MAXDOUBLE" else "sum")
        info[name] = MetricInfo(
            name,
            unit,
            mode if mode in ("inclusive", "exclusive", "count") else "other",
            _text(m, "descr") or _text(m, "disp_name"),
            combine=aggs[name],
        )
        cols[name] = full
    if not cols:
        raise FormatError(path, "no metric data files (N.index/N.data) in the archive")
    # long table: one row per (cnode row, location), merged onto vertices
    vv = np.repeat(vid, nloc)
    pp = np.tile(procs, n)
    tt = np.tile(thrs, n)
    df = pd.DataFrame({"vertex": vv, "process": pp, "thread": tt, **{k: v.reshape(-1) for k, v in cols.items()}})
    df = _combine(df, aggs)
    keep = df[list(cols)].to_numpy().any(axis=1)
    df = df[keep]
    attrs: dict[str, Any] = {a.get("key"): a.get("value") for a in root.findall("attr")}
    attrs = {"metadata": attrs, "nprocs": int(len(np.unique(procs))), "creator": attrs.get("Creator", "")}
    return build_profile(pd.DataFrame(vrows), df, info=info, attrs=attrs, source=path)
