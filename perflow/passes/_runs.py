"""Reading several runs, and short labels for call paths (helpers of the scalability passes)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from perflow.sdk import PAG, FormatError, PassError, pass_
from perflow.sdk.io import expand_runs, read_run_list

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


@pass_(version="1", tags=("io", "scalability"))
def read_runs(runs: list[Any] | Path | str, *, format: str | None = None, pattern: str = "*") -> list[PAG]:  # noqa: A002
    """Read several runs (for scalability, contention or differential analyses) into PAGs.

    Each entry of ``runs`` is a PAG (kept as is), a file or run directory
    (read with :func:`perflow.read`), a glob (``"runs/*.cali"``), or a
    directory holding one run per entry: a directory whose format cannot be
    detected is taken as such a collection, and its entries matching
    ``pattern`` are read in natural name order (``27_cores`` before
    ``125_cores``). A single path stands for a one-entry list (see
    :mod:`perflow.readers.runs`; :func:`perflow.passes.ensemble.read_ensemble`
    reads the same into an :class:`~perflow.Ensemble`).

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
        In the order given (directories and globs expanded in natural name order).
    """

    if isinstance(runs, list | tuple) and not runs:
        raise PassError("read_runs needs at least one run")
    try:
        items = expand_runs(runs, pattern=pattern, format=format)  # every missing run named before reading any
    except FormatError as exc:
        raise PassError(str(exc)) from None
    return read_run_list(items, format=format)
