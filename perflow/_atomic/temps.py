"""Temporary names next to a target, and the removal of the stale ones killed writers left.

Temporaries are ``.NAME.tmp-HOST-PID-RANDOM`` (plus the target's suffix for
files; :func:`temp_sibling`); a swapped-out folder waits as
``.NAME.old-HOST-PID-RANDOM``. :func:`clean_stale` removes those that are ours
(this naming, owned by this user, not a symbolic link) and dead (their
process is gone on this host) or old (:data:`STALE_SECONDS`, for other hosts).
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import shutil
import socket
import time
from pathlib import Path

__all__ = ["temp_sibling", "clean_stale", "STALE_SECONDS", "HOST"]

log = logging.getLogger(__package__)  # perflow._atomic's logger, as before the package was split

#: Temporaries from another host (whose process cannot be checked) older than this are stale.
STALE_SECONDS = 24 * 3600

#: This host's name as it appears in temporary names.
HOST = re.sub(r"[^A-Za-z0-9]", "", socket.gethostname())[:32]


def temp_sibling(target: str | os.PathLike[str], kind: str = "tmp", *, suffix: bool = True) -> Path:
    """A fresh temporary name next to ``target``: ``.NAME.KIND-HOST-PID-RANDOM`` (+ the target's suffix)."""
    t = Path(target)
    ext = t.suffix if suffix and t.suffix and len(t.suffix) <= 16 else ""
    return t.parent / f".{t.name}.{kind}-{HOST}-{os.getpid()}-{secrets.token_hex(4)}{ext}"


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def clean_stale(target: str | os.PathLike[str], *, max_age: float = STALE_SECONDS) -> int:
    """Remove the stale temporaries of ``target`` left by killed writers; return how many were removed.

    Only entries named like this module's temporaries of ``target``, owned by
    this user and not symbolic links are considered; of those, ones whose
    process is gone (same host) or older than ``max_age`` seconds.
    """
    t = Path(target)
    pat = re.compile(
        rf"^\.{re.escape(t.name)}\.(?:tmp|old)-(?P<host>[A-Za-z0-9]*)-(?P<pid>\d+)-[0-9a-f]{{8}}(?:\.[^.]+)?$"
    )
    removed = 0
    try:
        entries = list(os.scandir(t.parent))
    except OSError:
        return 0
    now = time.time()
    uid = os.geteuid() if hasattr(os, "geteuid") else None
    for e in entries:
        m = pat.match(e.name)
        if m is None:
            continue
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue
        if e.is_symlink() or (uid is not None and st.st_uid != uid):
            continue
        same_host = m["host"] == HOST
        if (same_host and _alive(int(m["pid"]))) or (not same_host and now - st.st_mtime < max_age):
            continue
        try:
            if e.is_dir(follow_symlinks=False):
                shutil.rmtree(e.path)
            else:
                os.unlink(e.path)
            removed += 1
            log.info("removed %s, left by a killed write", e.path)
        except FileNotFoundError:
            pass  # another writer cleaned it meanwhile
        except OSError as exc:
            log.warning("cannot remove the stale temporary %s: %s", e.path, exc)
    return removed
