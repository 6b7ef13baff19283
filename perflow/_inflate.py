"""Bounded decompression: every compressed input perflow reads is inflated through here.

A few kilobytes of gzip, zlib, bzip2 or xz data can inflate to gigabytes. The
helpers here stream the data and stop with a
:class:`~perflow.errors.FormatError` as soon as the output passes a limit
relative to the compressed size:

    limit = max(PERFLOW_INFLATE_FLOOR_MB MiB, PERFLOW_INFLATE_RATIO x compressed bytes)

(defaults 64 MiB and 200: real profiles and traces compress 5-50 fold; a
bomb compresses about 1000 fold). Set the environment variables to read an
unusually compressible file.

* :func:`inflate` decompresses a bytes object (gzip members, zlib, raw
  deflate, bzip2, xz), optionally with an exact expected size;
* :func:`open_inflated` opens a file for streaming reads (e.g. by
  :mod:`tarfile`), decompressing transparently when it is compressed;
* :func:`check_npz` checks the members of a ``.npz`` archive (their inflated
  sizes and the array sizes their headers announce) before numpy allocates.
"""

from __future__ import annotations

import bz2
import io
import lzma
import os
import tokenize
import warnings
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .errors import FormatError

__all__ = ["inflate", "inflate_limit", "open_inflated", "compression_of", "check_npz", "RATIO", "FLOOR"]

#: Default ratio of inflated to compressed size beyond which data are refused (``PERFLOW_INFLATE_RATIO``).
RATIO = 200
#: Default inflated size always allowed, in bytes (``PERFLOW_INFLATE_FLOOR_MB``).
FLOOR = 64 << 20
_OUT = 1 << 20  # decompressed bytes per step
_IN = 1 << 16

_MAGIC = {b"\x1f\x8b": "gzip", b"BZh": "bz2", b"\xfd7zXZ\x00": "xz"}


def _env_number(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        v = float(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number") from None
    if v <= 0:
        raise ValueError(f"{name}={raw!r} must be positive")
    return v


def inflate_limit(compressed_size: int) -> int:
    """Largest inflated size accepted for ``compressed_size`` bytes of compressed data."""
    ratio = _env_number("PERFLOW_INFLATE_RATIO", RATIO)
    floor = _env_number("PERFLOW_INFLATE_FLOOR_MB", FLOOR / (1 << 20)) * (1 << 20)
    return int(max(floor, ratio * compressed_size))


def compression_of(head: bytes) -> str | None:
    """``"gzip"``, ``"bz2"``, ``"xz"`` from a file's first bytes, else None."""
    for magic, kind in _MAGIC.items():
        if head.startswith(magic):
            return kind
    return None


def _decompressor(kind: str) -> Any:
    if kind == "gzip":
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if kind == "zlib":
        return zlib.decompressobj()
    if kind == "deflate":
        return zlib.decompressobj(-zlib.MAX_WBITS)
    if kind == "bz2":
        return bz2.BZ2Decompressor()
    if kind == "xz":
        return lzma.LZMADecompressor()
    raise ValueError(f"unknown compression {kind!r}")


_ERRORS = (zlib.error, OSError, EOFError, lzma.LZMAError, ValueError)


def _chunks(read: Callable[[int], bytes], kind: str) -> Iterator[bytes]:
    """Decompressed pieces of at most 1 MiB; raises ``EOFError`` on a truncated stream."""
    zl = kind in ("gzip", "zlib", "deflate")
    multi = kind in ("gzip", "bz2", "xz")  # concatenated streams are one file
    d = _decompressor(kind)
    buf = read(_IN)
    while True:
        out = d.decompress(buf, _OUT)
        buf = d.unconsumed_tail if zl else b""
        if out:
            yield out
        if d.eof:
            if not multi:
                return
            rest = d.unused_data  # (zlib leaves a copy of it in unconsumed_tail too)
            if kind == "gzip":
                rest = rest.lstrip(b"\0")  # gzip allows zero padding between and after members
                while not rest:
                    more = read(_IN)
                    if not more:
                        return
                    rest = more.lstrip(b"\0")
            elif not rest:
                rest = read(_IN)
                if not rest:
                    return
            d, buf = _decompressor(kind), rest
            continue
        saturated = len(out) == _OUT if zl else not d.needs_input
        if not buf and not saturated:
            buf = read(_IN)
            if not buf:
                raise EOFError("the compressed stream ends before its end marker")


def _too_big(path: Path | str, what: str, limit: int, n_in: int, expected: int | None, why: str = "") -> FormatError:
    if expected is not None:
        return FormatError(path, f"{what}inflates to more than the {expected} bytes expected (damaged data)")
    if why:
        return FormatError(path, f"{what}inflates to more than {limit} bytes: {why}")
    return FormatError(
        path,
        f"{what}inflates to more than {limit} bytes from {n_in} compressed bytes: refused as a "
        "compression bomb (raise PERFLOW_INFLATE_RATIO or PERFLOW_INFLATE_FLOOR_MB to read it)",
    )


def inflate(
    data: bytes,
    kind: str,
    path: Path | str,
    *,
    what: str = "",
    limit: int | None = None,
    expected: int | None = None,
    why: str = "",
) -> bytes:
    """Decompress ``data`` (``kind``: gzip, zlib, deflate, bz2, xz) without ever holding more than the limit.

    Parameters
    ----------
    data : bytes
        The compressed bytes.
    kind : str
        The compression.
    path : path-like
        The file, for error messages.
    what : str
        What the data are (a member name...), for error messages.
    limit : int, optional
        Largest output accepted; default :func:`inflate_limit` of ``len(data)``.
    expected : int, optional
        The exact size the output must have (a larger or smaller one is an error).
    why : str
        Why ``limit`` is the limit, for the error message (default: the bomb guard).

    Raises
    ------
    FormatError
        Corrupt or truncated data, or more output than allowed.
    """
    cap = expected if expected is not None else (limit if limit is not None else inflate_limit(len(data)))
    label = f"{what}: " if what else ""
    src = io.BytesIO(data)
    out = bytearray()
    try:
        for piece in _chunks(src.read, kind):
            if len(out) + len(piece) > cap:
                raise _too_big(path, label, cap, len(data), expected, why)
            out += piece
    except FormatError:
        raise
    except _ERRORS as exc:
        raise FormatError(path, f"{label}corrupt or truncated {kind} data ({exc})") from None
    if expected is not None and len(out) != expected:
        raise FormatError(path, f"{label}inflates to {len(out)} bytes, {expected} expected (damaged data)")
    return bytes(out)


class _Inflating(io.RawIOBase):
    """A read-only stream that decompresses a file on the fly and stops past a limit."""

    def __init__(self, f: io.BufferedReader, kind: str, path: Path, limit: int, n_in: int) -> None:
        self._f = f
        self._it = _chunks(f.read, kind)
        self._left = b""
        self._total = 0
        self._limit = limit
        self._path = path
        self._kind = kind
        self._n_in = n_in

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while not self._left:
            try:
                piece = next(self._it, None)
            except _ERRORS as exc:
                raise FormatError(self._path, f"corrupt or truncated {self._kind} data ({exc})") from None
            if piece is None:
                return 0
            self._total += len(piece)
            if self._total > self._limit:
                raise _too_big(self._path, "", self._limit, self._n_in, None)
            self._left = piece
        n = min(len(b), len(self._left))
        b[:n] = self._left[:n]
        self._left = self._left[n:]
        return n

    def close(self) -> None:
        self._f.close()
        super().close()


def open_inflated(path: Path | str) -> tuple[io.BufferedIOBase, str | None]:
    """Open ``path`` for reading: (stream, compression); a compressed file inflates as it is read, within the limit.

    The stream of a compressed file is not seekable (read it front to back,
    e.g. ``tarfile.open(fileobj=..., mode="r|")``).
    """
    p = Path(path)
    f = open(p, "rb")  # noqa: SIM115 - returned to the caller
    kind = compression_of(f.peek(8)[:8])
    if kind is None:
        return f, None
    n_in = p.stat().st_size
    return io.BufferedReader(_Inflating(f, kind, p, inflate_limit(n_in), n_in), buffer_size=_OUT), kind


def check_npz(path: Path | str) -> None:
    """Check a ``.npz`` archive before numpy reads it: inflated sizes within the limit, array sizes as stored.

    Raises
    ------
    FormatError
        A member inflates past :func:`inflate_limit` of the archive size, or a
        member's ``.npy`` header announces more (or fewer) values than it holds.
    """
    import zipfile

    import numpy as np

    p = Path(path)
    size = p.stat().st_size
    limit = inflate_limit(size)
    try:
        with zipfile.ZipFile(p) as z:
            infos = z.infolist()
            total = sum(i.file_size for i in infos)
            if total > limit:
                raise FormatError(
                    p,
                    f"its members inflate to {total} bytes from {size}: refused as a compression bomb "
                    "(raise PERFLOW_INFLATE_RATIO or PERFLOW_INFLATE_FLOOR_MB to read it)",
                )
            for info in infos:
                if not info.filename.endswith(".npy"):
                    continue
                with z.open(info) as f, warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # numpy's note on (damaged) headers that look like Python 2's
                    version = np.lib.format.read_magic(f)
                    if version == (1, 0):
                        shape, _fortran, dtype = np.lib.format.read_array_header_1_0(f)
                    else:
                        shape, _fortran, dtype = np.lib.format.read_array_header_2_0(f)
                    header = f.tell()
                if dtype.hasobject:
                    raise FormatError(p, f"member {info.filename} holds Python objects", where=info.filename)
                want = int(np.prod(shape, dtype=object)) * dtype.itemsize
                if want != info.file_size - header:
                    raise FormatError(
                        p,
                        f"member {info.filename}: its header announces {shape} x {dtype} "
                        f"({want} bytes), it holds {info.file_size - header}",
                        where=info.filename,
                    )
    except FormatError:
        raise
    except (
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        OSError,
        ValueError,
        EOFError,
        zlib.error,
        SyntaxError,
        tokenize.TokenError,
    ) as exc:
        raise FormatError(p, f"not a readable .npz archive ({type(exc).__name__}: {exc})") from None
