"""Caliper's ``.cali`` text format, decoded: records, attributes, the context tree, and expanded snapshots.

Used by :mod:`perflow.readers.caliper`, which turns the snapshots into a PAG.
A record names its fields in order (``__rec=node,id=..,attr=..,data=..,parent=..``);
nodes form the context tree (parents first, cycles refused); ``ctx``
records are snapshots referencing nodes and carrying immediate values.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..errors import FormatError

__all__ = ["parse_cali", "expand"]

_NESTED = 256
_TYPES = {0: "usr", 1: "int", 2: "uint", 3: "string", 4: "addr", 5: "double", 6: "bool", 7: "type"}
_UNESC = re.compile(r"\\(.)")


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


def parse_cali(path: Path) -> _Cali:
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


def expand(cali: _Cali, path: Path, rec: tuple[list[int], list[int], list[str], int]) -> tuple[list, dict]:
    """:meth:`_Cali.expand` of one record; its errors name the file and line."""
    try:
        return cali.expand(*rec[:3])
    except FormatError as exc:
        raise FormatError(path, exc.reason, where=f"line {rec[3]}") from None
