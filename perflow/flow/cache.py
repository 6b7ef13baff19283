"""The opt-in cache of step results across runs: a directory of entries keyed by content.

A step's key (:func:`task_key`) is a digest of the pass name, the pass
version, every setting (defaults included) and the fingerprint of every
input: a flow input's content fingerprint (:mod:`perflow.flow.fingerprint`),
or, for the output of an upstream step, that step's own key and the output
name. Keys therefore chain like a Merkle tree: a changed setting or input
changes the key of its step and of everything downstream, while an unchanged
flow finds every key without recomputing (or even loading) intermediates.

Layout (``DIR/v1/<2 hex>/<key>/``): ``meta.json`` (pass, version, step,
outputs and how each is stored) and one file per output: a saved PAG
directory for PAGs, a pickle for everything else. Entries are written to a
temporary directory and renamed into place, so readers never see half an
entry; a corrupt entry counts as a miss and is removed.

Trust: loading an entry unpickles it. Use cache directories only you can
write to (the same trust as the code you run).
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import shutil
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .fingerprint import digest_of

__all__ = ["Cache", "task_key", "CACHE_FORMAT"]

log = logging.getLogger(__name__)
CACHE_FORMAT = 1


def task_key(
    pass_name: str, version: str, settings: Mapping[str, str], inputs: Mapping[str, str], outputs: tuple[str, ...]
) -> str:
    """The cache key of one step from fingerprints of its settings and inputs."""
    parts = [f"perflow-cache-{CACHE_FORMAT}", f"pass={pass_name}", f"version={version}", "outputs=" + ",".join(outputs)]
    parts += [f"setting:{k}={settings[k]}" for k in sorted(settings)]
    parts += [f"input:{k}={inputs[k]}" for k in sorted(inputs)]
    return digest_of(*parts)


class Cache:
    """A directory of cached step results.

    Parameters
    ----------
    path : path-like
        The cache directory (created when missing).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).expanduser()
        self.root = self.path / f"v{CACHE_FORMAT}"
        self.root.mkdir(parents=True, exist_ok=True)

    def __repr__(self) -> str:
        return f"Cache({str(self.path)!r})"

    def _entry(self, key: str) -> Path:
        return self.root / key[:2] / key

    def __contains__(self, key: str) -> bool:
        return (self._entry(key) / "meta.json").is_file()

    def get(self, key: str) -> dict[str, Any] | None:
        """The outputs stored under ``key``, or ``None`` (a miss)."""
        d = self._entry(key)
        try:
            meta = json.loads((d / "meta.json").read_text())
            out = {}
            for name, info in meta["outputs"].items():
                f = d / info["file"]
                if info["kind"] == "pag":
                    from ..pag.persist import load

                    out[name] = load(f)
                else:
                    with open(f, "rb") as fh:
                        out[name] = pickle.load(fh)
            return out
        except FileNotFoundError:
            return None
        except Exception as exc:  # corrupt or from an incompatible version: drop it
            log.warning("cache entry %s is unreadable (%s); recomputing", d, exc)
            shutil.rmtree(d, ignore_errors=True)
            return None

    def put(self, key: str, outputs: Mapping[str, Any], *, info: Mapping[str, Any] | None = None) -> bool:
        """Store a step's outputs; return whether they were stored (unpicklable values are not)."""
        final = self._entry(key)
        if (final / "meta.json").is_file():
            return True
        tmp = self.root / f".tmp-{uuid.uuid4().hex}"
        tmp.mkdir(parents=True)
        try:
            files = {}
            for i, (name, value) in enumerate(outputs.items()):
                if type(value).__name__ == "PAG" and hasattr(value, "save"):
                    value.save(tmp / f"{i}.pag")
                    files[name] = {"kind": "pag", "file": f"{i}.pag"}
                else:
                    with open(tmp / f"{i}.pkl", "wb") as fh:
                        pickle.dump(value, fh, protocol=5)
                    files[name] = {"kind": "pickle", "file": f"{i}.pkl"}
            meta = {"format": CACHE_FORMAT, "created": time.time(), **dict(info or {}), "outputs": files}
            (tmp / "meta.json").write_text(json.dumps(meta, default=str))
            final.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.replace(tmp, final)
            except OSError:  # another run stored the same entry meanwhile
                shutil.rmtree(tmp, ignore_errors=True)
            return True
        except Exception as exc:
            log.warning("cannot cache the result of %s: %s", dict(info or {}).get("step", key), exc)
            shutil.rmtree(tmp, ignore_errors=True)
            return False

    def clear(self) -> None:
        """Remove every entry."""
        shutil.rmtree(self.root, ignore_errors=True)
        self.root.mkdir(parents=True, exist_ok=True)

    def __len__(self) -> int:
        return sum(1 for _ in self.root.glob("*/*/meta.json"))
