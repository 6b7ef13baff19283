"""The opt-in cache of step results across runs: a directory of signed entries keyed by content.

A step's key (:func:`task_key`) is a digest of the pass name, the pass
version, every setting (defaults included) and the fingerprint of every
input: a flow input's content fingerprint (:mod:`perflow.flow.fingerprint`:
files and folders by the hash of their bytes), or, for the output of an
upstream step, that step's own key and the output name. Keys therefore
chain like a Merkle tree: a changed setting or input changes the key of its
step and of everything downstream, while an unchanged flow finds every key
without recomputing (or even loading) intermediates.

Layout (``DIR/v2/<2 hex>/<key>/``): ``meta.json`` (pass, version, step, key,
outputs, how each is stored and the BLAKE2b digest of its bytes, and a MAC
over all of it) and one file per output: a saved PAG folder for PAGs, a
pickle for everything else. Entries are written to a temporary folder and
swapped into place (:mod:`perflow._atomic`), so readers never see half an
entry. ``DIR/v2/files/`` keeps the content hashes of input files (signed
too), so an unchanged multi-gigabyte input is not read again to find its
fingerprint.

Trust: an entry is loaded (and a pickle unpickled) only when its MAC,
keyed by ``DIR/key`` (32 random bytes, created with mode 0600 on first use;
a key file that is a link, not yours, or readable by others is refused
with :class:`~perflow.errors.CacheError`), matches and every file's digest
matches the signed one. A file planted in the cache folder by someone who
cannot read the key is ignored (and removed), never executed; a damaged
entry counts as a miss. Whoever can read the key file can run code as you
through the cache: keep it yours.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import json
import logging
import os
import pickle
import re
import secrets
import shutil
import stat
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._atomic import atomic_dir, temp_sibling, write_text
from ..errors import CacheError
from ..pag.persist import load
from .fingerprint import digest_of
from .types import PAGType

__all__ = ["Cache", "task_key", "CACHE_FORMAT", "FileHashes"]

log = logging.getLogger(__name__)
CACHE_FORMAT = 2
KEY_BYTES = 32
_NAME = re.compile(r"^[0-9]+\.(pkl|pag)$")


def task_key(
    pass_name: str, version: str, settings: Mapping[str, str], inputs: Mapping[str, str], outputs: tuple[str, ...]
) -> str:
    """The cache key of one step from fingerprints of its settings and inputs."""
    parts = [f"perflow-cache-{CACHE_FORMAT}", f"pass={pass_name}", f"version={version}", "outputs=" + ",".join(outputs)]
    parts += [f"setting:{k}={settings[k]}" for k in sorted(settings)]
    parts += [f"input:{k}={inputs[k]}" for k in sorted(inputs)]
    return digest_of(*parts)


def _read_key(path: Path) -> bytes | None:
    """The secret in ``path`` after checking it is ours and private; None when missing."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise CacheError(f"{path}: the cache key is a symbolic link; refusing to trust this cache") from None
        raise CacheError(f"{path}: cannot read the cache key: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CacheError(f"{path}: the cache key is not a regular file; refusing to trust this cache")
        if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
            raise CacheError(
                f"{path}: the cache key belongs to user {st.st_uid}, not you; refusing to trust this cache "
                "(use a cache folder of your own)"
            )
        if os.name == "posix" and st.st_mode & 0o077:
            raise CacheError(
                f"{path}: the cache key is readable or writable by others (mode {stat.S_IMODE(st.st_mode):o}); "
                "refusing to trust this cache (chmod 600 it, or remove the cache folder)"
            )
        data = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) != KEY_BYTES:
        raise CacheError(f"{path}: the cache key is damaged ({len(data)} bytes); remove the cache folder")
    return data


def _secret(folder: Path) -> bytes:
    """The cache's signing key, created (mode 0600) on first use."""
    path = folder / "key"
    for _ in range(5):
        key = _read_key(path)
        if key is not None:
            return key
        tmp = temp_sibling(path)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            os.write(fd, secrets.token_bytes(KEY_BYTES))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)  # fails when another run created the key meanwhile: use theirs
        except FileExistsError:
            pass
        except OSError:  # no hard links here
            os.replace(tmp, path)
        finally:
            if tmp.exists():
                os.unlink(tmp)
    raise CacheError(f"{path}: cannot create the cache key")


def _canon(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), default=str).encode()


def _bytes_digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=32).hexdigest()


def _folder_digest(d: Path) -> str:
    """Digest of a saved PAG folder: its file names and bytes (a plain folder of files)."""
    parts = []
    for f in sorted(os.scandir(d), key=lambda e: e.name):
        if not f.is_file(follow_symlinks=False):
            raise ValueError(f"{f.path} is not a plain file")
        with open(f.path, "rb") as fh:
            parts += [f.name, hashlib.file_digest(fh, lambda: hashlib.blake2b(digest_size=32)).hexdigest()]
    return digest_of(*parts)


class FileHashes:
    """Content hashes of input files kept in the cache folder, signed (a :class:`~.fingerprint.HashStore`)."""

    def __init__(self, cache: Cache) -> None:
        self.cache = cache
        self.dir = cache.root / "files"

    def _file(self, root: str) -> Path:
        return self.dir / f"{digest_of('root', root)}.json"

    def load(self, root: str) -> dict[str, str]:
        try:
            doc = json.loads(self._file(root).read_bytes())
            body = doc["body"]
            if not self.cache.verify(body, doc["mac"]) or body.get("root") != root:
                return {}
            return {str(k): str(v) for k, v in body["hashes"].items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return {}

    def save(self, root: str, hashes: dict[str, str]) -> None:
        body = {"root": root, "hashes": hashes}
        try:
            write_text(self._file(root), json.dumps({"body": body, "mac": self.cache.sign(body)}), fsync=False)
        except OSError as exc:
            log.info("cannot store file hashes in %s: %s", self.dir, exc)


class Cache:
    """A directory of cached step results.

    Parameters
    ----------
    path : path-like
        The cache directory (created when missing).

    Raises
    ------
    CacheError
        When the folder's key file is not the user's own private file.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).expanduser()
        self.root = self.path / f"v{CACHE_FORMAT}"
        self.root.mkdir(parents=True, exist_ok=True)
        self._key = _secret(self.path)
        self.file_hashes = FileHashes(self)

    def __repr__(self) -> str:
        return f"Cache({str(self.path)!r})"

    # ---------------------------------------------------------------- signing
    def sign(self, body: Mapping[str, Any]) -> str:
        """The MAC of ``body`` under this cache's key."""
        return hashlib.blake2b(_canon(body), key=self._key, digest_size=32).hexdigest()

    def verify(self, body: Any, mac: Any) -> bool:
        """Whether ``mac`` is this cache's MAC of ``body``."""
        return isinstance(body, dict) and isinstance(mac, str) and hmac.compare_digest(self.sign(body), mac)

    # ---------------------------------------------------------------- entries
    def _entry(self, key: str) -> Path:
        return self.root / key[:2] / key

    def _meta(self, key: str) -> dict[str, Any] | None:
        """The entry's verified description, or None (missing; a forged or damaged one is removed)."""
        d = self._entry(key)
        try:
            doc = json.loads(_regular(d / "meta.json").read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            self._drop(d, f"unreadable description ({exc})")
            return None
        body = doc.get("body") if isinstance(doc, dict) else None
        if not self.verify(body, doc.get("mac") if isinstance(doc, dict) else None) or body.get("key") != key:
            self._drop(d, "not signed by this cache's key (planted or damaged)")
            return None
        return body

    def _drop(self, d: Path, why: str) -> None:
        if not d.exists() and not d.is_symlink():
            return
        log.warning("cache entry %s is ignored: %s; recomputing", d, why)
        if d.is_dir() and not d.is_symlink():
            shutil.rmtree(d, ignore_errors=True)

    def __contains__(self, key: str) -> bool:
        return self._meta(key) is not None

    def check(self, key: str) -> bool:
        """Whether the entry is there and whole: its description signed and every file matching its digest.

        A damaged entry is removed (with the warning that it is recomputed), so
        that a run plans to compute it instead of failing when it loads it.
        """
        meta = self._meta(key)
        if meta is None:
            return False
        d = self._entry(key)
        try:
            for info in meta["outputs"].values():
                if not _NAME.match(str(info["file"])):
                    raise ValueError(f"bad file name {info['file']!r}")
                f = d / info["file"]
                got = _folder_digest(f) if info["kind"] == "pag" else _bytes_digest(_regular(f).read_bytes())
                if got != info["digest"]:
                    raise ValueError(f"{f.name} does not match its signed digest")
        except Exception as exc:  # noqa: BLE001 - damaged in any way: recompute
            self._drop(d, str(exc))
            return False
        return True

    def get(self, key: str) -> dict[str, Any] | None:
        """The outputs stored under ``key``, or ``None`` (a miss, or an entry that fails verification)."""
        meta = self._meta(key)
        if meta is None:
            return None
        d = self._entry(key)
        try:
            out = {}
            for name, info in meta["outputs"].items():
                if not _NAME.match(str(info["file"])):
                    raise ValueError(f"bad file name {info['file']!r}")
                f = d / info["file"]
                if info["kind"] == "pag":
                    if _folder_digest(f) != info["digest"]:
                        raise ValueError(f"{f.name} does not match its signed digest")
                    out[name] = load(f)
                elif info["kind"] == "pickle":
                    data = _regular(f).read_bytes()
                    if _bytes_digest(data) != info["digest"]:
                        raise ValueError(f"{f.name} does not match its signed digest")
                    out[name] = pickle.loads(data)  # noqa: S301 -- signed by this user's key, checked above
                else:
                    raise ValueError(f"unknown kind {info['kind']!r}")
            return out
        except Exception as exc:  # damaged, or from an incompatible version: drop it
            self._drop(d, str(exc))
            return None

    def put(self, key: str, outputs: Mapping[str, Any], *, info: Mapping[str, Any] | None = None) -> bool:
        """Store a step's outputs; return whether they were stored (unpicklable values are not)."""
        if key in self:
            return True
        try:
            with atomic_dir(self._entry(key)) as tmp:
                files = {}
                for i, (name, value) in enumerate(outputs.items()):
                    if isinstance(value, PAGType):
                        value.save(tmp / f"{i}.pag")
                        files[name] = {"kind": "pag", "file": f"{i}.pag", "digest": _folder_digest(tmp / f"{i}.pag")}
                    else:
                        data = pickle.dumps(value, protocol=5)
                        (tmp / f"{i}.pkl").write_bytes(data)
                        files[name] = {"kind": "pickle", "file": f"{i}.pkl", "digest": _bytes_digest(data)}
                body = {
                    "format": CACHE_FORMAT,
                    "created": time.time(),
                    **dict(info or {}),
                    "key": key,
                    "outputs": files,
                }
                (tmp / "meta.json").write_text(json.dumps({"body": json.loads(_canon(body)), "mac": self.sign(body)}))
            return True
        except Exception as exc:
            log.warning("cannot cache the result of %s: %s", dict(info or {}).get("step", key), exc)
            return False

    def clear(self) -> None:
        """Remove every entry (the key stays)."""
        shutil.rmtree(self.root, ignore_errors=True)
        self.root.mkdir(parents=True, exist_ok=True)

    def __len__(self) -> int:
        return sum(1 for _ in self.root.glob("*/*/meta.json"))


def _regular(p: Path) -> Path:
    """``p`` when it is a regular file (a FIFO or a device in a cache entry would block the read: OSError)."""
    import stat as _stat

    st = os.stat(p)
    if not _stat.S_ISREG(st.st_mode):
        raise OSError(f"{p.name} is not a regular file")
    return p
