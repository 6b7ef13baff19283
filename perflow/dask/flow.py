"""The Dask engine inside analysis flows (``perflow run FLOW --engine dask``).

While an engine is active (:func:`use`):

* reading an OTF2 trace (the ``read`` pass, or a path given for a ``PAG``
  flow input) loads it on the cluster and returns a
  :class:`~perflow.dask.lazy.DaskPAG` (:func:`engine_read`);
* a pass with a distributed form (:data:`DISTRIBUTED`) given a ``DaskPAG``
  runs on the workers (:func:`distributed_call`); every other pass runs on
  the tables of the ``DaskPAG``, gathered when it first reads them.

The hooks are :func:`engine_read` (called by :func:`perflow.read`) and
:func:`distributed_call` (called by the flow scheduler); both return
``None``/``NotImplemented`` at once when no engine is active, and importing
this module does not import Dask.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .engine import Engine

__all__ = ["use", "active", "engine_read", "distributed_call", "cli_engine", "DISTRIBUTED", "WAIT_PASSES", "ENGINES"]

log = logging.getLogger(__name__)

#: the engine choices of ``perflow run --engine``
ENGINES = ("local", "dask")

_lock = threading.Lock()
_active: list[Any] = []


def active() -> Engine | None:
    """The engine of the running flow, or ``None``."""
    return _active[-1][0] if _active else None


@contextlib.contextmanager
def use(engine: Engine, **load_options: Any) -> Iterator[Engine]:
    """Make ``engine`` read traces and run distributed passes while the block runs.

    ``load_options`` go to :meth:`perflow.dask.Engine.load` (``partition``,
    ``n_partitions``, ``scout_events``, ...).
    """
    with _lock:
        _active.append((engine, dict(load_options)))
    try:
        yield engine
    finally:
        with _lock:
            _active.pop()


@contextlib.contextmanager
def cli_engine(scheduler: str | None = None, workers: int | None = None) -> Iterator[Engine]:
    """The engine of ``perflow run --engine dask [--scheduler ADDRESS] [--workers N]``, active while the block runs."""
    from .engine import Engine, require_dask

    require_dask()  # configures Dask's loggers on import; quieten them after that
    for name in ("distributed", "bokeh", "tornado"):  # their start-up chatter is not perflow's output
        if logging.getLogger(name).getEffectiveLevel() < logging.WARNING:
            logging.getLogger(name).setLevel(logging.WARNING)
    with Engine(scheduler, n_workers=workers) as eng, use(eng):
        yield eng


def engine_read(path: Any, fmt: str | None = None, **options: Any) -> Any:
    """Load an OTF2 trace on the active engine; ``None`` when no engine is active or the data is not OTF2."""
    if not _active:
        return None
    if fmt not in (None, "otf2") or not isinstance(path, str | os.PathLike):
        return None
    from ..readers.otf2 import is_otf2

    if not is_otf2(path):
        return None
    engine, load_options = _active[-1]
    opts = {**load_options, **{k: v for k, v in options.items() if k in ("close_open", "infer_collectives")}}
    log.info("reading %s on the Dask engine", path)
    return engine.load(path, **opts).pag()


def _imbalance(dt: Any, data: Any, **settings: Any) -> Any:
    if settings.get("metric", "time_exc") not in dt.metric_names:
        return NotImplemented  # base names (time -> time_exc) and errors: the pass itself resolves them
    return dt.imbalance(**settings)


def _comm_matrix(dt: Any, pag: Any, *, metric: str = "bytes", collectives: bool = False) -> Any:
    if collectives:
        return NotImplemented
    return dt.comm_matrix(metric)


#: wait-state passes: the instance table they all start from is computed on the workers (see :func:`_seed_waits`)
WAIT_PASSES = {
    "wait_states": ("wrong_order_window", "late_receiver", "early_reduce"),
    "p2p_wait_states": ("wrong_order_window", "late_receiver"),
    "late_sender": ("wrong_order_window",),
    "wait_state_summary": (),
    "collective_wait_states": ("early_reduce",),
    "collective_waits_by_operation": ("early_reduce",),
}


def _seed_waits(name: str, data: Any, settings: Mapping[str, Any]) -> None:
    """Compute the wait-state table on the workers and leave it where ``wait_instances`` will look for it.

    The pass then runs unchanged on the DaskPAG: ``waits_for`` finds the table
    in the per-trace cache of its (lazy) trace and gathers no event data.
    Settings the pass would reject are left to it (nothing is computed).
    """
    from ..trace.flat import trace_cached

    window = settings.get("wrong_order_window", 100)
    late_receiver = settings.get("late_receiver", "synchronous")
    early_reduce = settings.get("early_reduce", "latest")
    if (
        not isinstance(window, int)
        or window < 0
        or late_receiver not in ("synchronous", "blocking", "none")
        or early_reduce not in ("latest", "earliest")
    ):
        return
    names = tuple(map(str, data.vertex_table["name"].astype(str).to_numpy()))
    key = ("waits", int(window), late_receiver, early_reduce, names)
    table = data.dist.wait_instances(window=int(window), late_receiver=late_receiver, early_reduce=early_reduce)
    trace_cached(data.trace, key, lambda: table)


#: pass name -> (distributed implementation, settings it supports)
DISTRIBUTED: dict[str, tuple[Callable[..., Any], frozenset[str]]] = {
    "imbalance": (_imbalance, frozenset({"metric", "across", "criterion", "threshold", "min_value", "k"})),
    "comm_matrix": (_comm_matrix, frozenset({"metric", "collectives"})),
}


def distributed_call(spec: Any, args: Sequence[Any], settings: Mapping[str, Any]) -> Any:
    """Run a pass on the workers when its first input is a DaskPAG and it has a distributed form.

    Returns ``NotImplemented`` when the pass should run as usual.
    """
    if not args:
        return NotImplemented
    from .lazy import DaskPAG

    data = args[0]
    if type(data) is not DaskPAG:
        return NotImplemented
    name = getattr(spec, "name", "")
    if name in WAIT_PASSES and len(args) == 1:
        _seed_waits(name, data, settings)
        return NotImplemented  # the pass runs as usual and finds the instance table computed on the workers
    entry = DISTRIBUTED.get(name)
    if entry is None or len(args) != 1 or not set(settings) <= entry[1]:
        log.info("pass %r runs on the gathered data of the Dask engine", getattr(spec, "name", spec))
        return NotImplemented
    return entry[0](data.dist, data, **settings)
