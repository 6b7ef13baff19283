"""Reading several runs, and short labels for call paths (helpers of the scalability passes)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from perflow.errors import PassError
from perflow.flow.registry import pass_
from perflow.pag.pag import PAG

__all__ = ["read_runs", "short_labels"]


def short_labels(paths: Sequence[str], sep: str = "/") -> np.ndarray:
    """For each call path, its shortest tail of components that no other path shares.

    ``["main/a/MPI_Send", "main/b/MPI_Send", "main/c"]`` gives
    ``["a/MPI_Send", "b/MPI_Send", "c"]``; one pandas pass per depth level.
    """
    parts = pd.Series(list(paths), dtype=object).str.split(sep)
    out = np.empty(len(parts), dtype=object)
    todo = np.ones(len(parts), dtype=bool)
    depth = int(parts.map(len).max()) if len(parts) else 0
    for k in range(1, depth + 1):
        tail = parts.map(lambda c, k=k: sep.join(c[-k:])).to_numpy()
        counts = pd.Series(tail).map(pd.Series(tail).value_counts()).to_numpy()
        hit = todo & (counts == 1)
        out[hit] = tail[hit]
        todo &= ~hit
        if not todo.any():
            break
    out[todo] = np.asarray(list(paths), dtype=object)[todo]
    return out


def _expand(entry: Any, pattern: str, fmt: str | None) -> list[Any]:
    if isinstance(entry, PAG):
        return [entry]
    p = Path(entry).expanduser()
    if not p.exists():
        raise PassError(f"{p}: no such file or directory")
    if p.is_dir():
        from perflow.errors import FormatError
        from perflow.readers import detect_format, reader_module

        try:
            is_run = bool(reader_module(fmt).detect(p)) if fmt else bool(detect_format(p))
        except (FormatError, OSError):
            is_run = False
        if is_run:  # a run stored as a directory (HPCToolkit database, OTF2 archive, saved PAG)
            return [p]
        found = sorted(q for q in p.glob(pattern) if not q.name.startswith("."))
        if not found:
            raise PassError(f"{p}: no runs matching {pattern!r} in this directory")
        return found
    return [p]


@pass_(version="1", tags=("io", "scalability"))
def read_runs(runs: list[Any] | Path | str, *, format: str | None = None, pattern: str = "*") -> list[PAG]:  # noqa: A002
    """Read several runs (for scalability, contention or differential analyses) into PAGs.

    Each entry of ``runs`` is a PAG (kept as is), a file or run directory
    (read with :func:`perflow.read`), or a directory holding one run per
    entry: a directory whose format cannot be detected is taken as such a
    collection, and its entries matching ``pattern`` are read in name order.
    A single path stands for a one-entry list.

    Parameters
    ----------
    runs : list or path
        Runs, files, run directories, or directories of runs.
    format : str, optional
        Force a format for every file instead of detecting it.
    pattern : str
        Glob selecting the runs inside a directory of runs.

    Returns
    -------
    list of PAG
        In the order given (directories expanded in name order).
    """
    from perflow.readers import read

    entries = list(runs) if isinstance(runs, list | tuple) else [runs]
    if not entries:
        raise PassError("read_runs needs at least one run")
    out: list[PAG] = []
    for e in entries:
        for item in _expand(e, pattern, format):
            out.append(item if isinstance(item, PAG) else read(item, format=format))
    return out
