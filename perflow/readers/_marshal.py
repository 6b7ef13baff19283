"""A bounded decoder for the subset of Python's ``marshal`` format that pstats files use.

``marshal.loads`` trusts the counts in its input: a 1 KB file announcing a
tuple of 2**31 elements makes it allocate 16 GB before it notices the data
is missing. This decoder checks every count and length against the bytes
left before it allocates anything (an element takes at least one byte), caps
the nesting depth, and reports damage as a
:class:`~perflow.errors.FormatError` with the byte offset.

It reads the plain data types of marshal versions 0-4 (None, booleans, ints,
longs, floats, complex numbers, strings, tuples, lists, dicts, sets and
back-references), which covers pstats files written by Python 2 and 3; code
objects are refused. Python 2 ``str`` values come back as ``bytes``.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

from ..errors import FormatError

__all__ = ["loads", "MAX_DEPTH"]

#: Deepest nesting accepted (pstats files nest four levels deep).
MAX_DEPTH = 100

_FLAG_REF = 0x80
_I32 = struct.Struct("<i")
_U32 = struct.Struct("<I")
_F64 = struct.Struct("<d")
_PENDING = object()  # a reserved back-reference whose object is still being built


class _Reader:
    __slots__ = ("buf", "pos", "end", "refs", "interned", "path")

    def __init__(self, data: bytes, path: Path | str) -> None:
        self.buf = data
        self.pos = 0
        self.end = len(data)
        self.refs: list[Any] = []
        self.interned: list[Any] = []  # Python 2's string table ('t' entries, 'R' references)
        self.path = path

    def fail(self, msg: str, at: int | None = None) -> FormatError:
        return FormatError(self.path, f"damaged marshal data: {msg}", where=f"byte {self.pos if at is None else at}")

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or n > self.end - self.pos:
            raise self.fail(f"{what} of {n} bytes runs past the end of the {self.end}-byte file")
        p = self.pos
        self.pos = p + n
        return self.buf[p : p + n]

    def count(self, what: str, at: int, size: int = 1) -> int:
        """A 4-byte count of items of at least ``size`` bytes each (of the value at ``at``), checked against the bytes left."""
        n = _I32.unpack(self.take(4, what))[0]
        if n < 0 or n * size > self.end - self.pos:
            raise self.fail(f"{what} announces {n} items, more than the {self.end - self.pos} bytes left hold", at)
        return n

    def obj(self, depth: int) -> Any:
        buf, pos = self.buf, self.pos
        if pos >= self.end:
            raise self.fail("the data end inside a value")
        code = buf[pos]
        t = code & 0x7F
        # the most frequent pstats items first: references, small tuples, ints, floats, short strings
        if t == 0x72:  # 'r'
            if pos + 5 > self.end:
                raise self.fail("reference runs past the end")
            i = _U32.unpack_from(buf, pos + 1)[0]
            self.pos = pos + 5
            refs = self.refs
            if i >= len(refs) or refs[i] is _PENDING:
                raise self.fail(f"reference {i} to an object not (yet) defined", pos)
            return refs[i]
        if depth > MAX_DEPTH:
            raise self.fail(f"nested deeper than {MAX_DEPTH} levels")
        self.pos = pos + 1
        if code & _FLAG_REF:
            slot = len(self.refs)
            self.refs.append(_PENDING)
            v = self._value(chr(t), depth, pos)
            self.refs[slot] = v
            return v
        return self._value(chr(t), depth, pos)

    def _value(self, t: str, depth: int, at: int) -> Any:
        if t == ")":
            n = self.take(1, "tuple length")[0]
            if n > self.end - self.pos:
                raise self.fail(f"tuple announces {n} items, more than the {self.end - self.pos} bytes left hold", at)
            d1 = depth + 1
            return tuple([self.obj(d1) for _ in range(n)])
        if t == "i":
            p = self.pos
            if p + 4 > self.end:
                raise self.fail("int runs past the end")
            self.pos = p + 4
            return _I32.unpack_from(self.buf, p)[0]
        if t == "g":
            p = self.pos
            if p + 8 > self.end:
                raise self.fail("float runs past the end")
            self.pos = p + 8
            return _F64.unpack_from(self.buf, p)[0]
        if t == "N":
            return None
        if t == "T":
            return True
        if t == "F":
            return False
        if t == ".":
            return Ellipsis
        if t in "zZ":
            n = self.take(1, "string length")[0]
            return self._text(self.take(n, "string"), "ascii", at, t == "Z")
        if t in "aAut":
            n = self.count("string", at)
            return self._text(self.take(n, "string"), "ascii" if t in "aA" else "utf-8", at, t in "At")
        if t == "s":
            return self.take(self.count("bytes", at), "bytes")
        if t in "([<>":
            n = self.count({"(": "tuple", "[": "list", "<": "set", ">": "frozenset"}[t], at)
            items = [self.obj(depth + 1) for _ in range(n)]
            if t == "(":
                return tuple(items)
            if t == "[":
                return items
            try:
                return set(items) if t == "<" else frozenset(items)
            except TypeError:
                raise self.fail("a set holds an unhashable item", at) from None
        if t == "{":
            d: dict[Any, Any] = {}
            while True:
                if self.pos < self.end and self.buf[self.pos] == 0x30:  # '0' ends the dict
                    self.pos += 1
                    return d
                k_at = self.pos
                k = self.obj(depth + 1)
                v = self.obj(depth + 1)
                try:
                    d[k] = v
                except TypeError:
                    raise self.fail(f"a dict key is unhashable ({type(k).__name__})", k_at) from None
        if t == "R":
            table = self.interned
            i = _U32.unpack(self.take(4, "reference"))[0]
            if i >= len(table) or table[i] is _PENDING:
                raise self.fail(f"reference {i} to an object not (yet) defined", at)
            return table[i]
        if t == "l":
            n = _I32.unpack(self.take(4, "long"))[0]
            raw = self.take(2 * abs(n), "long digits")
            v = 0
            for k in range(abs(n) - 1, -1, -1):
                digit = raw[2 * k] | (raw[2 * k + 1] << 8)
                if digit >= 1 << 15:
                    raise self.fail("a long has a digit out of range", at)
                v = (v << 15) | digit
            return -v if n < 0 else v
        if t in "fx":
            parts = []
            for _ in range(1 if t == "f" else 2):
                n = self.take(1, "float length")[0]
                s = self.take(n, "float text")
                try:
                    parts.append(float(s.decode("ascii")))
                except (UnicodeDecodeError, ValueError):
                    raise self.fail(f"not a number: {s[:20]!r}", at) from None
            return parts[0] if t == "f" else complex(*parts)
        if t == "y":
            re_, im = struct.unpack("<dd", self.take(16, "complex"))
            return complex(re_, im)
        if t == "c":
            raise self.fail("holds a code object (not a pstats file)", at)
        raise self.fail(f"unknown type code {ord(t) | 0:#04x}", at)

    def _text(self, raw: bytes, enc: str, at: int, intern: bool) -> str:
        try:
            s = raw.decode(enc, "surrogatepass" if enc == "utf-8" else "strict")  # as marshal writes them
        except UnicodeDecodeError:
            raise self.fail(f"a string is not valid {enc}", at) from None
        if intern:
            self.interned.append(s)
        return s


def loads(data: bytes, path: Path | str = "") -> Any:
    """Decode one marshalled value from ``data`` (trailing bytes are an error).

    Raises
    ------
    FormatError
        When the data are damaged: a count or length beyond the end, an
        unknown type code, a bad reference, nesting deeper than
        :data:`MAX_DEPTH`, or bytes after the value.
    """
    r = _Reader(bytes(data), path)
    v = r.obj(0)
    if r.pos != r.end:
        raise r.fail(f"{r.end - r.pos} bytes after the end of the data")
    return v
