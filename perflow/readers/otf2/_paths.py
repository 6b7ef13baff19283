"""Locating and sanity-checking an OTF2 archive before any C code touches it."""

from __future__ import annotations

import os
from pathlib import Path

from ...errors import FormatError

__all__ = ["resolve_anchor", "is_otf2", "ANCHOR_MAGIC"]

#: bytes 2..6 of an OTF2 anchor file (after the chunk-header byte and the endianness mark)
ANCHOR_MAGIC = b"OTF2\x00"


def _looks_like_anchor(head: bytes) -> bool:
    return len(head) >= 7 and head[0] == 0x03 and head[1] in (0x42, 0x23) and head[2:7] == ANCHOR_MAGIC


def is_otf2(path: str | os.PathLike[str]) -> bool:
    """Cheaply tell whether ``path`` is an OTF2 anchor file or a directory holding one.

    Parameters
    ----------
    path : str or os.PathLike
        A file or directory.

    Returns
    -------
    bool
        True when the file (or the single ``*.otf2`` file of the directory)
        starts like an OTF2 anchor file. Never raises.
    """
    try:
        p = Path(path)
        if p.is_dir():
            cands = sorted(p.glob("*.otf2"))
            if len(cands) != 1:
                return False
            p = cands[0]
        if not p.is_file():
            return False
        with open(p, "rb") as f:
            return _looks_like_anchor(f.read(8))
    except OSError:
        return False


def resolve_anchor(path: str | os.PathLike[str]) -> str:
    """Return the anchor file for ``path`` (the anchor itself or its directory), checked.

    Raises
    ------
    FormatError
        When the path does not exist, a directory holds no (or several)
        ``*.otf2`` files, or the file is empty, unreadable or not an OTF2
        anchor file, or the archive lacks its global definitions file.
    """
    p = Path(path)
    if not p.exists():
        raise FormatError(p, "no such file or directory")
    if p.is_dir():
        cands = sorted(p.glob("*.otf2"))
        if not cands:
            raise FormatError(p, "directory holds no OTF2 anchor file (*.otf2)")
        if len(cands) > 1:
            names = ", ".join(c.name for c in cands)
            raise FormatError(p, f"directory holds several OTF2 anchor files ({names}); pass one of them")
        p = cands[0]
    try:
        size = p.stat().st_size
        with open(p, "rb") as f:
            head = f.read(8)
    except OSError as e:
        raise FormatError(p, f"cannot read: {e.strerror or e}") from None
    if size == 0:
        raise FormatError(p, "empty file, not an OTF2 anchor file")
    if not _looks_like_anchor(head):
        raise FormatError(p, "not an OTF2 anchor file (bad magic bytes)", where="offset 0")
    defs = p.with_suffix(".def")
    if not defs.is_file():
        raise FormatError(defs, "global definitions file of the archive is missing")
    if defs.stat().st_size == 0:
        raise FormatError(defs, "global definitions file is empty")
    return str(p.resolve())
