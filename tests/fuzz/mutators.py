"""Mutators for the reader fuzz harness: each damages a copy of a sample in place and says what it did.

A mutator is ``fn(sample, rng) -> str`` where ``sample`` is a
:class:`~tests.fuzz.harness.Sample` (its ``root`` is a private, writable copy)
and ``rng`` a seeded :class:`random.Random`. Generic mutators work on any file
(byte flips, truncation, splicing, huge counts); the structural ones know a
format (parent cycles, deep nesting, compression bombs, extra records).
A mutator whose result must not be read as if nothing were wrong sets
``sample.must_fail`` (the harness then counts a silent parse as corruption).
"""

from __future__ import annotations

import gzip
import io
import json
import random
import re
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from .harness import Sample

Mutator = Callable[["Sample", random.Random], str]

#: Uncompressed size of the compression bombs (the harness's memory budget is far below it).
BOMB_BYTES = 1 << 30
_CHUNK = 1 << 24


def _pick(sample: Sample, rng: random.Random) -> Path:
    return rng.choice(sample.mutable)


def _rel(sample: Sample, f: Path) -> str:
    return str(f.relative_to(sample.root))


# ----------------------------------------------------------------------------------------------- byte level
def flip(sample: Sample, rng: random.Random) -> str:
    f = _pick(sample, rng)
    data = bytearray(f.read_bytes())
    if not data:
        return f"{_rel(sample, f)}: empty, unchanged"
    n = rng.randint(1, 4)
    for _ in range(n):
        k = rng.randrange(len(data))
        data[k] ^= 1 << rng.randrange(8)
    f.write_bytes(bytes(data))
    return f"{_rel(sample, f)}: {n} bit flips"


def truncate(sample: Sample, rng: random.Random) -> str:
    f = _pick(sample, rng)
    data = f.read_bytes()
    k = rng.randrange(max(len(data), 1))
    f.write_bytes(data[:k])
    return f"{_rel(sample, f)}: truncated to {k} of {len(data)} bytes"


def overwrite(sample: Sample, rng: random.Random) -> str:
    f = _pick(sample, rng)
    data = bytearray(f.read_bytes())
    if not data:
        return f"{_rel(sample, f)}: empty, unchanged"
    k = rng.randrange(len(data))
    n = rng.randint(1, 16)
    data[k : k + n] = bytes(rng.randrange(256) for _ in range(n))
    f.write_bytes(bytes(data))
    return f"{_rel(sample, f)}: {n} random bytes at {k}"


def splice(sample: Sample, rng: random.Random) -> str:
    """Copy a chunk of one file of the sample into a random place of another (or the same) file."""
    f = _pick(sample, rng)
    g = _pick(sample, rng)
    src = g.read_bytes()
    data = f.read_bytes()
    if not src:
        return f"{_rel(sample, f)}: nothing to splice"
    a = rng.randrange(len(src))
    b = min(len(src), a + rng.randint(1, 256))
    k = rng.randrange(len(data) + 1)
    cut = rng.choice([0, 0, b - a])  # insert, or replace the same length
    f.write_bytes(data[:k] + src[a:b] + data[k + cut :])
    return f"{_rel(sample, f)}: spliced {b - a} bytes of {_rel(sample, g)} at {k}"


_HUGE = [0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 0x10000000, 0xFFFFFFFFFFFFFFFF, 1 << 40, 1 << 62]


def huge_count(sample: Sample, rng: random.Random) -> str:
    """Binary: a huge integer over an aligned field; text: a huge number over a number."""
    f = _pick(sample, rng)
    data = f.read_bytes()
    if sample.is_text(f):
        text = data.decode("utf-8", errors="surrogateescape")
        nums = list(re.finditer(r"-?\d+(?:\.\d+)?", text))
        if not nums:
            return f"{_rel(sample, f)}: no number"
        m = rng.choice(nums)
        new = rng.choice(["99999999999999999999", "4294967296", "-1", "-99999999", "1e308", "nan", "2147483648"])
        f.write_bytes((text[: m.start()] + new + text[m.end() :]).encode("utf-8", errors="surrogateescape"))
        return f"{_rel(sample, f)}: number {m[0]!r} at {m.start()} -> {new}"
    if len(data) < 8:
        return f"{_rel(sample, f)}: too short"
    v = rng.choice(_HUGE)
    width = 8 if v > 0xFFFFFFFF or rng.random() < 0.3 else 4
    k = rng.randrange(0, len(data) - width + 1, width if len(data) >= 2 * width else 1)
    fmt = rng.choice("<>") + ("Q" if width == 8 else "I")
    out = bytearray(data)
    struct.pack_into(fmt, out, k, v & ((1 << (8 * width)) - 1))
    f.write_bytes(bytes(out))
    return f"{_rel(sample, f)}: {fmt} {v:#x} at {k}"


def negate_number(sample: Sample, rng: random.Random) -> str:
    """A value no run has: a number (time, duration, count, bytes, ...) made negative, NaN, infinite or absurd."""
    f = rng.choice([p for p in sample.mutable if sample.is_text(p)] or sample.mutable)
    text = f.read_bytes().decode("utf-8", errors="surrogateescape")
    nums = list(re.finditer(r"(?<![\w.])\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?![\w.])", text))
    if not nums:
        return f"{_rel(sample, f)}: no number"
    m = rng.choice(nums)
    new = rng.choice([f"-{m[0]}", f"-{m[0]}", "-1e300", "1e300", "NaN", "Infinity", "-Infinity", "nan", "-1e18"])
    f.write_bytes((text[: m.start()] + new + text[m.end() :]).encode("utf-8", errors="surrogateescape"))
    return f"{_rel(sample, f)}: number {m[0]!r} at {m.start()} -> {new}"


# ----------------------------------------------------------------------------------------------- text level
def _lines(f: Path) -> list[str]:
    return f.read_text(encoding="utf-8", errors="surrogateescape").splitlines(keepends=True)


def _write_lines(f: Path, lines: list[str]) -> None:
    f.write_bytes("".join(lines).encode("utf-8", errors="surrogateescape"))


def dup_lines(sample: Sample, rng: random.Random) -> str:
    f = rng.choice([p for p in sample.mutable if sample.is_text(p)] or sample.mutable)
    lines = _lines(f)
    if not lines:
        return f"{_rel(sample, f)}: empty"
    a = rng.randrange(len(lines))
    b = min(len(lines), a + rng.randint(1, 4))
    lines[b:b] = lines[a:b]
    _write_lines(f, lines)
    return f"{_rel(sample, f)}: lines {a + 1}-{b} repeated"


def drop_lines(sample: Sample, rng: random.Random) -> str:
    f = rng.choice([p for p in sample.mutable if sample.is_text(p)] or sample.mutable)
    lines = _lines(f)
    if not lines:
        return f"{_rel(sample, f)}: empty"
    a = rng.randrange(len(lines))
    b = min(len(lines), a + rng.randint(1, 3))
    del lines[a:b]
    _write_lines(f, lines)
    return f"{_rel(sample, f)}: lines {a + 1}-{b} removed"


def bad_utf8(sample: Sample, rng: random.Random) -> str:
    f = rng.choice([p for p in sample.mutable if sample.is_text(p)] or sample.mutable)
    data = f.read_bytes()
    k = rng.randrange(len(data) + 1)
    junk = rng.choice([b"\xff\xfe", b"\xed\xa0\x80", b"\x00", b"\xc3"])
    f.write_bytes(data[:k] + junk + data[k:])
    return f"{_rel(sample, f)}: bytes {junk!r} at {k}"


# ------------------------------------------------------------------------------------------ compression bombs
@lru_cache(maxsize=4)
def gzip_bomb(total: int = BOMB_BYTES) -> bytes:
    """gzip members that inflate to ``total`` bytes of zeros (``total / 16 MiB`` copies of one member)."""
    member = gzip.compress(bytes(_CHUNK), compresslevel=9, mtime=0)
    return member * max(1, total // _CHUNK)


@lru_cache(maxsize=2)
def _zeros_blocks() -> bytes:
    """Deflate blocks for 16 MiB of zeros that need no earlier data (a full flush): they can be repeated."""
    c = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    return c.compress(bytes(_CHUNK)) + c.flush(zlib.Z_FULL_FLUSH)


def deflate_zeros(total: int = BOMB_BYTES, prefix: bytes = b"") -> bytes:
    """A raw deflate stream of ``prefix`` then ``total`` zero bytes, made in milliseconds (repeated blocks)."""
    c = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    head = c.compress(prefix) + c.flush(zlib.Z_FULL_FLUSH) if prefix else b""
    return head + _zeros_blocks() * max(1, total // _CHUNK) + b"\x03\x00"  # an empty final block ends it


def zlib_bomb(total: int = BOMB_BYTES) -> bytes:
    """One zlib stream that inflates to ``total`` zero bytes (checksum included)."""
    n = max(1, total // _CHUNK) * _CHUNK
    adler = ((n % 65521) << 16) | 1  # Adler-32 of n zero bytes
    return b"\x78\xda" + deflate_zeros(total) + struct.pack(">I", adler)


def gzip_file_bomb(sample: Sample, rng: random.Random) -> str:
    """Replace the file with a gzip bomb whose content starts like the original (JSON of nothing but spaces)."""
    f = sample.read_path if sample.read_path.is_file() else _pick(sample, rng)
    head = gzip.compress(f.read_bytes()[:1].replace(b"\x1f", b"[") or b"[", mtime=0)
    f.write_bytes(head + gzip_bomb(BOMB_BYTES))
    sample.must_fail = True
    return f"{_rel(sample, f)}: gzip bomb ({BOMB_BYTES >> 20} MiB)"


# ------------------------------------------------------------------------------------------------ JSON
def json_deep(sample: Sample, rng: random.Random) -> str:
    f = rng.choice([p for p in sample.mutable if p.suffix in (".json", ".pfw")] or sample.mutable)
    n = rng.choice([2_000, 100_000])
    text = f.read_text(encoding="utf-8", errors="surrogateescape")
    k = text.find("{", 1)
    if k < 0 or rng.random() < 0.5:
        f.write_text("[" * n + "]" * n)
        return f"{_rel(sample, f)}: {n} nested arrays"
    f.write_bytes((text[:k] + '{"a":' * n + "1" + "}" * n + "," + text[k:]).encode("utf-8", errors="surrogateescape"))
    return f"{_rel(sample, f)}: {n} nested objects inserted at {k}"


def json_values(sample: Sample, rng: random.Random) -> str:
    """Replace one JSON value (anywhere in the document) with a value of another type."""
    f = rng.choice([p for p in sample.mutable if p.suffix in (".json", ".pfw")] or sample.mutable)
    try:
        doc = json.loads(f.read_text())
    except (ValueError, UnicodeDecodeError):
        return flip(sample, rng)
    slots: list[tuple[object, object]] = []

    def walk(x: object) -> None:
        if isinstance(x, dict):
            for k, v in x.items():
                slots.append((x, k))
                walk(v)
        elif isinstance(x, list):
            for i, v in enumerate(x):
                slots.append((x, i))
                walk(v)

    walk(doc)
    if not slots:
        return f"{_rel(sample, f)}: no values"
    parent, key = rng.choice(slots)
    new = rng.choice(
        [None, "\udcff", "x", -1, 2**70, 1.5, 1e308, [], {}, [[]], {"a": None}, True, "nan", float("nan")]
        + [float("inf"), -1e18, -100.0]
    )
    parent[key] = new  # type: ignore[index]
    f.write_text(json.dumps(doc, ensure_ascii=True))
    return f"{_rel(sample, f)}: value at {key!r} -> {new!r}"


# ---------------------------------------------------------------------------------------------- Caliper
def cali_cycle(sample: Sample, rng: random.Random) -> str:
    """Make a node of a .cali file the parent of its own parent."""
    f = sample.read_path
    lines = _lines(f)
    nodes = {}
    for i, line in enumerate(lines):
        m = re.match(r"__rec=node,id=(\d+),.*parent=(\d+)", line)
        if m:
            nodes[int(m[1])] = (i, int(m[2]))
    cand = [n for n, (_, p) in nodes.items() if p in nodes and p >= 12]
    if not cand:
        return "no node with a parent"
    n = rng.choice(cand)
    p = nodes[n][1]
    i = nodes[p][0]
    lines[i] = re.sub(r"parent=\d+", f"parent={n}", lines[i])
    _write_lines(f, lines)
    sample.must_fail = True
    return f"node {p}'s parent -> {n} (its child): a cycle"


def cali_self_parent(sample: Sample, rng: random.Random) -> str:
    f = sample.read_path
    lines = _lines(f)
    idx = [i for i, line in enumerate(lines) if re.match(r"__rec=node,id=\d+,.*parent=\d+", line)]
    if not idx:
        return "no node"
    i = rng.choice(idx)
    nid = re.match(r"__rec=node,id=(\d+)", lines[i])[1]  # type: ignore[index]
    lines[i] = re.sub(r"parent=\d+", f"parent={nid}", lines[i])
    _write_lines(f, lines)
    sample.must_fail = True
    return f"node {nid} is its own parent"


def cali_truncate_record(sample: Sample, rng: random.Random) -> str:
    """Cut the file inside its last record (as a crashed writer leaves it)."""
    f = sample.read_path
    data = f.read_bytes().rstrip(b"\n")
    start = data.rfind(b"\n") + 1
    k = rng.randrange(start + 1, len(data)) if len(data) - start > 1 else len(data) - 1
    f.write_bytes(data[:k])
    sample.must_fail = True
    return f"cut inside the last record at byte {k}"


def caljson_cycle(sample: Sample, rng: random.Random) -> str:
    f = sample.read_path
    doc = json.loads(f.read_text())
    nodes = doc.get("nodes", [])
    kids = [i for i, n in enumerate(nodes) if isinstance(n, dict) and n.get("parent") is not None]
    if not kids:
        return "no node with a parent"
    i = rng.choice(kids)
    p = nodes[i]["parent"]
    nodes[p]["parent"] = i
    f.write_text(json.dumps(doc))
    sample.must_fail = True
    return f"node {p}'s parent -> {i} (its child): a cycle"


def caljson_bad_parent(sample: Sample, rng: random.Random) -> str:
    f = sample.read_path
    doc = json.loads(f.read_text())
    nodes = doc.get("nodes", [])
    if not nodes:
        return "no nodes"
    i = rng.randrange(len(nodes))
    nodes[i]["parent"] = rng.choice([len(nodes) + 5, -3, "x", 1.5])
    f.write_text(json.dumps(doc))
    sample.must_fail = True
    return f"node {i}'s parent -> {nodes[i]['parent']!r}"


# ------------------------------------------------------------------------------------------------- TAU
def tau_extra_timer(sample: Sample, rng: random.Random) -> str:
    """Repeat a timer line: the file then has more timers than its header announces."""
    f = rng.choice(sample.mutable)
    lines = _lines(f)
    n = int(lines[0].split()[0])
    k = rng.randrange(2, 2 + n)
    lines.insert(2 + n, lines[k].replace('"', '"x', 1))
    _write_lines(f, lines)
    sample.must_fail = True
    return f"{_rel(sample, f)}: one more timer than the header's {n}"


# ------------------------------------------------------------------------------------------ HPCToolkit
def metricdb_extra(sample: Sample, rng: random.Random) -> str:
    f = rng.choice([p for p in sample.mutable if p.suffix == ".metric-db"])
    f.write_bytes(f.read_bytes() + bytes(8 * rng.randint(1, 4)))
    sample.must_fail = True
    return f"{_rel(sample, f)}: extra bytes after the values"


def xml_deep(sample: Sample, rng: random.Random) -> str:
    f = rng.choice([p for p in sample.mutable if p.suffix == ".xml"])
    text = f.read_text()
    k = text.rfind("</SecCallPathProfileData>")
    if k < 0:
        return flip(sample, rng)
    n = 50_000
    f.write_text(text[:k] + '<L i="999" l="1">' * n + "</L>" * n + text[k:])
    return f"{_rel(sample, f)}: {n} nested loops"


def v4_ctx_cycle(sample: Sample, rng: random.Random) -> str:
    """Give a context of meta.db the id of one of its ancestors (the parent chain then loops)."""
    from perflow.readers.hpctoolkit.v4meta import Blob

    f = sample.read_path / "meta.db"
    b = Blob(f, b"meta")
    _sz, p_ctx = b.section(3)
    p_entries, n_entries, sz_entry = b.u64(p_ctx), b.u16(p_ctx + 8), b.u8(p_ctx + 0x0A)
    found: list[tuple[int, list[int]]] = []  # (offset of ctxId, ancestor ids)
    stack = [
        (b.u64(p_entries + i * sz_entry + 8), b.u64(p_entries + i * sz_entry), [b.u32(p_entries + i * sz_entry + 0x10)])
        for i in range(n_entries)
    ]
    while stack:
        p, size, anc = stack.pop()
        end = p + size
        while p < end:
            szc, pc, ctx, nflex = b.u64(p), b.u64(p + 8), b.u32(p + 0x10), b.u8(p + 0x17)
            if len(anc) > 1:
                found.append((p + 0x10, anc))
            if szc:
                stack.append((pc, szc, [*anc, ctx]))
            p += 0x20 + 8 * nflex
    if not found:
        return "no nested context"
    off, anc = rng.choice(found)
    new = rng.choice(anc[1:])
    data = bytearray(b.data)
    struct.pack_into("<I", data, off, new)
    f.write_bytes(bytes(data))
    sample.must_fail = True
    return f"meta.db: context at {off} takes its ancestor's id {new}"


# -------------------------------------------------------------------------------------------------- CUBE
def _cube_members(f: Path) -> list[tuple[tarfile.TarInfo, bytes]]:
    with tarfile.open(f) as tf:
        return [(m, tf.extractfile(m).read()) for m in tf if m.isfile()]  # type: ignore[union-attr]


def _cube_write(f: Path, members: list[tuple[tarfile.TarInfo, bytes]], mode: str = "w") -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tf:
        for m, data in members:
            m.size = len(data)
            tf.addfile(m, io.BytesIO(data))
    f.write_bytes(buf.getvalue())


def cube_member(inner: Mutator) -> Mutator:
    """Apply a byte/text mutator to one member of the .cubex tar archive, then repack it."""

    def mutate(sample: Sample, rng: random.Random) -> str:
        from .harness import Sample as S

        f = sample.read_path
        members = _cube_members(f)
        i = rng.choice([k for k, (m, _) in enumerate(members) if not m.name.endswith(".spec")])
        tmp = sample.root / "_member"
        tmp.write_bytes(members[i][1])
        sub = S(sample.root, tmp, [tmp], frozenset([tmp]) if members[i][0].name.endswith(".xml") else frozenset())
        what = inner(sub, rng)
        members[i] = (members[i][0], tmp.read_bytes())
        tmp.unlink()
        sample.must_fail = sample.must_fail or sub.must_fail
        _cube_write(f, members)
        return f"member {members[i][0].name}: {what.split(': ', 1)[-1]}"

    mutate.__name__ = f"cube_{inner.__name__}"
    return mutate


def cube_zbomb(sample: Sample, rng: random.Random) -> str:
    """Replace a data member with a ZCUBEX.DATA whose one segment inflates to a bomb."""
    f = sample.read_path
    members = _cube_members(f)
    i = rng.choice([k for k, (m, _) in enumerate(members) if m.name.endswith(".data")])
    seg = zlib_bomb(BOMB_BYTES)
    data = b"ZCUBEX.DATA" + struct.pack("<I", 1) + struct.pack("<III", 0, 0, len(seg)) + seg
    members[i] = (members[i][0], data)
    _cube_write(f, members)
    sample.must_fail = True
    return f"member {members[i][0].name}: zlib bomb ({BOMB_BYTES >> 20} MiB)"


def cube_tar_bomb(sample: Sample, rng: random.Random) -> str:
    """A gzip-compressed archive with one member of zeros larger than any memory budget."""
    f = sample.read_path
    anchor = next(d for m, d in _cube_members(f) if m.name == "anchor.xml")
    ti = tarfile.TarInfo("anchor.xml")
    ti.size = len(anchor)
    big = tarfile.TarInfo("0.data")
    big.size = BOMB_BYTES
    head = ti.tobuf() + anchor + bytes(-len(anchor) % 512) + big.tobuf()
    f.write_bytes(gzip.compress(head, mtime=0) + gzip_bomb(BOMB_BYTES))
    sample.must_fail = True
    return f"gzip-compressed archive with a {BOMB_BYTES >> 20} MiB member"


def cube_dup_cnode(sample: Sample, rng: random.Random) -> str:
    f = sample.read_path
    members = _cube_members(f)
    i = next(k for k, (m, _) in enumerate(members) if m.name == "anchor.xml")
    text = members[i][1].decode()
    ids = re.findall(r'<cnode id="(\d+)"', text)
    if len(ids) < 2:
        return "too few cnodes"
    a, b = rng.sample(ids, 2)
    text = text.replace(f'<cnode id="{b}"', f'<cnode id="{a}"', 1)
    members[i] = (members[i][0], text.encode())
    _cube_write(f, members)
    sample.must_fail = True
    return f"anchor.xml: cnode {b} takes the id {a} of another"


# --------------------------------------------------------------------------------------------- cProfile
def marshal_count(sample: Sample, rng: random.Random) -> str:
    """Give a marshalled tuple (or string) a huge element count, as in the 1 KB file that made marshal take 23 GB.

    pstats files hold small tuples (type ``)``, a one-byte count): one becomes a
    tuple with a four-byte count (type ``(``), the count 2**31-1 or so.
    """
    f = _pick(sample, rng)
    data = bytearray(f.read_bytes())
    pos = [i for i, c in enumerate(data[:-2]) if c in (0x29, 0xA9, 0x7A, 0xFA)]
    if not pos:
        return huge_count(sample, rng)
    k = rng.choice(pos)
    v = rng.choice([0x7FFFFFFF, 0x40000000, 0x10000000])
    small_tuple = data[k] & 0x7F == 0x29
    data[k] = (0x28 if small_tuple else 0x61) | (data[k] & 0x80)  # ')' -> '(' ; 'z' -> 'a'
    data[k + 1 : k + 2] = struct.pack("<i", v)
    f.write_bytes(bytes(data))
    return f"{_rel(sample, f)}: {'tuple' if small_tuple else 'string'} of {v:#x} items at byte {k}"


def marshal_values(sample: Sample, rng: random.Random) -> str:
    """Replace one value inside the marshalled statistics with a value of another type."""
    import marshal

    f = _pick(sample, rng)
    try:
        stats = marshal.loads(f.read_bytes())
    except (ValueError, EOFError, TypeError):
        return flip(sample, rng)
    keys = list(stats)
    k = rng.choice(keys)
    v = list(stats[k])
    new = rng.choice([None, "x", -1, 2**70, float("nan"), float("inf"), (), (1, 2), {}, {1: 2}, b"\xff", 1.5])
    where = rng.choice(["key", "stat", "callers", "edge", "edge_value"])
    if where == "key":
        stats[rng.choice([(1, 2, 3), ("a", "b", "c"), ("f", 1), new if isinstance(new, int | str) else "k"])] = (
            stats.pop(k)
        )
    elif where == "stat":
        v[rng.randrange(4)] = new
        stats[k] = tuple(v)
    elif where == "callers":
        v[4] = new
        stats[k] = tuple(v)
    elif v[4]:
        c = rng.choice(list(v[4]))
        if where == "edge":
            v[4][c] = new
        else:
            e = list(v[4][c]) if isinstance(v[4][c], tuple) else [1, 1, 0.0, 0.0]
            e[rng.randrange(len(e))] = new
            v[4][c] = tuple(e)
        stats[k] = tuple(v)
    f.write_bytes(marshal.dumps(stats))
    return f"{_rel(sample, f)}: {where} of {k[2] if isinstance(k, tuple) and len(k) == 3 else k!r} -> {new!r}"


def sqlite_values(sample: Sample, rng: random.Random) -> str:
    """A time of an SQLite export (Nsight Systems) set to a value no run has: negative, REAL 1e300, fractional."""
    import sqlite3

    f = sample.read_path
    con = sqlite3.connect(f)
    try:
        tables = [
            r[0]
            for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if {"start", "end"} <= {c[1] for c in con.execute(f'PRAGMA table_info("{r[0]}")')}
        ]
        if not tables:
            return "no table with start and end"
        t = rng.choice(sorted(tables))
        col = rng.choice(["start", "end"])
        new = rng.choice(["-5", "1e300", "start + 0.5", "-1e18", "end + 9e18"])
        con.execute(f'UPDATE "{t}" SET "{col}" = {new} WHERE rowid = (SELECT min(rowid) FROM "{t}")')
        con.commit()
    finally:
        con.close()
    return f"{t}.{col} of its first row -> {new}"


def _npz_members(f: Path) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(f) as z:
        return [(n, z.read(n)) for n in z.namelist()]


def _npz_write(f: Path, members: list[tuple[str, bytes]]) -> None:
    with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for n, d in members:
            z.writestr(n, d)


def npz_member(inner: Mutator) -> Mutator:
    """Apply a byte mutator to one ``.npy`` member of the ``rawtrace.npz``, then repack it."""

    def mutate(sample: Sample, rng: random.Random) -> str:
        from .harness import Sample as S

        f = sample.read_path / "rawtrace.npz"
        members = _npz_members(f)
        i = rng.randrange(len(members))
        tmp = sample.root / "_member"
        tmp.write_bytes(members[i][1])
        sub = S(sample.root, tmp, [tmp])
        what = inner(sub, rng)
        members[i] = (members[i][0], tmp.read_bytes())
        tmp.unlink()
        _npz_write(f, members)
        return f"rawtrace.npz member {members[i][0]}: {what.split(': ', 1)[-1]}"

    mutate.__name__ = f"npz_{inner.__name__}"
    return mutate


def npy_huge_shape(sample: Sample, rng: random.Random) -> str:
    """Announce a huge shape in the header of one ``.npy`` member."""
    f = sample.read_path / "rawtrace.npz"
    members = _npz_members(f)
    i = rng.choice([k for k, (n, _) in enumerate(members) if n != "meta.npy"])
    d = members[i][1]
    m = re.search(rb"'shape': \((\d+),\)", d)
    if not m:
        return "no 1-d member"
    new = str(rng.choice([1 << 33, 1 << 40, 10**15])).encode()
    hdr_end = d.index(b"\n") + 1
    hdr = d[:hdr_end].replace(m.group(0), b"'shape': (" + new + b",)")
    body_len = hdr_end - 10
    hdr_body = hdr[10:].rstrip(b"\n").rstrip(b" ")
    hdr_body = hdr_body + b" " * (body_len - 1 - len(hdr_body)) + b"\n"
    if len(hdr_body) != body_len:
        return "header too short to grow"
    members[i] = (members[i][0], d[:10] + hdr_body + d[hdr_end:])
    _npz_write(f, members)
    sample.must_fail = True
    return f"rawtrace.npz member {members[i][0]}: shape ({new.decode()},)"


def _zip(members: list[tuple[str, bytes, bytes, int]]) -> bytes:
    """A zip archive of (name, stored bytes, method, uncompressed size) members (stored ones with their CRC).

    A deflated member's CRC is left 0: a reader meets the bomb before the check.
    """
    out, central = bytearray(), bytearray()
    for name, data, method, usize in members:
        nm = name.encode()
        off = len(out)
        crc = zlib.crc32(data) if method == 0 else 0
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0x21, crc, len(data), usize, len(nm), 0)
        out += nm + data
        central += struct.pack(
            "<IHHHHHHIIIHHHHHII",
            0x02014B50,
            20,
            20,
            0,
            method,
            0,
            0x21,
            crc,
            len(data),
            usize,
            len(nm),
            0,
            0,
            0,
            0,
            0,
            off,
        )
        central += nm
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members), len(central), len(out), 0)
    return bytes(out + central + end)


def _npy_bomb(total: int) -> tuple[bytes, int]:
    """A raw-deflate ``.npy`` stream of ``total`` zeros after its header, and its inflated size."""
    n = max(1, total // _CHUNK) * _CHUNK
    hdr = (
        b"\x93NUMPY\x01\x00"
        + struct.pack("<H", 118)
        + ("{'descr': '<f8', 'fortran_order': False, 'shape': (" + str(n // 8) + ",), }").encode().ljust(117)
        + b"\n"
    )
    return deflate_zeros(total, hdr), len(hdr) + n


def npz_bomb(sample: Sample, rng: random.Random) -> str:
    """A deflated ``.npy`` member that inflates past any memory budget."""
    f = sample.read_path / "rawtrace.npz"
    members = _npz_members(f)
    i = rng.choice([k for k, (n, _) in enumerate(members) if n != "meta.npy"])
    name = members[i][0]
    bomb, usize = _npy_bomb(BOMB_BYTES)
    rows = [(n, d, 0, len(d)) for n, d in members if n != name] + [(name, bomb, 8, usize)]
    f.write_bytes(_zip(rows))
    sample.must_fail = True
    return f"rawtrace.npz member {name}: {BOMB_BYTES >> 20} MiB of zeros"


GENERIC_BINARY: list[Mutator] = [flip, truncate, overwrite, splice, huge_count]
GENERIC_TEXT: list[Mutator] = [
    flip,
    truncate,
    overwrite,
    splice,
    huge_count,
    dup_lines,
    drop_lines,
    bad_utf8,
    negate_number,
    negate_number,
]
