"""The engine recipe: PAGs through the public construction path, analyses through an executor."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pandas as pd

from perflow.sdk import PAG, Analysis, MetricInfo, Settings, Trace

from . import reader

log = logging.getLogger(__name__)


class LocalTables:
    """``LazyTables`` over a PAG read here (an engine's would gather from its workers)."""

    def __init__(self, pag: PAG) -> None:
        self._pag = pag
        self.materialised: list[str] = []

    def metric_names(self) -> list[str]:
        return list(self._pag.metric_info)

    def metric_info(self) -> dict[str, MetricInfo]:
        return dict(self._pag.metric_info)

    def metrics(self) -> pd.DataFrame:
        self.materialised.append("metrics")
        return self._pag.metrics

    def trace(self) -> Trace | None:
        return None

    def locations(self) -> pd.DataFrame:
        return self._pag.locations


class CountingExecutor:
    """The ``Executor`` protocol: runs each analysis's local form and counts them."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    def run(self, analysis: Analysis, pag: PAG, settings: Settings) -> Any:
        self.ran.append(analysis.name)
        return analysis.run_local(pag, settings)


class DemoEngine:
    """Reads pfdemo files into its own PAGs; declines (and says why) everything else."""

    name = "pfdemo"

    def __init__(self) -> None:
        self.executor = CountingExecutor()

    def read(self, path: Any, format: str | None = None, **options: Any) -> PAG | None:
        if format != reader.FORMAT:
            log.info("engine pfdemo declines %s: it reads pfdemo files only (format %s)", path, format)
            return None
        local = reader.read(Path(path), **options)
        return PAG(local.vertex_table, tables=LocalTables(local), executor=self.executor)

    def close(self) -> None:
        pass
