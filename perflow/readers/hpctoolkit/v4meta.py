"""Decoding of HPCToolkit v4 ``meta.db`` and ``profile.db`` files (see HPCToolkit's FORMATS.md).

Every structure is read with bounds checks: a pointer or count that leaves
the file raises :class:`~perflow.errors.FormatError` with the file and offset.
As HPCToolkit's own readers require, each file must end with its 8-byte
footer (a truncated file does not), header sections lie inside the file,
context ids are positive and unique (so the context tree cannot loop), and a
profile's context index is sorted and lies inside its values.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...errors import FormatError

__all__ = ["Blob", "Context", "Meta", "read_meta", "read_profiles", "Profile"]


#: The 8 bytes every v4 file ends with, by format identifier.
FOOTERS = {b"meta": b"_meta.db", b"prof": b"_prof.db", b"ctxt": b"__ctx.db", b"trce": b"trace.db"}


class Blob:
    """A file's bytes with bounds-checked little-endian accessors."""

    def __init__(self, path: Path, magic: bytes) -> None:
        self.path = path
        try:
            self.data = path.read_bytes()
        except OSError as exc:
            raise FormatError(path, f"cannot read: {exc}") from None
        if len(self.data) < 16:
            raise FormatError(path, f"truncated: {len(self.data)} bytes, not an HPCToolkit v4 file")
        if self.data[:10] != b"HPCTOOLKIT" or self.data[10:14] != magic:
            raise FormatError(
                path, f"not an HPCToolkit {magic.decode()} file (magic {self.data[:14]!r})", where="offset 0"
            )
        self.major = self.data[14]
        if self.major != 4:
            raise FormatError(path, f"unsupported major version {self.major} (only 4 is read)", where="offset 14")
        footer = FOOTERS.get(magic)
        if footer is not None and self.data[-8:] != footer:
            raise FormatError(
                path,
                f"truncated or damaged: the file does not end with its footer {footer.decode()!r} "
                f"(ends with {self.data[-8:]!r})",
                where=f"offset {len(self.data)}",
            )

    def _check(self, off: int, n: int) -> None:
        if off < 0 or off + n > len(self.data):
            raise FormatError(
                self.path,
                f"pointer or size out of bounds: {n} bytes at offset {off} "
                f"in a {len(self.data)}-byte file (corrupt or truncated)",
                where=f"offset {off}",
            )

    def u8(self, off: int) -> int:
        self._check(off, 1)
        return self.data[off]

    def u16(self, off: int) -> int:
        self._check(off, 2)
        return struct.unpack_from("<H", self.data, off)[0]

    def u32(self, off: int) -> int:
        self._check(off, 4)
        return struct.unpack_from("<I", self.data, off)[0]

    def u64(self, off: int) -> int:
        self._check(off, 8)
        return struct.unpack_from("<Q", self.data, off)[0]

    def section(self, i: int) -> tuple[int, int]:
        """(size, pointer) of header section ``i`` (which must lie inside the file)."""
        size, ptr = self.u64(0x10 + 16 * i), self.u64(0x18 + 16 * i)
        if ptr + size > len(self.data):
            raise FormatError(
                self.path,
                f"header section {i + 1} ({size} bytes at offset {ptr}) runs past the end of the {len(self.data)}-byte file",
                where=f"offset {0x10 + 16 * i}",
            )
        return size, ptr

    def cstr(self, off: int) -> str:
        if off == 0:
            return ""
        self._check(off, 1)
        end = self.data.find(b"\0", off)
        if end < 0:
            raise FormatError(self.path, "unterminated string", where=f"offset {off}")
        return self.data[off:end].decode("utf-8", errors="replace")

    def array(self, off: int, dtype: np.dtype | str, count: int) -> np.ndarray:
        dt = np.dtype(dtype)
        self._check(off, dt.itemsize * count)
        return np.frombuffer(self.data, dtype=dt, count=count, offset=off)


@dataclass
class Context:
    """One context of the meta.db context tree."""

    ctx: int
    parent: int  # ctx id of the parent context, 0 for entry points
    relation: int  # 0 lexical, 1 call, 2 inlined call; -1 for an entry point
    lexical: int  # 0 function, 1 loop, 2 line, 3 instruction; -1 for an entry point
    name: str
    file: str
    line: int
    module: str
    offset: int


@dataclass
class Meta:
    """The decoded meta.db: kind names, metrics and the context tree."""

    title: str
    description: str
    kinds: list[str]
    # propMetricId -> (metric name, scope name)
    metrics: dict[int, tuple[str, str]]
    contexts: list[Context] = field(default_factory=list)


def read_meta(path: Path) -> Meta:
    """Decode a meta.db file."""
    b = Blob(path, b"meta")
    _sz, p_gen = b.section(0)
    title, desc = b.cstr(b.u64(p_gen)), b.cstr(b.u64(p_gen + 8))
    _sz, p_id = b.section(1)
    pp_names, n_kinds = b.u64(p_id), b.u8(p_id + 8)
    kinds = [b.cstr(b.u64(pp_names + 8 * i)) for i in range(n_kinds)]
    _sz, p_met = b.section(2)
    p_metrics, n_metrics = b.u64(p_met), b.u32(p_met + 8)
    sz_metric, sz_inst = b.u8(p_met + 0x0C), b.u8(p_met + 0x0D)
    if n_metrics * max(sz_metric, 1) > len(b.data):  # a damaged count would loop for minutes
        raise FormatError(path, f"announces {n_metrics} metrics, more than the file can hold", where=f"offset {p_met}")
    metrics: dict[int, tuple[str, str]] = {}
    for i in range(n_metrics):
        m = p_metrics + i * sz_metric
        name = b.cstr(b.u64(m))
        p_insts, n_insts = b.u64(m + 8), b.u16(m + 0x18)
        if n_insts * max(sz_inst, 1) > len(b.data):
            raise FormatError(path, f"metric {i} announces {n_insts} instances, more than the file can hold")
        for j in range(n_insts):
            inst = p_insts + j * sz_inst
            scope = b.cstr(b.u64(b.u64(inst)))
            metrics[b.u16(inst + 8)] = (name, scope)
    # functions, files, modules are referenced by pointer
    _sz, p_ctx = b.section(3)
    p_entries, n_entries, sz_entry = b.u64(p_ctx), b.u16(p_ctx + 8), b.u8(p_ctx + 0x0A)
    contexts: list[Context] = []
    stack: list[tuple[int, int, int]] = []  # (pChildren, szChildren, parent ctx)
    where: dict[int, int] = {}  # ctx id -> offset of its record: ids are unique, or the tree could loop

    def new_id(ctx: int, off: int) -> None:
        if ctx == 0:
            raise FormatError(path, "a context has the id 0 (reserved for the global context)", where=f"offset {off}")
        if ctx in where:
            raise FormatError(
                path,
                f"context id {ctx} appears twice (records at offsets {where[ctx]} and {off})",
                where=f"offset {off}",
            )
        where[ctx] = off

    for i in range(n_entries):
        e = p_entries + i * sz_entry
        sz_children, p_children, ctx = b.u64(e), b.u64(e + 8), b.u32(e + 0x10)
        new_id(ctx, e)
        contexts.append(Context(ctx, 0, -1, -1, b.cstr(b.u64(e + 0x18)) or "entry", "", -1, "", 0))
        stack.append((p_children, sz_children, ctx))
    seen = 0
    while stack:
        p, size, parent = stack.pop()
        end = p + size
        if size and (p == 0 or end > len(b.data)):
            raise FormatError(path, f"context children array out of bounds ({size} bytes at {p})", where=f"offset {p}")
        while p < end:
            seen += 1
            if seen > len(b.data):  # more contexts than bytes: a cycle in corrupt pointers
                raise FormatError(path, "context tree does not terminate (corrupt pointers)")
            szc, pc, ctx = b.u64(p), b.u64(p + 8), b.u32(p + 0x10)
            new_id(ctx, p)
            flags, relation, lexical, nflex = b.u8(p + 0x14), b.u8(p + 0x15), b.u8(p + 0x16), b.u8(p + 0x17)
            words = [p + 0x20 + 8 * k for k in range(nflex)]
            name = file = module = ""
            line, offset, w = -1, 0, 0
            if flags & 1:
                f = b.u64(words[w])
                if f:
                    name = b.cstr(b.u64(f))
                    mod = b.u64(f + 8)
                    module = b.cstr(b.u64(mod + 8)) if mod else ""
                    if not name:
                        name = f"<unknown function at {module or '?'}+{b.u64(f + 0x10):#x}>"
                    fsf = b.u64(f + 0x18)
                    if fsf:
                        file, line = b.cstr(b.u64(fsf + 8)), b.u32(f + 0x20)
                w += 1
            if flags & 2:
                sf = b.u64(words[w])
                file = b.cstr(b.u64(sf + 8)) if sf else ""
                line = b.u32(words[w + 1])
                w += 2
            if flags & 4:
                lm = b.u64(words[w])
                module = b.cstr(b.u64(lm + 8)) if lm else module
                offset = b.u64(words[w + 1])
                w += 2
            contexts.append(Context(ctx, parent, relation, lexical, name, file, line, module, offset))
            if szc:
                stack.append((pc, szc, ctx))
            p += 0x20 + 8 * nflex
    return Meta(title, desc, kinds, metrics, contexts)


@dataclass
class Profile:
    """One application thread's values: parallel arrays ctx, metric, value; plus its identity."""

    index: int
    summary: bool
    ids: dict[str, int]
    ctx: np.ndarray
    metric: np.ndarray
    value: np.ndarray


def read_profiles(path: Path, kinds: list[str]) -> list[Profile]:
    """Decode a profile.db file into one :class:`Profile` per profile (the summary profile included)."""
    b = Blob(path, b"prof")
    _sz, p_info = b.section(0)
    p_prof, n_prof, sz_prof = b.u64(p_info), b.u32(p_info + 8), b.u8(p_info + 0x0C)
    if n_prof * max(sz_prof, 1) > len(b.data):
        raise FormatError(path, f"announces {n_prof} profiles, more than the file can hold", where=f"offset {p_info}")
    val_dt = np.dtype([("metric", "<u2"), ("value", "<f8")])
    idx_dt = np.dtype([("ctx", "<u4"), ("start", "<u8")])
    out = []
    for i in range(n_prof):
        pi = p_prof + i * sz_prof
        n_vals, p_vals, n_ctx, p_idx = b.u64(pi), b.u64(pi + 8), b.u32(pi + 0x10), b.u64(pi + 0x18)
        p_tuple, flags = b.u64(pi + 0x20), b.u32(pi + 0x28)
        if n_vals > len(b.data) or n_ctx > len(b.data):
            raise FormatError(path, f"profile {i}: implausible value count", where=f"offset {pi}")
        vals = b.array(p_vals, val_dt, n_vals)
        idx = b.array(p_idx, idx_dt, n_ctx)
        starts = idx["start"]  # unsigned: compared, never subtracted, until known to be in range
        ctx_ids = idx["ctx"]
        if n_ctx and (
            np.any(starts[1:] < starts[:-1]) or int(starts[-1]) > n_vals or np.any(ctx_ids[1:] <= ctx_ids[:-1])
        ):
            raise FormatError(
                path,
                f"profile {i}: its context index is not sorted by context, or points past its {n_vals} values",
                where=f"offset {p_idx}",
            )
        counts = np.diff(np.r_[starts.astype(np.int64), n_vals])
        ids: dict[str, int] = {}
        if p_tuple:
            n_ids = b.u16(p_tuple)
            for k in range(n_ids):
                e = p_tuple + 8 + 16 * k
                kind = b.u8(e)
                kname = kinds[kind] if kind < len(kinds) else f"kind{kind}"
                ids[kname] = b.u32(e + 4)
        out.append(
            Profile(
                i,
                bool(flags & 1),
                ids,
                np.repeat(idx["ctx"].astype(np.int64), counts),
                vals["metric"].astype(np.int64),
                vals["value"].astype(np.float64),
            )
        )
    return out
