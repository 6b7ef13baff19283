"""The metadata of an ensemble's runs: run names, the metadata table and its columns, groups by metadata.

:class:`~perflow.pag.ensemble.Ensemble` keeps one row per run: the run's name
(:func:`default_names`: its source file's name, made unique), the columns of
:func:`perflow.pag.runinfo.run_info` (:func:`meta_frame`), and columns a user
adds (:func:`merged_metadata`, :func:`metadata_column`); text with missing
values stays ``object`` so missing reads as None on every pandas
(:func:`meta_series`). :meth:`Ensemble.groupby` returns an
:class:`EnsembleGroups` keyed by :func:`group_key`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..errors import PAGError

if TYPE_CHECKING:  # pragma: no cover
    from .ensemble import Ensemble
    from .pag import PAG

__all__ = [
    "EnsembleGroups",
    "default_names",
    "group_key",
    "meta_series",
    "meta_frame",
    "merged_metadata",
    "metadata_column",
]


def default_names(runs: Sequence[PAG]) -> list[str]:
    """A label per run: the name of its source file without suffix (``27_cores``), made unique; else ``run<i>``."""
    out: list[str] = []
    for i, p in enumerate(runs):
        src = p.attrs.get("source")
        base = Path(str(src)).name.split(".")[0] if src else ""
        if not base or base in ("traces", "profile", "experiment", "run"):
            base = Path(str(src)).parent.name if src else ""
        base = base or f"run{i}"
        name, k = base, 2
        while name in out:
            name, k = f"{base}#{k}", k + 1
        out.append(name)
    return out


def group_key(key: Any) -> Any:
    """A group key with numpy scalars as Python ones (``27``, not ``np.int64(27)``)."""
    if isinstance(key, tuple):
        return tuple(group_key(k) for k in key)
    return key.item() if isinstance(key, np.generic) else key


def merged_metadata(
    meta: pd.DataFrame, metadata: pd.DataFrame | Mapping[str, Any], names: Sequence[str], runs: Sequence[PAG]
) -> pd.DataFrame:
    """``meta`` (indexed by run name) with the columns of ``metadata`` (see :meth:`Ensemble.with_metadata`) set."""
    meta = meta.copy()
    if isinstance(metadata, pd.DataFrame):
        df = metadata
        if not df.index.isin(names).all():
            if len(df) != len(runs):
                raise PAGError(
                    f"metadata has {len(df)} rows for {len(runs)} runs and its index is not the run names "
                    f"({', '.join(names)})"
                )
            df = df.set_axis(pd.Index(names, name="run"))
        for c in df.columns:
            meta[c] = df[c].reindex(meta.index)
        return meta
    for c, v in metadata.items():
        meta[c] = meta_series(metadata_column(c, v, names, runs), meta.index)
    return meta


def metadata_column(name: str, values: Any, names: Sequence[str], runs: Sequence[PAG]) -> list[Any]:
    """One metadata column's values, one per run: a scalar, a sequence, ``{run name: value}`` or a function of the run."""
    if callable(values):
        return [values(r) for r in runs]
    if isinstance(values, Mapping):
        unknown = sorted(set(map(str, values)) - set(names))
        if unknown:
            raise PAGError(f"metadata column {name!r} names unknown runs: {', '.join(unknown)}")
        return [values.get(n) for n in names]
    if isinstance(values, str) or not isinstance(values, Sequence | np.ndarray | pd.Series):
        return [values] * len(runs)
    if len(values) != len(runs):
        raise PAGError(f"metadata column {name!r} has {len(values)} values for {len(runs)} runs")
    return list(values)


class EnsembleGroups(dict):
    """The groups of :meth:`Ensemble.groupby`: ``{key: Ensemble}``, with statistics for all groups at once."""

    def __init__(self, groups: Mapping[Any, Ensemble], by: Sequence[str]) -> None:
        super().__init__(groups)
        self.by = list(by)

    def stats(self, metric: str = "time_exc", agg: str = "sum", **kwargs: Any) -> pd.DataFrame:
        """:meth:`Ensemble.stats` of each group, stacked, with the group's key column(s) first."""
        parts = []
        for key, ens in self.items():
            s = ens.stats(metric, agg, **kwargs)
            keys = key if isinstance(key, tuple) else (key,)
            for c, k in reversed(list(zip(self.by, keys))):
                s.insert(0, c, k)
            parts.append(s.reset_index())
        out = pd.concat(parts, ignore_index=True)
        if parts:
            out.attrs.update({k: v for k, v in parts[0].attrs.items()})
        return out

    def metadata(self) -> pd.DataFrame:
        """Number of runs and their names per group."""
        rows = [
            {**dict(zip(self.by, k if isinstance(k, tuple) else (k,))), "runs": len(e), "names": ", ".join(e.names)}
            for k, e in self.items()
        ]
        return pd.DataFrame(rows)


def meta_series(values: Sequence[Any], index: pd.Index) -> pd.Series:
    """One metadata column; text with missing values stays ``object`` so missing is None on every pandas.

    pandas 3 infers its ``str`` dtype for text, whose missing value is NaN; a run
    whose tool recorded no ``command`` must read as None, as it does on pandas 2.
    """
    vals = list(values)
    if any(v is None for v in vals) and all(v is None or isinstance(v, str) for v in vals):
        return pd.Series(vals, index=index, dtype=object)
    return pd.Series(vals, index=index)


def meta_frame(records: Sequence[Mapping[str, Any]], index: pd.Index) -> pd.DataFrame:
    """The metadata table of some runs' records (keys in first-seen order), columns as :func:`meta_series`."""
    keys = list(dict.fromkeys(k for r in records for k in r))
    return pd.DataFrame({k: meta_series([r.get(k) for r in records], index) for k in keys}, index=index)
