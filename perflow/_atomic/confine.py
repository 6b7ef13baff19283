"""Confined writes: under a flow run's write policy, targets are reached from the roots' held descriptors.

:func:`confined` (set by :mod:`perflow.flow.writes`) names the roots; a
target inside one is reached from the root's descriptor one folder at a time
with ``O_NOFOLLOW`` (:func:`walk`), so a folder swapped for a symbolic link
after the policy checked the path cannot redirect the write (see
:mod:`perflow._atomic`).
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from ..errors import WriteRefused

__all__ = ["confined", "walk"]

#: (root folder, opener of its descriptor) pairs of the running confinement (see :func:`confined`)
_CONFINE: contextvars.ContextVar[tuple[tuple[Path, Callable[[], int]], ...]] = contextvars.ContextVar(
    "perflow_confine", default=()
)
_PINNED = os.path.isdir("/proc/self/fd")
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


@contextlib.contextmanager
def confined(roots: Sequence[tuple[Path, Callable[[], int]]]) -> Iterator[None]:
    """Inside the block, writes to targets under these roots go through the roots' descriptors (see above).

    ``roots``: ``(resolved folder, opener)`` pairs; the opener returns the
    folder's descriptor (opened once by its owner, who closes it).
    """
    token = _CONFINE.set(tuple(roots))
    try:
        yield
    finally:
        _CONFINE.reset(token)


def walk(target: Path) -> tuple[int, str] | None:
    """(descriptor of the target's folder, its name) reached from a confinement root; None when not confined."""
    roots = _CONFINE.get()
    if not roots or not _PINNED:
        return None
    for root, opener in roots:
        if target == root or not target.is_relative_to(root):
            continue
        parts = target.relative_to(root).parts
        fd = os.dup(opener())
        try:
            for i, part in enumerate(parts[:-1]):
                try:
                    try:
                        nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
                    except FileNotFoundError:
                        with contextlib.suppress(FileExistsError):
                            os.mkdir(part, dir_fd=fd)
                        nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK, errno.ENOENT):
                        where = root.joinpath(*parts[: i + 1])
                        raise WriteRefused(
                            f"{target}: {where} is no longer a folder (a symbolic link or a file took its place "
                            "after the run checked the path); not written"
                        ) from None
                    raise
                os.close(fd)
                fd = nfd
        except BaseException:
            os.close(fd)
            raise
        return fd, parts[-1]
    return None
