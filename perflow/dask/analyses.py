"""The distributed analyses of a :class:`~perflow.dask.dtrace.DistTrace` (a mixin).

Every method here reduces per-partition partials on the workers (a tree of
tasks) and brings only per-vertex arrays, or sparse (sender, receiver) sums,
to the client.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pandas as pd

from ..errors import MetricError, PerflowError
from ..pag.pag import PAG
from . import tasks as T
from .aggregate import ACROSS, IMBALANCE_CRITERIA, aggregate_values, finish_stats, imbalance_measures

__all__ = ["Analyses"]

log = logging.getLogger("perflow.dask.dtrace")


class Analyses:
    """Per-vertex statistics, imbalance, communication matrix and waits, computed on the workers."""

    # provided by DistTrace
    defs: Any
    partitioning: Any
    _cache: dict[Any, Any]
    _rows: list[Any]
    _messages: list[Any]
    _coll: list[Any]
    _tables: list[Any]

    def build(self) -> Any:  # pragma: no cover - DistTrace's
        raise NotImplementedError

    def _submit(self, fn: Any, *args: Any, where: int | None = None, **kw: Any) -> Any:  # pragma: no cover
        raise NotImplementedError

    def _gather(self, futs: Any) -> Any:  # pragma: no cover
        raise NotImplementedError

    def _reduce(self, fn: Any, futs: list[Any], fan_in: int = 8) -> Any:  # pragma: no cover
        raise NotImplementedError

    def _exchange(self, boxes: list[Any], what: str) -> list[list[Any]]:  # pragma: no cover
        raise NotImplementedError

    n_parts: int
    _tree: dict[str, Any]

    n_vertices: int
    metric_names: list[str]
    metric_info: dict[str, Any]
    vertex_table: pd.DataFrame

    def metrics_frame(self) -> pd.DataFrame:  # pragma: no cover
        raise NotImplementedError

    def _median(self, metric: str) -> pd.Series:
        from ..pag.frames import aggregate

        m = self.metrics_frame()
        n_loc = len(self._locations_with_data())
        vals = aggregate(m, metric, "median", n_vertices=self.n_vertices, n_locations=n_loc)
        return pd.Series(vals, index=self.vertex_table.index, name=f"{metric}:median")

    def _check_metric(self, metric: str) -> None:
        if metric not in self.metric_names:
            raise MetricError(f"unknown metric {metric!r} (metrics: {', '.join(self.metric_names)})")

    def _stats(self, metric: str, across: str) -> dict[str, np.ndarray]:
        if across not in ACROSS:
            raise PerflowError(f"across must be one of {', '.join(ACROSS)}, not {across!r}")
        self._check_metric(metric)
        key = ("stats", metric, across)
        if key not in self._cache:
            nv = self.n_vertices
            parts = [self._submit(T.t_stats, r, metric, across, nv, where=i) for i, r in enumerate(self._rows)]
            combined = self._gather(self._reduce(T.t_combine_stats, parts))
            if across == "process":
                n_groups = len(np.unique(self.defs.locations["process"].to_numpy()[self._locations_with_data()]))
            else:
                n_groups = len(self._locations_with_data())
            self._cache[key] = finish_stats(combined, n_groups)
        return self._cache[key]

    def _locations_with_data(self) -> np.ndarray:
        if "locs" not in self._cache:
            loc = self.defs.locations
            key = loc["process"].to_numpy(dtype=np.int64) * (1 << 32) + loc["thread"].to_numpy(dtype=np.int64)
            present = self._gather(
                [
                    self._submit(
                        lambda r: np.unique(r[0]["process"].to_numpy() * (1 << 32) + r[0]["thread"].to_numpy()), f
                    )
                    for f in self._rows
                ]  # fmt: skip
            )
            pk = np.unique(np.concatenate(present)) if present else np.zeros(0, np.int64)
            _, first = np.unique(key, return_index=True)
            self._cache["locs"] = np.sort(first[np.isin(key[first], pk)])
        return self._cache["locs"]

    def aggregate(self, metric: str, agg: str = "sum") -> pd.Series:
        """One metric aggregated across processes and threads per vertex (as :meth:`perflow.PAG.aggregate`).

        ``median`` has no distributed form and runs on the gathered metric column.
        """
        if agg == "median":
            log.warning("median has no distributed form: gathering the %r column", metric)
            return self._median(metric)
        vals = aggregate_values(self._stats(metric, "location"), agg)
        return pd.Series(vals, index=self.vertex_table.index, name=f"{metric}:{agg}" if agg != "sum" else metric)

    def profile(self, metrics: list[str] | None = None, agg: str = "sum") -> pd.DataFrame:
        """Per-vertex table of the vertex attributes and aggregated metrics (as ``PAG.metric_frame``)."""
        names = list(metrics) if metrics is not None else self.metric_names
        vt = self.vertex_table
        df = vt[["name", "kind", "parent", "depth"]].copy()
        for m in names:
            df[m] = self.aggregate(m, agg).to_numpy()
        return df

    def imbalance(
        self, metric: str = "time_exc", *, across: str = "process", criterion: str = "imbalance_time",
        threshold: float | None = None, min_value: float = 0.0, k: int | None = None,
    ) -> pd.DataFrame:  # fmt: skip
        """Load-imbalance measures per vertex from the combined statistics (the ``imbalance`` pass's table).

        Parameters and columns as the ``imbalance`` pass: ``vertex``,
        ``name``, ``kind``, ``call_path``, ``n``, ``mean``, ``max``, ``min``,
        ``std``, ``max_process`` (``max_thread`` with ``across="location"``)
        and the measures of :func:`.aggregate.imbalance_measures`; vertices
        whose maximum is at most ``min_value`` (or 1e-9 of the largest value)
        are skipped; worst first by ``criterion`` (ascending for
        ``load_balance``); ``threshold`` keeps vertices beyond it; at most ``k`` rows.
        """
        if criterion not in IMBALANCE_CRITERIA:
            raise PerflowError(
                f"unknown imbalance criterion {criterion!r}; choose one of {', '.join(IMBALANCE_CRITERIA)}"
            )
        st = self._stats(metric, across)
        meas = imbalance_measures(st)
        has = st["count"] > 0
        top = float(np.max(np.abs(np.r_[st["row_max"][has], st["row_min"][has]]), initial=0.0))
        ids = np.flatnonzero(st["max"] > max(min_value, 1e-9 * top))
        if threshold is not None:
            crit = meas[criterion][ids]
            ids = ids[(crit <= threshold) if criterion == "load_balance" else (crit > threshold)]
        key = meas[criterion][ids]
        ids = ids[np.lexsort((ids, key if criterion == "load_balance" else -key))]
        if k is not None:
            ids = ids[: max(int(k), 0)]
        sk = self.skeleton
        df = pd.DataFrame(
            {
                "vertex": ids,
                "name": sk.vertex_table["name"].astype(str).to_numpy()[ids],
                "kind": sk.vertex_table["kind"].astype(str).to_numpy()[ids],
                "call_path": sk.call_paths().to_numpy()[ids],
                "n": st["n"][ids],
            }
        )
        for c in ("mean", "max", "min", "std"):
            df[c] = st[c][ids]
        df["max_process"] = st["argmax"][ids]
        if across == "location":
            df["max_thread"] = st["argthr"][ids]
        for c in IMBALANCE_CRITERIA:
            df[c] = meas[c][ids]
        u = self.metric_info[metric].unit
        units = {c: u for c in ("mean", "max", "min", "std", "imbalance_time")}
        units.update({"percent_imbalance": "%", "craypat_percent": "%", "imbalance": "ratio", "load_balance": "ratio"})
        df.attrs.update({"metric": metric, "across": across, "criterion": criterion, "units": units})
        return df

    @property
    def skeleton(self) -> PAG:
        """A PAG with the vertex table and no metrics (for call paths and vertex look-ups on the client)."""
        if "skeleton" not in self._cache:
            from ..pag.frames import make_metrics

            empty = make_metrics(np.zeros(0), np.zeros(0), None, {}, n_vertices=self.n_vertices)
            self._cache["skeleton"] = PAG(self.vertex_table, empty, attrs={"source": self.defs.attrs.get("source", "")})
        return self._cache["skeleton"]

    def comm_matrix(self, metric: str = "bytes") -> pd.DataFrame:
        """Process x process point-to-point matrix (row sender, column receiver) of bytes, count or time."""
        self.build()
        parts = [self._submit(T.t_comm, m, metric, where=i) for i, m in enumerate(self._messages)]
        df = self._gather(self._reduce(T.t_comm_combine, parts))
        axis = np.unique(
            np.concatenate([self.partitioning.processes, df["src"].to_numpy(), df["dst"].to_numpy()]).astype(np.int64)
        )
        P = len(axis)
        s = np.searchsorted(axis, df["src"].to_numpy())
        d = np.searchsorted(axis, df["dst"].to_numpy())
        mat = np.zeros(P * P)
        mat[s * P + d] = df["w"].to_numpy()
        out = pd.DataFrame(
            mat.reshape(P, P), index=pd.Index(axis, name="sender"), columns=pd.Index(axis, name="receiver")
        )
        if metric == "count" or (metric == "bytes" and np.all(mat == np.round(mat))):
            out = out.astype(np.int64)
        out.attrs.update({"metric": metric, "collectives": False})
        return out

    def wait_by_vertex(self) -> pd.DataFrame:
        """Per-vertex Late Sender (at the receiving call) and collective waiting time, summed over processes."""
        self.build()
        nv = self.n_vertices
        parts = [
            self._submit(T.t_wait_by_vertex, tb, self._messages[i], self._coll[i], nv, where=i)
            for i, tb in enumerate(self._tables)
        ]
        w = self._gather(self._reduce(T.t_add, parts))
        vt = self.vertex_table
        return pd.DataFrame({"vertex": np.arange(nv), "name": vt["name"].astype(str).to_numpy(), **w}).set_index(
            "vertex"
        )

    def wait_instances(
        self, *, window: int = 100, late_receiver: str = "synchronous", early_reduce: str = "latest"
    ) -> pd.DataFrame:
        """Every wait-state instance, equal to :func:`perflow.trace.waits.wait_instances` (see :mod:`.waits`).

        Computed on the workers (boundary records exchanged, collective
        instances sent to owner partitions); only the instance table comes to
        the client. Do not modify the result (it is cached).
        """
        from . import waits as W

        if int(window) < 0 or late_receiver not in ("synchronous", "blocking", "none"):
            raise PerflowError(f"invalid wait-state settings: window={window!r}, late_receiver={late_receiver!r}")
        if early_reduce not in ("latest", "earliest"):
            raise PerflowError(f"early_reduce must be 'latest' or 'earliest', not {early_reduce!r}")
        key = ("waits", int(window), late_receiver, early_reduce)
        if key in self._cache:
            return self._cache[key]
        self.build()
        n, p = self.n_parts, self.partitioning
        procs, assign = p.processes, p.assign
        tb, msg = self._tables, self._messages
        boxes = [self._submit(W.to_sender, tb[i], msg[i], procs, assign, n, where=i) for i in range(n)]
        inbound = self._exchange(boxes, "exchanged_to_sender")
        threaded = bool(self._tree["threaded"])
        p2p_off = self._tree["p2p_off"]
        n_groups = int(procs.max()) + 1 if threaded and len(procs) else len(p2p_off)
        states = [
            self._submit(
                W.sender_state, tb[i], msg[i], procs, assign, p2p_off, threaded, n_groups, *inbound[i], where=i
            )
            for i in range(n)
        ]
        counts = np.sum(self._gather([self._submit(T.t_counts, s, where=i) for i, s in enumerate(states)]), axis=0)
        offsets = np.cumsum(counts) - counts
        ids = [self._submit(W.message_ids, tb[i], states[i], offsets, procs, assign, n, where=i) for i in range(n)]
        sent = [self._submit(T.t_first, x, where=i) for i, x in enumerate(ids)]
        inbound = self._exchange(
            [self._submit(T.t_second, x, where=i) for i, x in enumerate(ids)], "exchanged_to_receiver"
        )
        names = self.vertex_table["name"].astype(str).to_numpy()
        p2p = [
            self._submit(W.p2p_part, tb[i], msg[i], sent[i], names, int(window), late_receiver, *inbound[i], where=i)
            for i in range(n)
        ]
        cboxes = [self._submit(W.coll_outbox, tb[i], n, where=i) for i in range(n)]
        cin = self._exchange(cboxes, "exchanged_collective_rows")
        coll = [self._submit(W.coll_part, self.defs.comms, early_reduce, *cin[i], where=i) for i in range(n)]
        table = W.finish(self._gather(p2p + coll))
        self._cache[key] = table
        return table
