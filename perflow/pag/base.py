"""What the PAG's parts share, below all of them: what a metric measures, and read-only views.

:class:`MetricInfo` describes a metric column (the PAG, its readers, saved PAGs'
manifests and the trace pipeline's tallies all use it); :func:`read_only` is how
the PAG's faces hand out arrays without copying; :func:`off_cpu_flags` says which
vertices are a recorded thread's time off the CPU. Nothing here imports another
part of the PAG, so every module of :mod:`perflow.pag` can import it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..kinds import OFF_CPU

__all__ = ["MetricInfo", "DEFAULT_METRICS", "metric_combine", "read_only", "off_cpu_flags"]


@dataclass(frozen=True)
class MetricInfo:
    """What a metric measures.

    Attributes
    ----------
    name : str
        Column name in ``pag.metrics``.
    unit : str
        ``"s"``, ``"bytes"``, ``"count"``, ``""``, ...
    mode : {"exclusive", "inclusive", "count", "other"}
        Whether the value covers only the vertex itself, or its subtree too.
    description : str
        One line for reports and ``perflow info``.
    combine : {"", "sum", "min", "max"}
        How values of the metric combine over processes, threads and call paths: ``"min"``
        for a minimum (Score-P's ``min_time``), ``"max"`` for a maximum, ``"sum"`` for the
        rest; ``""``: not said by the source (see :func:`metric_combine`).
    """

    name: str
    unit: str = ""
    mode: str = "other"
    description: str = ""
    combine: str = ""


def metric_combine(name: str, info: MetricInfo | None = None) -> str:
    """How a metric combines: ``"min"``, ``"max"`` or ``"sum"``.

    Its :class:`MetricInfo` says when the source told (``combine``); else the name does:
    ``min_time``, ``time_inc_min``, ``min#...`` are minima, ``max_*``/``*_max`` maxima, the
    rest sums.
    """
    if info is not None and info.combine in ("sum", "min", "max"):
        return info.combine
    n = name.lower()
    for op in ("min", "max"):
        if n.startswith((f"{op}_", f"{op}#", f"{op}.")) or n.endswith((f"_{op}", f".{op}")):
            return op
    return "sum"


DEFAULT_METRICS = {
    "time_inc": MetricInfo("time_inc", "s", "inclusive", "time in the region and everything it called"),
    "time_exc": MetricInfo("time_exc", "s", "exclusive", "time in the region itself"),
    "visits": MetricInfo("visits", "count", "count", "number of times the region was entered"),
}


def read_only(a: np.ndarray) -> np.ndarray:
    """A view of ``a`` that cannot be written to (no copy)."""
    v = np.asarray(a).view()
    v.flags.writeable = False
    return v


def off_cpu_flags(names: object, roles: object | None = None) -> np.ndarray:
    """Per vertex, by its region name and role: whether it is time off the CPU.

    That is the recorder's artificial region :data:`perflow.kinds.OFF_CPU` (role "artificial"; with
    ``roles`` None, for a PAG without a role column, the name alone decides).
    """
    out = np.asarray(names, dtype=object) == OFF_CPU
    if roles is not None and out.any():
        out = out & (np.asarray(roles, dtype=object) == "artificial")
    return np.asarray(out, dtype=bool)
