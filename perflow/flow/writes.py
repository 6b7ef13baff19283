"""Where a running flow may write files: the run's output folder, and folders the user allowed.

A flow file may come from someone else, and the settings of its steps are
its author's: a ``path`` setting of ``~/.bashrc`` must not overwrite the
user's login script. So every pass that writes a file asks
:func:`output_path` for the path to write, and under a flow run
(:func:`perflow.run`, ``perflow run``) the answer follows the run's
:class:`WritePolicy`:

* a relative path is taken relative to the run's output folder
  (``perflow run --output DIR``, ``perflow.run(..., output_dir=DIR)``);
* the path is normalised and resolved (``..`` and symbolic links, those
  already on disk included) and must stay inside the output folder or a
  folder allowed explicitly (``--allow-write DIR``, ``allow_write=[DIR]``);
* anything else is refused with :class:`~perflow.errors.WriteRefused`,
  naming the setting and the folders allowed (the step failing names the
  step). A run without an output folder writes nowhere unless allowed;
* the check cannot be raced: each allowed folder is opened once (its
  descriptor held for the run) and every write below it walks down from that
  descriptor one folder at a time with ``O_NOFOLLOW`` and writes through the
  descriptor of the last one (:func:`perflow._atomic.confined`), so a folder
  swapped for a symbolic link between the check and the write is refused,
  never followed.

Called directly from Python (no flow running), a pass writes where its
caller says: :func:`output_path` returns the path unchanged. The policy of
the running flow is held in a context variable that the scheduler's worker
threads inherit, so it holds for every step of the run and nothing else.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .._atomic import confined
from ..errors import WriteRefused

__all__ = ["WritePolicy", "output_path", "write_policy", "current_write_policy"]


@dataclass(frozen=True)
class WritePolicy:
    """Where the running flow may write.

    Attributes
    ----------
    output_dir : Path or None
        The run's output folder (resolved): relative paths are taken relative to it.
    allowed : tuple of Path
        Further folders (resolved) the user allowed.
    """

    output_dir: Path | None = None
    allowed: tuple[Path, ...] = ()
    _fds: dict[Path, int] = field(default_factory=dict, compare=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, compare=False, repr=False)

    @classmethod
    def make(
        cls, output_dir: str | os.PathLike[str] | None, allow_write: Iterable[str | os.PathLike[str]] = ()
    ) -> WritePolicy:
        """A policy from the folders as given (they are resolved now, once)."""
        out = Path(os.path.realpath(os.path.abspath(output_dir))) if output_dir is not None else None
        return cls(out, tuple(Path(os.path.realpath(os.path.abspath(d))) for d in allow_write))

    def roots(self) -> tuple[Path, ...]:
        """Every folder writes may go to."""
        return ((self.output_dir,) if self.output_dir is not None else ()) + self.allowed

    def descriptor(self, root: Path) -> int:
        """The descriptor of an allowed folder, opened (and created) on first use and held until :meth:`close`."""
        with self._lock:
            fd = self._fds.get(root)
            if fd is None:
                root.mkdir(parents=True, exist_ok=True)
                flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
                try:
                    fd = os.open(root, flags | getattr(os, "O_CLOEXEC", 0))
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise WriteRefused(
                            f"{root}: the output folder was replaced by a symbolic link or a file"
                        ) from None
                    raise
                self._fds[root] = fd
            return fd

    def openers(self) -> list[tuple[Path, Callable[[], int]]]:
        """(folder, opener) pairs for :func:`perflow._atomic.confined`."""
        return [(r, lambda r=r: self.descriptor(r)) for r in self.roots()]

    def close(self) -> None:
        """Close the folders' descriptors."""
        with self._lock:
            for fd in self._fds.values():
                os.close(fd)
            self._fds.clear()

    def resolve(self, path: str | os.PathLike[str], setting: str = "path") -> Path:
        """The path to write for the value of ``setting``, or raise :class:`WriteRefused`."""
        raw = os.fspath(path)
        if "\0" in raw:
            raise WriteRefused(f"setting {setting}={raw!r}: a path cannot hold a NUL character")
        p = Path(raw)
        if not p.is_absolute():
            if self.output_dir is None:
                raise WriteRefused(
                    f"setting {setting}={raw!r}: this run has no output folder to write it in "
                    "(give one: perflow run --output DIR, perflow.run(..., output_dir=DIR))"
                )
            p = self.output_dir / p
        # realpath resolves '..' and every symbolic link already on disk (a link planted inside the
        # output folder that points outside it leads outside and is refused)
        try:
            real = Path(os.path.realpath(p))
        except OSError as exc:  # a component changed while it was resolved (a folder swapped for a link)
            raise WriteRefused(
                f"setting {setting}={raw!r}: {exc.filename or p} changed while the path was checked "
                f"({exc.strerror}); not written"
            ) from None
        roots = self.roots()
        if real in roots:
            raise WriteRefused(f"setting {setting}={raw!r} names the folder {real} itself, not a file in it")
        if any(real.is_relative_to(root) for root in roots):
            return real
        allowed = ", ".join(str(r) for r in roots) or "none"
        raise WriteRefused(
            f"setting {setting}={raw!r} writes to {real}, outside the folders this run may write to "
            f"({allowed}); allow it with --allow-write DIR (perflow.run(..., allow_write=[DIR]))"
        )


_POLICY: contextvars.ContextVar[WritePolicy | None] = contextvars.ContextVar("perflow_write_policy", default=None)


def current_write_policy() -> WritePolicy | None:
    """The policy of the running flow (``None`` outside a flow run)."""
    return _POLICY.get()


@contextlib.contextmanager
def write_policy(
    output_dir: str | os.PathLike[str] | None, allow_write: Iterable[str | os.PathLike[str]] = ()
) -> Iterator[WritePolicy]:
    """Apply a :class:`WritePolicy` to the passes run inside the block."""
    policy = WritePolicy.make(output_dir, allow_write)
    token = _POLICY.set(policy)
    try:
        with confined(policy.openers()):
            yield policy
    finally:
        _POLICY.reset(token)
        policy.close()


def output_path(path: str | os.PathLike[str] | None, *, setting: str = "path") -> Path | None:
    """The file a pass should write for a path setting (``None``/``""``: no file).

    Outside a flow run: ``path`` as given. Under a flow run: resolved by the
    run's :class:`WritePolicy`.

    Raises
    ------
    WriteRefused
        Under a flow run, for a path outside the folders the run may write to.
    """
    if path is None or path == "":
        return None
    policy = _POLICY.get()
    if policy is None:
        return Path(path)
    return policy.resolve(path, setting)
