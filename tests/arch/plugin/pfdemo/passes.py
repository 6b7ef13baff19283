"""The pass and partitioned-analysis recipes: a total per vertex, declared once, run where the data are."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from perflow.sdk import PAG, Analysis, Settings, pass_, settings_keywords


@dataclass(frozen=True)
class TotalSettings(Settings):
    """What to total.

    Attributes
    ----------
    metric : str
        The metric.
    how : {"sum", "max"}
        Sum over processes, or their largest value.
    """

    metric: str = "time_exc"
    how: Literal["sum", "max"] = "sum"


def _partial(part: Any, s: TotalSettings) -> np.ndarray:
    out = np.zeros(part.n_vertices)
    rows = part.metric_rows(s.metric)
    if rows is not None:
        v, _, _, x = rows
        (np.add if s.how == "sum" else np.maximum).at(out, v, x)
    return out


def _combine(parts: list[np.ndarray], s: TotalSettings) -> np.ndarray:
    return np.sum(parts, axis=0) if s.how == "sum" else np.max(parts, axis=0)


def _finish(pag: Any, total: np.ndarray, s: TotalSettings) -> pd.DataFrame:
    return pd.DataFrame({"name": pag.vertex_table["name"].astype(str).to_numpy(), s.metric: total})


TOTALS = Analysis(
    "pfdemo.totals",
    partial=_partial,
    combine=_combine,
    finish=_finish,
    settings=TotalSettings,
    uses=frozenset({"metrics", "vertices"}),
    doc="A metric totalled per vertex over processes",
)


@pass_(version="1", tags=("profile",))
@settings_keywords(TotalSettings, "settings")
def pfdemo_totals(pag: PAG, *, settings: TotalSettings) -> pd.DataFrame:
    """A metric totalled per vertex over processes (the ``pfdemo.totals`` analysis)."""
    return pag.analyses.get(TOTALS, settings, owner="pfdemo_totals")
