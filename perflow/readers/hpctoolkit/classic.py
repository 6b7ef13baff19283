"""HPCToolkit classic databases: ``experiment.xml`` plus one ``*.metric-db`` file per thread.

``experiment.xml`` holds the tables (load modules, files, procedures, metric
databases) and the calling-context tree in ``SecCallPathProfileData``:
procedure frames ``PF``/``Pr``, loops ``L``, statements ``S`` and call sites
``C``, each with a node id ``i``. Each ``*.metric-db`` file (name
``...-<rank:6>-<thread:3>-<host>-<pid>-<gen>.metric-db``) starts with
``HPCPROF-metricdb__<version>`` and an endianness letter (24 bytes), then u32
node count and u32 metric count, then node-major f64 values (big-endian for
``b``); the row of node ``i`` is ``i - 1``. The file size must be exactly what
the header announces and the metric count that of experiment.xml's
``MetricDB`` table (otherwise a FormatError says which).

Vertices are PF/Pr (functions), L (loops) and S (statements, named
``file:line``); call sites C are not vertices (their line is kept on the
called frame as ``call_line``). In the database, the exclusive value of a
procedure or loop includes its statements and loops; perflow subtracts the
exclusive values of its statement and loop children so that exclusive values
partition the inclusive ones. Times (``CPUTIME (usec)``, ``REALTIME (usec)``,
``... (sec)``) are converted to seconds.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import numpy as np
import pandas as pd

from ...errors import FormatError
from ...kinds import classify_region
from ...pag.pag import PAG, MetricInfo
from .._common import build_profile

__all__ = ["read_classic"]

_FILE_RE = re.compile(r"-(\d+)-(\d+)-[0-9a-fA-F]+-\d+-\d+\.metric-db$")
_MAGIC = b"HPCPROF-metricdb"


def _metric_db(f: Path) -> np.ndarray:
    raw = f.read_bytes()
    if len(raw) < 32 or raw[:16] != _MAGIC:
        raise FormatError(f, f"not an HPCToolkit metric-db file (starts with {raw[:16]!r})", where="offset 0")
    endian = {b"b": ">", b"l": "<"}.get(raw[23:24])
    if endian is None:
        raise FormatError(f, f"unknown endianness mark {raw[23:24]!r}", where="offset 23")
    n_nodes, n_metrics = np.frombuffer(raw, dtype=endian + "u4", count=2, offset=24).tolist()
    want = 32 + 8 * n_nodes * n_metrics
    if len(raw) < want:
        raise FormatError(
            f,
            f"truncated: {n_nodes} nodes x {n_metrics} metrics need {want} bytes, the file has {len(raw)}",
            where=f"offset {len(raw)}",
        )
    if len(raw) > want:  # hpcviewer reads exactly this much: anything after it is damage (or a wrong header)
        raise FormatError(
            f,
            f"{len(raw) - want} bytes after the {n_nodes} nodes x {n_metrics} metrics its header announces "
            f"({want} bytes)",
            where=f"offset {want}",
        )
    return np.frombuffer(raw, dtype=endian + "f8", count=n_nodes * n_metrics, offset=32).reshape(n_nodes, n_metrics)


def _unit_factor(name: str) -> tuple[str, float] | None:
    m = re.match(r"^(CPUTIME|REALTIME|WALLCLOCK|time)\s*\((usec|sec|msec|nsec)\)", name, re.IGNORECASE)
    if not m:
        return None
    return "time", {"usec": 1e-6, "sec": 1.0, "msec": 1e-3, "nsec": 1e-9}[m[2].lower()]


def read_classic(d: Path) -> PAG:
    """Read a classic experiment.xml + metric-db database directory."""
    xml = d / "experiment.xml"
    try:
        root = ET.parse(xml).getroot()
    except ET.ParseError as exc:
        raise FormatError(xml, f"not well-formed XML ({exc})") from None
    sec = root.find("SecCallPathProfile")
    if sec is None:
        raise FormatError(xml, "no SecCallPathProfile section")
    head = sec.find("SecHeader")
    data = sec.find("SecCallPathProfileData")
    if head is None or data is None:
        raise FormatError(xml, "SecCallPathProfile lacks SecHeader or SecCallPathProfileData")
    tables = {t: {e.get("i"): e.get("n") for e in head.iter(t)} for t in ("LoadModule", "File", "Procedure")}
    dbs = sorted(head.iter("MetricDB"), key=lambda e: int(e.get("db-id", e.get("i", "0"))))
    # nodes in document order
    rows: list[dict[str, Any]] = []
    node_row: dict[int, int] = {}
    children_nonframe: dict[int, list[int]] = {}
    stack: list[tuple[ET.Element, int, str, int]] = [(e, -1, "", -1) for e in reversed(list(data)) if e.tag != "M"]
    while stack:
        e, parent, src, call_line = stack.pop()
        tag = e.tag
        nid = int(e.get("i", "-1"))
        if tag == "C" or (tag == "Pr" and not tables["Procedure"].get(e.get("n"), "")):
            kids = [(k, parent, src, int(e.get("l", "-1"))) for k in e if k.tag != "M"]
            stack.extend(reversed(kids))
            continue
        if tag in ("PF", "Pr"):
            name = tables["Procedure"].get(e.get("n"), f"<procedure {e.get('n')}>")
            src = tables["File"].get(e.get("f"), "")
            kind = "root" if name == "<program root>" else classify_region(name).value
            row = {
                "name": name,
                "kind": kind,
                "file": src,
                "line": int(e.get("l", "-1")),
                "module": tables["LoadModule"].get(e.get("lm"), ""),
                "call_line": call_line,
            }
        elif tag == "L":
            src = tables["File"].get(e.get("f"), src)
            line = int(e.get("l", "-1"))
            row = {
                "name": f"Loop@{Path(src).name}:{line}",
                "kind": "loop",
                "file": src,
                "line": line,
                "module": "",
                "call_line": -1,
            }
        elif tag == "S":
            line = int(e.get("l", "-1"))
            row = {
                "name": f"{Path(src).name}:{line}",
                "kind": "statement",
                "file": src,
                "line": line,
                "module": "",
                "call_line": -1,
            }
        else:
            continue
        row["parent"] = parent
        row["nid"] = nid
        r = len(rows)
        rows.append(row)
        node_row[nid] = r
        if tag in ("L", "S") and parent >= 0:
            children_nonframe.setdefault(parent, []).append(r)
        stack.extend(reversed([(k, r, src, -1) for k in e if k.tag != "M"]))
    if not rows:
        raise FormatError(xml, "the calling-context tree is empty")
    files = sorted(d.glob("*.metric-db"))
    if not files:
        raise FormatError(d, "no *.metric-db files beside experiment.xml")
    nid = np.array([r["nid"] for r in rows], dtype=np.int64)
    col_names: list[tuple[str, str, float]] = []
    for db in dbs:
        n = db.get("n", "")
        which = "inc" if db.get("t") == "inclusive" or n.endswith("(I)") else "exc"
        base = re.sub(r"\s*\((I|E)\)\s*$", "", n)
        tf = _unit_factor(base)
        if tf:
            col_names.append((f"time_{which}", which, tf[1]))
        else:
            col_names.append((f"{re.sub(r'[^0-9A-Za-z]+', '_', base).strip('_')}_{which}", which, 1.0))
    parent = np.array([r["parent"] for r in rows], dtype=np.int64)
    nonframe_parent = np.full(len(rows), -1, dtype=np.int64)
    for pr, kids in children_nonframe.items():
        nonframe_parent[kids] = pr
    frames = []
    for f in files:
        m = _FILE_RE.search(f.name)
        if not m:
            raise FormatError(f, "metric-db file name lacks the -<rank>-<thread>- fields")
        vals = _metric_db(f)
        if vals.shape[1] != len(col_names):
            raise FormatError(f, f"holds {vals.shape[1]} metrics, experiment.xml lists {len(col_names)}")
        if nid.max() - 1 >= vals.shape[0] or nid.min() < 1:
            raise FormatError(f, f"holds {vals.shape[0]} nodes, experiment.xml refers to node {int(nid.max())}")
        cols = {}
        for k, (name, which, factor) in enumerate(col_names):
            v = vals[nid - 1, k] * factor
            if which == "exc":
                sub = np.zeros(len(rows))
                sel = nonframe_parent >= 0
                np.add.at(sub, nonframe_parent[sel], v[sel])
                v = v - sub
            cols[name] = v
        df = pd.DataFrame({"vertex": np.arange(len(rows)), "process": int(m[1]), "thread": int(m[2]), **cols})
        frames.append(df[np.any(np.column_stack([df[c].to_numpy() != 0 for c in cols]), axis=1)])
    metrics = pd.concat(frames, ignore_index=True)
    info = {
        n: MetricInfo(n, "", "inclusive" if w == "inc" else "exclusive", f"HPCToolkit {n}")
        for n, w, _ in col_names
        if not n.startswith("time_")
    }
    vt = pd.DataFrame(rows).drop(columns=["nid"])
    vt["parent"] = parent
    procs = sorted({int(_FILE_RE.search(f.name)[1]) for f in files})
    attrs = {
        "nprocs": len(procs),
        "layout": "experiment.xml",
        "title": root.find("Header").get("n", "") if root.find("Header") is not None else "",
    }
    return build_profile(vt, metrics, info=info, attrs=attrs, complete=True, source=d)
