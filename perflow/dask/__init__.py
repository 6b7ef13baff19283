"""Scale-out: perflow's trace analyses on a Dask cluster (the ``perflow[dask]`` extra).

>>> from perflow.dask import Engine
>>> with Engine(n_workers=2) as eng:                 # a LocalCluster; or Engine(scheduler="tcp://...")
...     dt = eng.load("run/traces.otf2")            # doctest: +SKIP
...     dt.imbalance("time_exc")                     # doctest: +SKIP

Ranks are partitioned by communication affinity
(:mod:`perflow.trace.partition`), each worker decodes its partitions and runs
the stages of the trace pipeline on them (:mod:`perflow.trace.pipeline`, the
stages :func:`perflow.build_pag` runs in one partition), and analyses with a
partitioned form run where the partitions live (:mod:`.runtime`). Results
equal the single-process engine's. See ``docs/scale-out.md``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Engine", "DistTrace", "Partitioning", "partition_graph", "partition_ranks", "cut_weight"]

_LAZY = {
    "Engine": "engine",
    "DistTrace": "dtrace",
    "Partitioning": "perflow.trace.partition",
    "partition_graph": "perflow.trace.partition",
    "partition_ranks": "perflow.trace.partition",
    "cut_weight": "perflow.trace.partition",
}


def __getattr__(name: str) -> Any:
    # lazy: importing perflow.dask costs nothing (no scipy, no distributed) until something is used
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'perflow.dask' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(mod if "." in mod else f"{__name__}.{mod}"), name)
