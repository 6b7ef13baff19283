"""Scale-out: perflow's trace analyses on a Dask cluster (the ``perflow[dask]`` extra).

>>> from perflow.dask import Engine
>>> with Engine(n_workers=2) as eng:                 # a LocalCluster; or Engine(scheduler="tcp://...")
...     dt = eng.load("run/traces.otf2")            # doctest: +SKIP
...     dt.imbalance("time_exc")                     # doctest: +SKIP

Ranks are partitioned by communication affinity (:mod:`.partition`), each
worker decodes and analyses its partitions, boundary messages are exchanged
(:mod:`.match`), per-vertex results are combined from partials
(:mod:`.aggregate`, :mod:`.waitstates`). Results equal the single-process
engine's. See ``docs/scale-out.md``.
"""

from __future__ import annotations

from typing import Any

from .partition import Partitioning, cut_weight, partition_graph, partition_ranks

__all__ = ["Engine", "DistTrace", "Partitioning", "partition_graph", "partition_ranks", "cut_weight"]


def __getattr__(name: str) -> Any:
    if name == "Engine":  # lazy: importing the engine imports distributed
        from .engine import Engine

        return Engine
    if name == "DistTrace":
        from .dtrace import DistTrace

        return DistTrace
    raise AttributeError(f"module 'perflow.dask' has no attribute {name!r}")
