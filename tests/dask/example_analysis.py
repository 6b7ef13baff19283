"""A partitioned analysis added in one file: waiting time per call path, Late Sender and collective.

Nothing in perflow/dask knows it: any engine runs its ``partial`` where the
partitions live, ``combine`` on the way back and ``finish`` on the client,
and a local PAG runs the same three functions over one partition.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from perflow.pag.analysis import Analysis, Settings


@dataclass(frozen=True)
class WaitSums(Settings):
    """Which waits to sum."""

    collectives: bool = True


def _partial(part: Any, s: WaitSums) -> dict[str, np.ndarray]:
    m = part.messages()
    v = part.interval_vertex(m["recv_interval"].to_numpy())
    ok = v >= 0
    out = {"late_sender": np.bincount(v[ok], weights=m["late_sender_wait"].to_numpy()[ok], minlength=part.n_vertices)}
    c = part.collectives()
    cv = part.interval_vertex(c["interval"].to_numpy())
    ok = (cv >= 0) & s.collectives
    out["collective_wait"] = np.bincount(cv[ok], weights=c["wait"].to_numpy()[ok], minlength=part.n_vertices)
    return out


def _combine(parts: list[dict[str, np.ndarray]], s: WaitSums) -> dict[str, np.ndarray]:
    return {k: np.sum([p[k] for p in parts], axis=0) for k in parts[0]}


def _finish(pag: Any, total: dict[str, np.ndarray], s: WaitSums) -> pd.DataFrame:
    df = pd.DataFrame({"name": pag.vertex_table["name"].astype(str).to_numpy(), **total})
    df.index.name = "vertex"
    return df


WAITS_BY_VERTEX = Analysis(
    "example.waits_by_vertex",
    partial=_partial,
    combine=_combine,
    finish=_finish,
    settings=WaitSums,
    uses=frozenset({"trace", "vertices"}),
    doc="Late Sender (at the receiving call) and collective waiting time per vertex, summed over processes",
)
