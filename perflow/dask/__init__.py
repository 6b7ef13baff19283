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

__all__ = ["Engine", "DistTrace", "Partitioning", "partition_graph", "partition_ranks", "cut_weight"]

_LAZY = {
    "Engine": "engine",
    "DistTrace": "dtrace",
    "Partitioning": "partition",
    "partition_graph": "partition",
    "partition_ranks": "partition",
    "cut_weight": "partition",
}


def __getattr__(name: str) -> Any:
    # lazy: perflow.read imports perflow.dask.flow, which must cost nothing (no scipy, no distributed)
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'perflow.dask' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{mod}"), name)
