"""Passes over ensembles of runs (:class:`perflow.Ensemble`): read, metadata, statistics, per-run analyses, differences.

* :func:`read_ensemble`: a directory, glob or list of runs into an ensemble;
* :func:`ensemble_metadata`: its metadata table (one row per run);
* :func:`ensemble_stats`: statistics per call path across the runs
  (:meth:`perflow.Ensemble.stats`), optionally per group of a metadata column;
* :func:`per_run`: any registered pass run on every run, its tables stacked
  with the run's name and chosen metadata columns (hotspots or imbalance per run);
* :func:`ensemble_differential`: every run against a baseline run, call path
  by call path (:func:`perflow.passes.differential.differential` per run).

``scalability`` takes an ensemble as is (an ensemble is a sequence of PAGs).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from perflow.sdk import FormatError, PassError, get_pass, pass_
from perflow.sdk.io import expand_runs, read_run_list
from perflow.sdk.profile import DEFAULT_PERCENTILES, Ensemble

from .differential import differential

__all__ = ["read_ensemble", "ensemble_metadata", "ensemble_stats", "per_run", "ensemble_differential"]


def _ensemble(runs: Any) -> Ensemble:
    if isinstance(runs, Ensemble):
        return runs
    if isinstance(runs, list | tuple):
        return Ensemble(runs)
    raise PassError(f"expected an ensemble or a list of PAGs, not a {type(runs).__name__}")


@pass_(version="1", tags=("io", "ensemble"))
def read_ensemble(runs: list[Any] | Path | str, *, format: str | None = None, pattern: str = "*") -> Ensemble:  # noqa: A002
    """Read runs into an ensemble: a directory of runs, a glob, or a list of those (see :mod:`perflow.readers.runs`).

    Parameters
    ----------
    runs : list, path or glob
        Runs, files, run directories, directories of runs or glob patterns.
    format : str, optional
        Force a format for every run instead of detecting it.
    pattern : str
        Glob selecting the runs inside a directory of runs.
    """

    try:
        items = expand_runs(runs, pattern=pattern, format=format)
    except FormatError as exc:
        raise PassError(str(exc)) from None
    return Ensemble(read_run_list(items, format=format))


@pass_(version="1", tags=("ensemble",))
def ensemble_metadata(runs: Ensemble, *, columns: list[str] | None = None) -> pd.DataFrame:
    """The metadata table of an ensemble: one row per run (``run`` first), all columns or ``columns``.

    Parameters
    ----------
    runs : Ensemble
        The runs.
    columns : list of str, optional
        Keep these columns (in this order).
    """
    ens = _ensemble(runs)
    meta = ens.metadata
    if columns is not None:
        meta = meta[ens._key(columns)]  # noqa: SLF001 - the same did-you-mean as groupby
    return meta.reset_index()


@pass_(version="1", tags=("profile", "ensemble"))
def ensemble_stats(
    runs: Ensemble,
    *,
    metric: str = "time_exc",
    agg: str = "sum",
    by: str | None = None,
    percentiles: list[float] | None = None,
    sort: str = "mean",
    k: int | None = None,
) -> pd.DataFrame:
    """Per call path: count, mean, std, min, percentiles and max of a metric across the runs having it.

    The per-run value of a call path is ``metric`` aggregated over that run's
    processes and threads with ``agg``; runs lacking the path are left out
    (``n_runs`` counts the others).

    Parameters
    ----------
    runs : Ensemble
        The runs.
    metric : str
        Metric every run has.
    agg : str
        How one run's processes and threads make its value (sum, mean, max, ...).
    by : str, optional
        A metadata column: statistics per group of runs (its value first in each row).
    percentiles : list of float, optional
        Percentiles to report (default 25, 50, 75).
    sort : str
        Column to order by, largest first (within each group).
    k : int, optional
        Keep the first ``k`` rows (of each group).

    Returns
    -------
    pandas.DataFrame
        The group key (with ``by``), ``name``, ``n_runs``, ``mean``, ``std``,
        ``min``, ``p<q>``..., ``max``, ``call_path``, ``vertex`` (of the union tree).
    """
    ens = _ensemble(runs)
    pct = tuple(percentiles) if percentiles is not None else DEFAULT_PERCENTILES
    if by is None:
        df = ens.stats(metric, agg, percentiles=pct).reset_index()
        keys: list[str] = []
    else:
        df = ens.groupby(by).stats(metric, agg, percentiles=pct)
        keys = [by]
    if sort not in df.columns:
        raise PassError(f"cannot sort by {sort!r}; columns are {', '.join(map(str, df.columns))}")
    attrs = dict(df.attrs)
    key = np.nan_to_num(pd.to_numeric(df[sort], errors="coerce").to_numpy(dtype=np.float64), nan=-np.inf)
    df = df.assign(_key=-key).sort_values([*keys, "_key", "call_path"], kind="stable").drop(columns="_key")
    if k is not None:
        df = df.groupby(keys, sort=False, dropna=False).head(int(k)) if keys else df.head(int(k))
    first = [*keys, "name", "n_runs"]
    df = df[first + [c for c in df.columns if c not in (*first, "call_path", "vertex")] + ["call_path", "vertex"]]
    df = df.reset_index(drop=True)
    df.attrs.update(attrs)
    return df


@pass_(version="1", tags=("profile", "ensemble"))
def per_run(
    runs: Ensemble,
    *,
    analysis: str = "hotspot",
    settings: dict[str, Any] | None = None,
    metadata: list[str] | None = None,
) -> pd.DataFrame:
    """Run a registered pass on every run and stack its tables: ``run``, the chosen metadata, then the pass's columns.

    Parameters
    ----------
    runs : Ensemble
        The runs.
    analysis : str
        Name of a pass taking one PAG and returning a table (``hotspot``, ``imbalance``, ``pop_metrics``, ...).
    settings : dict, optional
        Settings of that pass.
    metadata : list of str, optional
        Metadata columns to put beside ``run`` (e.g. ``[nprocs]``).
    """

    ens = _ensemble(runs)
    spec = get_pass(analysis)
    if len(spec.inputs) != 1:
        raise PassError(f"per_run needs a pass with one input (a PAG); {analysis!r} has {len(spec.inputs)}")
    known = {s.name for s in spec.settings}
    unknown = sorted(set(settings or {}) - known)
    if unknown:
        raise PassError(f"pass {analysis!r} has no setting {unknown[0]!r} (settings: {', '.join(sorted(known))})")
    df = ens.apply(spec.func, **(settings or {}))
    if metadata:
        meta = ens.metadata[ens._key(metadata)]  # noqa: SLF001
        for i, c in enumerate(metadata):
            df.insert(1 + i, c, meta[c].reindex(df["run"]).to_numpy())
    return df


@pass_(version="1", tags=("profile", "ensemble", "differential"))
def ensemble_differential(
    runs: Ensemble,
    *,
    baseline: str | int = 0,
    metric: str = "time_exc",
    agg: str = "sum",
    normalize: bool = False,
    k: int | None = None,
) -> pd.DataFrame:
    """Every run against a baseline run, call path by call path (:func:`~perflow.passes.differential.differential`).

    Parameters
    ----------
    runs : Ensemble
        The runs.
    baseline : str or int
        The baseline run, by name or position.
    metric, agg, normalize
        As for ``differential``.
    k : int, optional
        Keep the ``k`` largest changes of each run.

    Returns
    -------
    pandas.DataFrame
        ``run`` then the columns of ``differential`` (``value_a`` is the baseline's), largest changes first per run.
    """
    ens = _ensemble(runs)
    base = ens[baseline] if isinstance(baseline, str) else ens[int(baseline)]
    base_name = baseline if isinstance(baseline, str) else ens.names[int(baseline)]
    parts = []
    for name, r in zip(ens.names, ens.runs):
        if name == base_name:
            continue
        d = differential(base, r, metric=metric, agg=agg, normalize=normalize, k=k)
        d.insert(0, "run", name)
        parts.append(d)
    if not parts:
        raise PassError("ensemble_differential needs a run besides the baseline")
    out = pd.concat(parts, ignore_index=True)
    out.attrs.update({"baseline": base_name, "metric": metric, "agg": agg})
    return out
