"""Write a PAG as a CUBE4 file (``.cubex``) that Cube, pycubexr and perflow's CUBE reader open.

The file is a tar archive of ``anchor.xml`` (the metric tree, the regions and
the call tree, the system tree of processes and threads) and, per metric, a
``N.index`` (the call-tree nodes it has values for) and ``N.data`` (one value
per listed node and location). Every metric is written ``EXCLUSIVE`` along the
call tree, the way Scalasca writes its trace analysis.

* **Call tree**: one cnode per PAG vertex, one region per distinct (name,
  file, line, paradigm, role); the vertex's kind and role give Cube's
  paradigm and role.
* **System tree**: one location group ("MPI Rank N") per process, one
  location per (process, thread).
* **Metrics**: for a trace-backed PAG (``analysis``, by default when the PAG
  has a trace) Scalasca's trace-analysis metric tree with perflow's numbers
  (:func:`perflow.trace.cubemetrics.scalasca_metrics`: ``time``, ``visits``,
  the wait states, ``critical_path``, the delay costs); otherwise ``time``
  (the exclusive time) and ``visits``. Every other metric of the PAG (hardware
  counters, bytes, ...) follows as a top-level metric under its own name; a
  metric whose values are inclusive (counter deltas) is made exclusive first.
"""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import numpy as np
import pandas as pd

from .._atomic import write_bytes
from ..errors import PAGError
from ..pag.pag import PAG
from ..trace.cubemetrics import METRICS, CubeMetric, scalasca_metrics

__all__ = ["write_cube", "cube_archive"]

#: the PAG metrics that the ``time`` and ``visits`` metrics already are
_BASE = ("time_inc", "time_exc", "visits")
#: Cube's paradigm for each perflow vertex kind
_PARADIGM = {"mpi": "mpi", "openmp": "openmp", "thread": "pthread", "measurement": "measurement", "io": "io",
             "gpu": "cuda"}  # fmt: skip


def _text(parent: ET.Element, tag: str, text: Any) -> ET.Element:
    e = ET.SubElement(parent, tag)
    e.text = str(text)
    return e


def _preorder(parent: np.ndarray) -> np.ndarray:
    """Vertex ids in depth-first pre-order (children in id order)."""
    n = len(parent)
    children: dict[int, list[int]] = {}
    roots = []
    for v, p in enumerate(parent.tolist()):
        (children.setdefault(p, []) if p >= 0 else roots).append(v)
    out: list[int] = []
    stack = list(reversed(roots))
    while stack:
        v = stack.pop()
        out.append(v)
        stack.extend(reversed(children.get(v, [])))
    if len(out) != n:  # pragma: no cover - a PAG's tree has no cycles
        raise ValueError("the call tree is not a tree")
    return np.asarray(out, dtype=np.int64)


def _metric_table(pag: PAG, analysis: bool, settings: Any) -> tuple[list[Any], pd.DataFrame]:
    """The metrics to write (definitions in tree order) and their values (``metric``, vertex, process, thread)."""
    m = pag.metrics.reset_index()
    if analysis:
        defs: list[Any] = list(METRICS)
        values = scalasca_metrics(pag, settings)
        values["metric"] = values["metric"].astype(str)
    else:
        defs = [d for d in METRICS if d.name in ("time", "visits")]
        values = pd.concat(
            [
                pd.DataFrame(
                    {"metric": "time", **{k: m[k] for k in ("vertex", "process", "thread")}, "value": m["time_exc"]}
                ),  # fmt: skip
                pd.DataFrame(
                    {"metric": "visits", **{k: m[k] for k in ("vertex", "process", "thread")}, "value": m["visits"]}
                ),  # fmt: skip
            ],
            ignore_index=True,
        )
    taken = {d.name for d in defs}
    if analysis:  # Scalasca's bytes_* and omp_management already hold these
        taken |= {"bytes_sent", "bytes_recv", "omp_join"}
    extra = []
    for col in m.columns:
        if col in ("vertex", "process", "thread", *_BASE) or col in taken:
            continue
        info = pag.metric_info.get(col)
        vals = m[col].to_numpy(dtype=np.float64)
        if info is not None and info.mode == "inclusive":
            vals = _exclusive(pag, m, vals)
        unit = {"s": "sec", "bytes": "bytes"}.get(info.unit if info else "", "occ")
        desc = (info.description if info else "") or col
        defs.append(CubeMetric(col, col, None, unit, desc))
        extra.append(pd.DataFrame({"metric": col, **{k: m[k] for k in ("vertex", "process", "thread")},
                                   "value": vals}))  # fmt: skip
    if extra:
        values = pd.concat([values, *extra], ignore_index=True)
    return defs, values[values["value"].to_numpy() != 0]


def _exclusive(pag: PAG, m: pd.DataFrame, vals: np.ndarray) -> np.ndarray:
    """Inclusive per-row values minus the children's (rows of the same process and thread)."""
    parent = pag.vertex_table["parent"].to_numpy().astype(np.int64)
    v = m["vertex"].to_numpy().astype(np.int64)
    key = pd.MultiIndex.from_arrays([v, m["process"].to_numpy(), m["thread"].to_numpy()])
    par = parent[v]
    pkey = pd.MultiIndex.from_arrays([par, m["process"].to_numpy(), m["thread"].to_numpy()])
    pos = key.get_indexer(pkey)
    child = np.zeros(len(vals))
    ok = (par >= 0) & (pos >= 0)
    np.add.at(child, pos[ok], vals[ok])
    return vals - child


def cube_archive(pag: PAG, *, analysis: bool | None = None, settings: Any = None) -> bytes:
    """The ``.cubex`` archive of ``pag`` as bytes (see :func:`write_cube`)."""
    analysis = pag.trace is not None if analysis is None else bool(analysis)
    if analysis and pag.trace is None:
        raise PAGError("a CUBE file with the trace analysis needs a trace-backed PAG (read a trace)")
    vt = pag.vertex_table
    n = len(vt)
    order = _preorder(vt["parent"].to_numpy().astype(np.int64))
    cnode_of = np.empty(n, dtype=np.int64)
    cnode_of[order] = np.arange(n)
    locs = pag.metrics.index.to_frame(index=False)[["process", "thread"]].drop_duplicates()
    if pag.trace is not None and pag.trace.locations is not None and len(pag.trace.locations):
        tl = pd.DataFrame(pag.trace.locations)[["process", "thread"]]
        locs = pd.concat([locs, tl], ignore_index=True).drop_duplicates()
    locs = locs.astype(np.int64).sort_values(["process", "thread"]).reset_index(drop=True)
    defs, values = _metric_table(pag, analysis, settings)
    root = ET.Element("cube", version="4.4")
    ET.SubElement(root, "attr", key="CUBE_CT_AGGR", value="SUM")
    ET.SubElement(root, "attr", key="Creator", value="perflow")
    doc = ET.SubElement(root, "doc")
    ET.SubElement(
        ET.SubElement(doc, "mirrors"), "murl"
    ).text = "https://apps.fz-juelich.de/scalasca/releases/scalasca/2.6/help/"
    xm = ET.SubElement(root, "metrics")
    mid = {d.name: i for i, d in enumerate(defs)}
    elem: dict[str, ET.Element] = {}
    for d in defs:
        par = elem.get(d.parent) if d.parent else None
        e = ET.SubElement(par if par is not None else xm, "metric", id=str(mid[d.name]), type="EXCLUSIVE")
        _text(e, "disp_name", d.display)
        _text(e, "uniq_name", d.name)
        _text(e, "dtype", "INTEGER" if d.integer else "DOUBLE")
        _text(e, "uom", d.unit)
        _text(e, "url", f"@mirror@scalasca_patterns.html#{d.name}" if d.parent or d.name in _scalasca() else "")
        _text(e, "descr", d.description)
        elem[d.name] = e
    prog = ET.SubElement(root, "program")
    names = vt["name"].astype(str).to_numpy()
    files = vt["file"].astype(str).to_numpy() if "file" in vt.columns else np.full(n, "")
    lines = vt["line"].to_numpy().astype(np.int64) if "line" in vt.columns else np.full(n, -1)
    kinds = vt["kind"].astype(str).to_numpy() if "kind" in vt.columns else np.full(n, "function")
    roles = vt["role"].astype(str).to_numpy() if "role" in vt.columns else np.full(n, "function")
    rkey = pd.Series(list(zip(names, files, lines.tolist(), kinds, roles)))
    rcode, runiq = pd.factorize(rkey)
    for r, (name, f, line, kind, role) in enumerate(runiq):
        e = ET.SubElement(prog, "region", id=str(r), mod=f, begin=str(line), end="-1")
        _text(e, "name", name)
        _text(e, "mangled_name", name)
        _text(e, "paradigm", _PARADIGM.get(kind, "user"))
        _text(e, "role", role if role and role != "nan" else "function")
        _text(e, "url", "")
        _text(e, "descr", "")
    parent = vt["parent"].to_numpy().astype(np.int64)
    cn: dict[int, ET.Element] = {}
    for v in order.tolist():
        p = parent[v]
        e = ET.SubElement(cn[p] if p >= 0 else prog, "cnode", id=str(cnode_of[v]), calleeId=str(rcode[v]))
        cn[v] = e
    system = ET.SubElement(root, "system")
    machine = ET.SubElement(system, "systemtreenode", Id="0")
    _text(machine, "name", "machine")
    _text(machine, "class", "machine")
    node = ET.SubElement(machine, "systemtreenode", Id="1")
    _text(node, "name", "node")
    _text(node, "class", "node")
    loc_id: dict[tuple[int, int], int] = {}
    for gi, (p, g) in enumerate(locs.groupby("process", sort=True)):
        lg = ET.SubElement(node, "locationgroup", Id=str(gi))
        _text(lg, "name", f"MPI Rank {p}")
        _text(lg, "rank", p)
        _text(lg, "type", "process")
        for t in g["thread"].tolist():
            i = len(loc_id)
            loc_id[(p, t)] = i
            e = ET.SubElement(lg, "location", Id=str(i))
            _text(e, "name", "Master thread" if t == 0 else f"Thread {t}")
            _text(e, "rank", t)
            _text(e, "type", "thread")
    anchor = b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="utf-8")
    files_out: dict[str, bytes] = {"anchor.xml": anchor}
    nloc = len(loc_id)
    lk = pd.MultiIndex.from_frame(locs)
    for d in defs:
        sel = values[values["metric"].to_numpy() == d.name]
        c = cnode_of[sel["vertex"].to_numpy().astype(np.int64)]
        li = lk.get_indexer(pd.MultiIndex.from_arrays([sel["process"].to_numpy(), sel["thread"].to_numpy()]))
        used = np.unique(c) if len(c) else np.zeros(1, np.int64)  # an empty metric still lists one node
        mat = np.zeros((len(used), nloc))
        np.add.at(mat, (np.searchsorted(used, c), li), sel["value"].to_numpy(dtype=np.float64))
        idx = b"CUBEX.INDEX" + np.array([1], "<i4").tobytes() + np.array([0], "<i2").tobytes() + b"\x01"
        idx += np.array([len(used)], "<u4").tobytes() + used.astype("<u4").tobytes()
        data = mat.round().astype("<i8").tobytes() if d.integer else mat.astype("<f8").tobytes()
        files_out[f"{mid[d.name]}.index"] = idx
        files_out[f"{mid[d.name]}.data"] = b"CUBEX.DATA" + data
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        for name, blob in files_out.items():
            ti = tarfile.TarInfo(name)
            ti.size = len(blob)
            ti.mode = 0o644
            tf.addfile(ti, io.BytesIO(blob))
    return buf.getvalue()


def _scalasca() -> set[str]:
    return {m.name for m in METRICS}


def write_cube(pag: PAG, path: str | os.PathLike[str], *, analysis: bool | None = None, settings: Any = None) -> Path:
    """Write ``pag`` as a CUBE4 file (see the module docstring); returns the path written.

    Parameters
    ----------
    pag : PAG
    path : str or os.PathLike
        The file to write (``.cubex`` is added when it has another suffix).
    analysis : bool, optional
        Write Scalasca's trace-analysis metrics (default: when ``pag`` has a trace).
    settings : perflow.trace.cubemetrics.ScalascaSettings, optional
        Settings of the analyses (Scalasca's rules by default).
    """
    out = Path(path)
    if out.suffix != ".cubex":
        out = out.with_name(out.name + ".cubex")
    write_bytes(out, cube_archive(pag, analysis=analysis, settings=settings))
    return out
