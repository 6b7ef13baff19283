"""The schema of a saved PAG's ``manifest.json``, checked field by field.

:func:`check_manifest` accepts exactly what :func:`perflow.pag.persist.save`
writes (version 1) and turns anything else into a
:class:`~perflow.errors.FormatError` naming the manifest file and the field
(``tables.metrics.rows``, ``metric_info.time.unit``, ...), so that a damaged
or hand-edited manifest never surfaces as a ``TypeError`` or ``KeyError``
deep in the loader. The schema:

==============  ==========================================================
field           value
==============  ==========================================================
``format``      ``"perflow-pag"``
``version``     integer, 1 to the supported version
``tables``      object: table name (``vertices``, ``metrics``, and for
                traces ``intervals``, ``messages``, ``collectives``, ``locks``,
                ``io``, ``rma``; ``comm``)
                -> ``{"file": plain file name, "rows": integer >= 0}``;
                ``vertices`` and ``metrics`` required, ``intervals`` too
                when ``has_trace``
``n_vertices``  integer, the rows of ``vertices`` (optional)
``metric_info`` object: metric -> ``{"name": str, "unit": str, "mode": str,
                "description": str}`` (``name`` required) (optional)
``attrs``       object (optional)
``has_trace``   boolean (optional, default false)
``comms``       object: communicator id (integer as text) -> list of
                integers (optional)
``comm_names``  object: communicator id (integer as text) -> str (optional)
``io_handles``  object: I/O handle id (integer as text) -> str (optional)
``locations``   object: ``process``, ``thread`` (lists of integers), ``name``,
                ``type`` (lists of strings), all of one length (optional)
``rma_windows`` object: RMA window id (integer as text) -> ``{"name": str,
                "comm": integer}`` (optional)
``rma_groups``  object: group id (integer as text) -> list of integers (the
                world ranks of its members) (optional)
==============  ==========================================================

Other top-level fields are ignored (a later version may add some).
"""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path
from typing import Any

from ..errors import FormatError
from .base import MetricInfo

__all__ = ["check_manifest", "TABLES", "REQUIRED_TABLES"]

FORMAT_NAME = "perflow-pag"
FORMAT_VERSION = 1
TABLES = ("vertices", "metrics", "intervals", "messages", "collectives", "locks", "io", "rma", "comm")
REQUIRED_TABLES = ("vertices", "metrics")
_FILE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,200}$")
_INT_KEY = re.compile(r"^-?[0-9]{1,19}$")
_INFO_FIELDS = tuple(f.name for f in fields(MetricInfo))


def _kind(v: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(v), "a number" if isinstance(v, int | float) else type(v).__name__
    )


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


class _Checker:
    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, field: str, message: str) -> FormatError:
        return FormatError(self.path, f"field {field!r}: {message}")

    def obj(self, v: Any, field: str) -> dict[str, Any]:
        if not isinstance(v, dict):
            raise self.fail(field, f"expected an object, got {_kind(v)}")
        return v

    def count(self, v: Any, field: str) -> int:
        if not _is_int(v) or v < 0:
            raise self.fail(field, f"expected an integer >= 0, got {v!r}"[:200])
        return v

    def text(self, v: Any, field: str) -> str:
        if not isinstance(v, str):
            raise self.fail(field, f"expected a string, got {_kind(v)}")
        return v

    def int_key(self, k: str, field: str, what: str = "a communicator id") -> None:
        if not _INT_KEY.match(k):
            raise self.fail(f"{field}.{k}", f"{what} must be an integer")


def check_manifest(manifest: Any, path: str | Path, *, version: int = FORMAT_VERSION) -> dict[str, Any]:
    """Check a parsed manifest against the schema; return it (unchanged) or raise.

    Parameters
    ----------
    manifest
        The parsed JSON.
    path
        The manifest file, named in errors.
    version
        The newest format version this perflow reads.

    Raises
    ------
    FormatError
        Naming ``path`` and the first field that does not fit the schema.
    """
    c = _Checker(Path(path))
    if not isinstance(manifest, dict):
        raise FormatError(c.path, f"a manifest must be a JSON object, not {_kind(manifest)}")
    if manifest.get("format") != FORMAT_NAME:
        raise FormatError(c.path, f"not a perflow PAG manifest (format {manifest.get('format')!r})"[:300])
    v = manifest.get("version")
    if not _is_int(v) or v < 1:
        raise c.fail("version", f"expected an integer >= 1, got {v!r}"[:200])
    if v > version:
        raise FormatError(c.path, f"format version {v!r} is newer than this perflow supports ({version})")
    has_trace = manifest.get("has_trace", False)
    if not isinstance(has_trace, bool):
        raise c.fail("has_trace", f"expected a boolean, got {_kind(has_trace)}")
    tables = c.obj(manifest.get("tables"), "tables")
    for name, info in tables.items():
        if name not in TABLES:
            raise c.fail(f"tables.{name}", f"unknown table (tables: {', '.join(TABLES)})")
        c.obj(info, f"tables.{name}")
        extra = sorted(set(info) - {"file", "rows"})
        if extra:
            raise c.fail(f"tables.{name}.{extra[0]}", "unknown field (fields: file, rows)")
        f = c.text(info.get("file"), f"tables.{name}.file")
        if not _FILE.match(f) or f in (".", ".."):
            raise c.fail(f"tables.{name}.file", f"{f!r} is not a plain file name in the saved PAG's folder"[:300])
        c.count(info.get("rows"), f"tables.{name}.rows")
    for need in (*REQUIRED_TABLES, *(("intervals",) if has_trace else ())):
        if need not in tables:
            raise c.fail("tables", f"lists no {need!r} table")
    if "n_vertices" in manifest:
        n = c.count(manifest["n_vertices"], "n_vertices")
        if n != tables["vertices"]["rows"]:
            raise c.fail("n_vertices", f"is {n}, but the vertices table has {tables['vertices']['rows']} rows")
    for name, info in c.obj(manifest.get("metric_info", {}), "metric_info").items():
        where = f"metric_info.{name}"
        c.obj(info, where)
        for k, val in info.items():
            if k not in _INFO_FIELDS:
                raise c.fail(f"{where}.{k}", f"unknown field (fields: {', '.join(_INFO_FIELDS)})")
            c.text(val, f"{where}.{k}")
        if "name" not in info:
            raise c.fail(where, "has no 'name'")
    c.obj(manifest.get("attrs", {}), "attrs")
    for k, members in c.obj(manifest.get("comms", {}), "comms").items():
        c.int_key(k, "comms")
        if not isinstance(members, list) or not all(_is_int(m) and -(2**63) <= m < 2**63 for m in members):
            raise c.fail(f"comms.{k}", "expected a list of 64-bit integers (the members)")
    for k, name in c.obj(manifest.get("comm_names", {}), "comm_names").items():
        c.int_key(k, "comm_names")
        c.text(name, f"comm_names.{k}")
    for k, name in c.obj(manifest.get("io_handles", {}), "io_handles").items():
        c.int_key(k, "io_handles", "an I/O handle id")
        c.text(name, f"io_handles.{k}")
    _check_locations(c, manifest.get("locations", {}))
    for k, win in c.obj(manifest.get("rma_windows", {}), "rma_windows").items():
        c.int_key(k, "rma_windows", "an RMA window id")
        c.obj(win, f"rma_windows.{k}")
        extra = sorted(set(win) - {"name", "comm"})
        if extra:
            raise c.fail(f"rma_windows.{k}.{extra[0]}", "unknown field (fields: name, comm)")
        c.text(win.get("name"), f"rma_windows.{k}.name")
        if not _is_int(win.get("comm")) or not -(2**31) <= win["comm"] < 2**31:
            raise c.fail(f"rma_windows.{k}.comm", "expected a 32-bit integer (the window's communicator)")
    for k, members in c.obj(manifest.get("rma_groups", {}), "rma_groups").items():
        c.int_key(k, "rma_groups", "a group id")
        if not isinstance(members, list) or not all(_is_int(m) and -(2**63) <= m < 2**63 for m in members):
            raise c.fail(f"rma_groups.{k}", "expected a list of 64-bit integers (the members)")
    return manifest


def _check_locations(c: _Checker, locations: Any) -> None:
    cols = c.obj(locations, "locations")
    n = None
    for k, col in cols.items():
        if k not in ("process", "thread", "name", "type"):
            raise c.fail(f"locations.{k}", "unknown column (columns: process, thread, name, type)")
        ok = isinstance(col, list) and all(
            (_is_int(v) and -(2**31) <= v < 2**31) if k in ("process", "thread") else isinstance(v, str) for v in col
        )
        if not ok:
            want = "32-bit integers" if k in ("process", "thread") else "strings"
            raise c.fail(f"locations.{k}", f"expected a list of {want}")
        if n is not None and len(col) != n:
            raise c.fail(f"locations.{k}", f"has {len(col)} entries, the other columns {n}")
        n = len(col)
