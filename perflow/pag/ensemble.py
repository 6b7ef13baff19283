"""Ensembles: several runs with their metadata, call trees aligned by call path.

Performance engineers compare runs: scales, inputs, compilers, repetitions.
An :class:`Ensemble` holds several PAGs (of any formats) with

* a **metadata table** (``ens.metadata``): one row per run, the standard
  columns of :mod:`perflow.pag.runinfo` (``nprocs``, ``nthreads``,
  ``command``, ``date``, ``host``, ...), every scalar the tool recorded
  (Caliper/Adiak globals, TAU and CUBE metadata, Score-P configuration), and
  columns you add (:meth:`Ensemble.with_metadata`);
* the runs' **call trees aligned by call path** (:mod:`perflow.pag.align`):
  one union tree (``ens.tree``) and a presence mask (``ens.presence``);
* **values per (vertex, run)** (:meth:`Ensemble.values`): the per-run value of
  a vertex is the metric aggregated over that run's processes and threads
  with ``agg`` (``sum`` by default: chosen explicitly, never implied), NaN
  where the run lacks the call path;
* **statistics per vertex across runs** (:meth:`Ensemble.stats`): count,
  mean, standard deviation (``ddof=1``), min, percentiles and max of those
  per-run values over the runs **that have the call path** (absent runs are
  left out, not counted as zero; ``n_runs`` says how many there were);
* **grouping and filtering by metadata** (:meth:`Ensemble.groupby`,
  :meth:`Ensemble.filter`, :meth:`Ensemble.sort_by`);
* a **pandas view** indexed by (vertex, run) (:meth:`Ensemble.frame`), like
  Thicket's.

An ensemble is a sequence of PAGs (``len``, iteration, ``ens[0]``,
``ens["27_cores"]``), so passes taking a list of runs (``scalability``)
take one as is. :meth:`Ensemble.from_paths` reads a directory, a glob or a
list of runs with perflow's readers.

The metadata table's making (run names, standard and user columns) and the
groups of :meth:`Ensemble.groupby` are in :mod:`perflow.pag.ensemble_meta`,
the statistics across runs in :mod:`perflow.pag.ensemble_stats`.
"""

from __future__ import annotations

import functools
import html
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..errors import MetricError, PAGError
from .align import Alignment, align
from .ensemble_meta import EnsembleGroups, default_names, group_key, merged_metadata, meta_frame
from .ensemble_stats import across_runs
from .pag import PAG
from .runinfo import run_info
from .tree import tree_index

__all__ = ["Ensemble", "EnsembleGroups", "set_path_reader", "DEFAULT_PERCENTILES"]

#: percentiles that :meth:`Ensemble.stats` reports by default
DEFAULT_PERCENTILES = (25.0, 50.0, 75.0)

#: reads runs from paths: ``reader(spec, format=..., pattern=..., **options) -> list[PAG]``, installed by
#: :mod:`perflow.readers.runs` (a higher layer) when it is imported
_PATH_READER: Callable[..., list[PAG]] | None = None


def set_path_reader(reader: Callable[..., list[PAG]]) -> None:
    """Install the function :meth:`Ensemble.from_paths` reads runs with (done by :mod:`perflow.readers.runs`)."""
    global _PATH_READER
    _PATH_READER = reader


class Ensemble:
    """Several runs with a metadata table and call trees aligned by call path (see the module docstring).

    Parameters
    ----------
    runs : sequence of PAG
        The runs (at least one).
    names : sequence of str, optional
        A unique label per run (default: each source's file name without suffix).
    metadata : pandas.DataFrame or mapping, optional
        Extra columns: a frame indexed by run name (or with one row per run in
        order), or ``{column: values}`` as accepted by :meth:`with_metadata`.
        They override the columns read from the runs.
    """

    def __init__(
        self,
        runs: Sequence[PAG],
        *,
        names: Sequence[str] | None = None,
        metadata: pd.DataFrame | Mapping[str, Any] | None = None,
    ) -> None:
        runs = tuple(runs)
        if not runs:
            raise PAGError("an ensemble needs at least one run")
        for i, r in enumerate(runs):
            if not isinstance(r, PAG):
                raise PAGError(f"run {i} of the ensemble is a {type(r).__name__}, not a PAG")
        labels = [str(n) for n in names] if names is not None else default_names(runs)
        if len(labels) != len(runs):
            raise PAGError(f"{len(labels)} names for {len(runs)} runs")
        if len(set(labels)) != len(labels):
            dup = sorted({n for n in labels if labels.count(n) > 1})
            raise PAGError(f"run names must be unique; repeated: {', '.join(dup)}")
        self._runs = runs
        self._names = labels
        meta = meta_frame([run_info(r) for r in runs], pd.Index(labels, name="run"))
        meta["date"] = pd.to_datetime(meta["date"], utc=True)
        self._meta = meta
        if metadata is not None:
            self._meta = self._merged(metadata)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_pags(cls, runs: Sequence[PAG], **kwargs: Any) -> Ensemble:
        """An ensemble of PAGs already in memory (same as the constructor)."""
        return cls(runs, **kwargs)

    @classmethod
    def from_paths(
        cls,
        spec: Any,
        *,
        format: str | None = None,  # noqa: A002
        pattern: str = "*",
        names: Sequence[str] | None = None,
        metadata: pd.DataFrame | Mapping[str, Any] | None = None,
        **options: Any,
    ) -> Ensemble:
        """Read runs into an ensemble: a directory of runs, a glob (``"runs/*.cali"``) or a list of those and PAGs.

        A directory that is itself one run (an OTF2 archive, an HPCToolkit
        database, a saved PAG) is one run; any other directory holds one run
        per entry matching ``pattern``, read in name order. Every run is read
        with :func:`perflow.read` (``format`` forces a format; ``options`` go
        to the reader). See :func:`perflow.readers.runs.read_run_list`.
        """
        if _PATH_READER is None:
            raise PAGError(
                "Ensemble.from_paths needs perflow's readers: import perflow.readers (perflow.Ensemble does)"
            )
        runs = _PATH_READER(spec, format=format, pattern=pattern, **options)
        return cls(runs, names=names, metadata=metadata)

    def _derived(self, idx: Sequence[int]) -> Ensemble:
        """The ensemble of some of these runs, metadata (user columns included) kept as is."""
        out = object.__new__(type(self))
        out._runs = tuple(self._runs[i] for i in idx)
        out._names = [self._names[i] for i in idx]
        out._meta = self._meta.iloc[list(idx)].copy()
        return out

    def _merged(self, metadata: pd.DataFrame | Mapping[str, Any]) -> pd.DataFrame:
        return merged_metadata(self._meta, metadata, self._names, self._runs)

    def with_metadata(self, **columns: Any) -> Ensemble:
        """A copy with more metadata columns.

        Each value is a scalar (the same for every run), a sequence (one per
        run, in order), a mapping ``{run name: value}`` (missing runs get
        None), or a function of the run's PAG.
        """
        out = self._derived(range(len(self)))
        out._meta = self._merged(columns)
        return out

    # ------------------------------------------------------------------ sequence of runs
    @property
    def runs(self) -> tuple[PAG, ...]:
        """The PAGs, in order."""
        return self._runs

    @property
    def names(self) -> list[str]:
        """The run labels, in order."""
        return list(self._names)

    @property
    def metadata(self) -> pd.DataFrame:
        """One row per run (indexed by run name): standard columns, the tools' own, then the user's."""
        return self._meta.copy()

    def __len__(self) -> int:
        return len(self._runs)

    def __iter__(self) -> Iterator[PAG]:
        return iter(self._runs)

    def __getitem__(self, key: Any) -> Any:
        """A run by position or name; an ensemble for a slice, a list of positions/names or a boolean mask."""
        if isinstance(key, int | np.integer):
            return self._runs[int(key)]
        if isinstance(key, str):
            return self._runs[self._position(key)]
        if isinstance(key, slice):
            return self._derived(range(len(self))[key])
        keys = list(key)
        if keys and all(isinstance(k, bool | np.bool_) for k in keys):
            if len(keys) != len(self):
                raise PAGError(f"a mask of {len(keys)} values for {len(self)} runs")
            return self._derived([i for i, k in enumerate(keys) if k])
        return self._derived([k if isinstance(k, int | np.integer) else self._position(k) for k in keys])

    def _position(self, name: str) -> int:
        try:
            return self._names.index(name)
        except ValueError:
            from difflib import get_close_matches

            close = get_close_matches(name, self._names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise PAGError(f"no run named {name!r}{hint} (runs: {', '.join(self._names)})") from None

    # ------------------------------------------------------------------ metadata
    def _key(self, by: str | Sequence[str]) -> list[str]:
        cols = [by] if isinstance(by, str) else list(by)
        for c in cols:
            if c not in self._meta.columns:
                from difflib import get_close_matches

                close = get_close_matches(c, [str(x) for x in self._meta.columns], n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise PAGError(f"no metadata column {c!r}{hint}")
        return cols

    def filter(self, predicate: Callable[[pd.Series], bool] | Sequence[bool] | None = None, **equals: Any) -> Ensemble:
        """The runs whose metadata pass: ``filter(nprocs=64)``, ``filter(compiler=["gcc", "intel"])``, ``filter(lambda m: m.nprocs >= 64)``.

        A keyword names a metadata column and a value (or a list of accepted
        values); a predicate receives each run's metadata row; a boolean
        sequence is a mask. All conditions must hold.
        """
        keep = np.ones(len(self), dtype=bool)
        if predicate is not None:
            if callable(predicate):
                keep &= np.array([bool(predicate(row)) for _, row in self._meta.iterrows()], dtype=bool)
            else:
                mask = np.asarray(list(predicate), dtype=bool)
                if len(mask) != len(self):
                    raise PAGError(f"a mask of {len(mask)} values for {len(self)} runs")
                keep &= mask
        for c, v in equals.items():
            col = self._meta[self._key(c)[0]]
            accepted = list(v) if isinstance(v, list | tuple | set | frozenset) else [v]
            keep &= col.isin(accepted).to_numpy()
        return self._derived(np.flatnonzero(keep).tolist())

    def sort_by(self, by: str | Sequence[str], ascending: bool = True) -> Ensemble:
        """The runs ordered by metadata columns (stable)."""
        order = self._meta.reset_index(drop=True).sort_values(self._key(by), ascending=ascending, kind="stable").index
        return self._derived(order.tolist())

    def groupby(self, by: str | Sequence[str]) -> EnsembleGroups:
        """The runs grouped by metadata columns: ``{key: Ensemble}`` in sorted key order (missing values last)."""
        cols = self._key(by)
        groups = self._meta.reset_index(drop=True).groupby(cols if len(cols) > 1 else cols[0], dropna=False, sort=True)
        return EnsembleGroups({group_key(k): self._derived(list(ix)) for k, ix in groups.indices.items()}, by=cols)

    # ------------------------------------------------------------------ aligned call trees
    @functools.cached_property
    def alignment(self) -> Alignment:
        """The runs aligned by call path (:func:`perflow.pag.align.align`)."""
        return align(self._runs)

    @property
    def tree(self) -> pd.DataFrame:
        """The union call tree: ``name``, ``kind``, ``parent``, ``depth``, ``call_path``, ``n_runs`` (runs having it)."""
        vt = self.alignment.vertices
        out = vt[["name", "kind", "parent"]].copy()
        out["depth"] = tree_index(vt["parent"].to_numpy(dtype=np.int64)).depth
        out["call_path"] = vt["call_path"].to_numpy()
        out["n_runs"] = self.alignment.presence.sum(axis=1)
        out.index = pd.RangeIndex(len(out), name="vertex")
        return out

    @property
    def presence(self) -> pd.DataFrame:
        """Boolean (union vertex x run): whether the run has the call path."""
        return pd.DataFrame(
            self.alignment.presence,
            index=pd.RangeIndex(self.alignment.n_vertices, name="vertex"),
            columns=pd.Index(self._names, name="run"),
        )

    def _unit(self, metric: str) -> str:
        missing = [n for n, r in zip(self._names, self._runs) if metric not in r.metric_names]
        if missing:
            self._runs[self._names.index(missing[0])].check_metric(metric)  # did-you-mean for the first
        units = {r.metric_info[metric].unit for r in self._runs}
        if len(units) > 1:
            raise MetricError(f"metric {metric!r} has different units across the runs: {', '.join(sorted(units))}")
        return units.pop()

    def values(self, metric: str = "time_exc", agg: str = "sum") -> pd.DataFrame:
        """Per (union vertex, run): ``metric`` aggregated over the run's processes and threads with ``agg``; NaN where absent.

        Parameters
        ----------
        metric : str
            A metric every run has.
        agg : {"sum", "mean", "max", "min", "std", "count", "median"}
            How a run's processes and threads make one value (see :meth:`perflow.PAG.aggregate`).
        """
        unit = self._unit(metric)
        mat = self.alignment.matrix([r.aggregate(metric, agg).to_numpy() for r in self._runs])
        df = pd.DataFrame(mat, index=pd.RangeIndex(len(mat), name="vertex"), columns=pd.Index(self._names, name="run"))
        df.attrs.update({"metric": metric, "agg": agg, "unit": unit})
        return df

    def stats(
        self,
        metric: str = "time_exc",
        agg: str = "sum",
        *,
        percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    ) -> pd.DataFrame:
        """Statistics per union vertex across the runs having it (see the module docstring).

        Returns
        -------
        pandas.DataFrame
            ``name``, ``call_path``, ``n_runs``, ``mean``, ``std`` (sample,
            ``ddof=1``; NaN for one run), ``min``, ``p<q>`` per percentile
            (linear interpolation), ``max``; ``df.attrs`` holds the metric,
            ``agg`` and unit.
        """

        v = self.values(metric, agg)
        out = self.tree[["name", "call_path"]].copy()
        for col, val in across_runs(v.to_numpy(), percentiles).items():
            out[col] = val
        unit = v.attrs["unit"]
        over = f"{agg} over each run's processes, then across the runs having the path"
        stat_cols = [c for c in out.columns if c not in ("name", "call_path", "n_runs")]
        out.attrs.update(
            {
                "metric": metric,
                "agg": agg,
                "unit": unit,
                "units": {c: unit for c in stat_cols} | {"n_runs": "count"},
                "aggregates": {c: over for c in stat_cols},
            }
        )
        return out

    def frame(self, metrics: Sequence[str] | str | None = None, agg: str = "sum") -> pd.DataFrame:
        """A pandas view indexed by (vertex, run): ``name``, ``call_path``, ``present`` and one column per metric.

        Every (union vertex, run) pair has a row; the metrics of a run
        lacking the path are NaN and ``present`` is False. ``metrics``
        defaults to those every run has; each value is aggregated over the
        run's processes with ``agg``. Join ``ens.metadata`` on the ``run``
        level to group by metadata.
        """
        if metrics is None:
            names = [m for m in self._runs[0].metric_names if all(m in r.metric_names for r in self._runs[1:])]
        else:
            names = [metrics] if isinstance(metrics, str) else list(metrics)
        tree = self.tree
        n_v, n_r = len(tree), len(self)
        idx = pd.MultiIndex.from_arrays(
            [np.repeat(np.arange(n_v), n_r), np.tile(np.array(self._names, dtype=object), n_v)], names=["vertex", "run"]
        )
        df = pd.DataFrame(
            {
                "name": np.repeat(tree["name"].to_numpy(dtype=object), n_r),
                "call_path": np.repeat(tree["call_path"].to_numpy(dtype=object), n_r),
                "present": self.alignment.presence.ravel(),
            },
            index=idx,
        )
        for m in names:
            df[m] = self.values(m, agg).to_numpy().ravel()
        df.attrs["aggregates"] = {m: f"{agg} over the run's processes" for m in names}
        return df

    def apply(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> pd.DataFrame:
        """Run ``fn(pag, *args, **kwargs)`` on every run and stack the tables it returns, with a ``run`` column first.

        ``fn`` is typically a pass (``ens.apply(hotspot, k=5)``); a result
        that is not a table (a number, a vertex set) becomes one row.
        """
        parts = []
        for name, r in zip(self._names, self._runs):
            res = fn(r, *args, **kwargs)
            if hasattr(res, "to_frame") and not isinstance(res, pd.DataFrame | pd.Series):
                res = res.to_frame()
            if isinstance(res, pd.Series):
                res = res.to_frame().T if res.index.dtype == object else res.to_frame()
            if not isinstance(res, pd.DataFrame):
                res = pd.DataFrame({"result": [res]})
            res = res.reset_index(drop=True)
            res.insert(0, "run", name)
            parts.append(res)
        return pd.concat(parts, ignore_index=True)

    # ------------------------------------------------------------------ display
    def __repr__(self) -> str:
        return f"<Ensemble of {len(self)} runs: {', '.join(self._names[:6])}{', ...' if len(self) > 6 else ''}>"

    def _repr_html_(self) -> str:
        cols = [c for c in ("format", "tool", "nprocs", "nthreads", "date") if c in self._meta.columns]
        rows = "".join(
            "<tr><th>"
            + html.escape(n)
            + "</th>"
            + "".join(f"<td>{html.escape(str(self._meta.at[n, c]))}</td>" for c in cols)
            + f"<td>{r.n_vertices}</td></tr>"
            for n, r in zip(self._names, self._runs)
        )
        head = "".join(f"<th>{html.escape(c)}</th>" for c in ["run", *cols, "vertices"])
        return f"<b>Ensemble</b> of {len(self)} runs<table><tr>{head}</tr>{rows}</table>"
