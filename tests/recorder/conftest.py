"""Helpers of the recorder tests: the test programs, a recorded run (:class:`Run`), site markers.

The session fixtures (an MPI toolchain, compiled test programs, recorded runs)
are in :mod:`tests.recorder.fixtures`, registered once for the whole suite by
``tests/conftest.py``, so that the invariants and Dask tests share the programs,
the recorder's library and the recordings of these tests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

PROGRAMS = Path(__file__).resolve().parent / "programs"
RUN_TIMEOUT = 120.0


def site_line(source: str, tag: str) -> int:
    """Line number of the ``SITE:<tag>`` marker in a test program."""
    for n, line in enumerate((PROGRAMS / source).read_text().splitlines(), 1):
        if re.search(rf"SITE:{re.escape(tag)}\b", line):
            return n
    raise AssertionError(f"no SITE:{tag} in {source}")


@dataclass
class Run:
    """A recorded run: the recorder's result plus the program's output."""

    result: object
    stdout: str
    stderr: str

    @property
    def raw(self):  # noqa: ANN201
        return self.result.raw

    def p2p(self) -> pd.DataFrame:
        df = self.raw.table("p2p_events").copy()
        df["rank"] = self.raw.locations["process"].to_numpy()[df["location"]]
        return df

    def coll(self) -> pd.DataFrame:
        df = self.raw.table("coll_events").copy()
        df["rank"] = self.raw.locations["process"].to_numpy()[df["location"]]
        return df

    def calls(self) -> pd.DataFrame:
        """MPI calls with their call sites: rank, name, caller, file, line, enter, leave."""
        from perflow.recorder.summary import mpi_durations

        d = mpi_durations(self.raw)
        reg = self.raw.regions
        d["rank"] = self.raw.locations["process"].to_numpy()[d["location"]]
        for col in ("caller", "file", "line"):
            d[col] = reg[col].reindex(d["region"]).to_numpy()
        d["leave"] = d["enter"] + d["duration"]
        return d

    def inclusive_weight(self, rank: int, function: str) -> float:
        """Sampled CPU time of ``rank`` in samples whose stack contains ``function`` (a substring)."""
        raw = self.raw
        st = raw.stacks.copy()
        st["name"] = raw.regions["name"].reindex(st["region"]).to_numpy()
        hit = set(st.loc[st["name"].str.contains(function, regex=False), "stack"])
        s = raw.table("sample_events")
        s = s[raw.locations["process"].to_numpy()[s["location"]] == rank]
        return float(s.loc[s["stack"].isin(hit), "weight"].sum())

    def cpu_time(self, rank: int, function: str) -> float:
        """Time of ``rank`` in ``function`` (a call-path component, maybe ``module::function``) and below, off-CPU time left out.

        From the PAG (sampled pieces, instrumented instances): the work done there, which on a loaded
        machine differs from the wall time its samples stand for.
        """
        from perflow.kinds import OFF_CPU
        from perflow.trace.build import build_pag

        if getattr(self, "_pag", None) is None:
            self._pag = build_pag(self.raw)
        pag = self._pag
        paths = pag.call_paths().to_numpy().astype(str)
        names = pag.vertex_table["name"].astype(str).to_numpy()
        below = np.array([any(c == function or c.endswith(f"::{function}") for c in p.split("/")) for p in paths])
        below &= names != OFF_CPU
        m = pag.metrics.reset_index()
        m = m[(m["process"] == rank) & below[m["vertex"].to_numpy()]]
        return float(m["time_exc"].sum())

    def sample_weight_by_function(self) -> pd.DataFrame:
        """Sampled CPU time per (rank, innermost function)."""
        raw = self.raw
        st = raw.stacks
        inner = st.loc[st.groupby("stack")["depth"].idxmax()].set_index("stack")["region"]
        s = raw.table("sample_events")
        s["rank"] = raw.locations["process"].to_numpy()[s["location"]]
        s["function"] = raw.regions["name"].reindex(inner.reindex(s["stack"]).to_numpy()).to_numpy()
        return s.groupby(["rank", "function"])["weight"].sum().reset_index()


def count(df: pd.DataFrame, **eq: object) -> int:
    """Number of rows whose columns equal the given values."""
    m = np.ones(len(df), bool)
    for k, v in eq.items():
        m &= (df[k] == v).to_numpy()
    return int(m.sum())
