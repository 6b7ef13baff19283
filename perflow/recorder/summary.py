"""Short figures about a recorded run: time in MPI and off the CPU, messages, and compute hotspots."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..kinds import OFF_CPU, is_library_module
from ..trace.raw import ENTER, RawTrace
from ..trace.scan import enclosing_instance, scan_regions

__all__ = ["RunSummary", "summarize", "mpi_durations"]


def mpi_durations(raw: RawTrace) -> pd.DataFrame:
    """One row per recorded MPI call: ``location``, ``region``, ``name``, ``enter``, ``duration``."""
    ev = raw.region_events
    is_mpi = (raw.regions["paradigm"] == "mpi").reindex(range(int(raw.regions.index.max()) + 1), fill_value=False)
    sel = is_mpi.to_numpy()[ev["region"]]
    loc, time, kind, reg = ev["location"][sel], ev["time"][sel], ev["kind"][sel], ev["region"][sel]
    # MPI calls do not nest, so within a location every ENTER is followed by its LEAVE
    ent = np.flatnonzero(kind == ENTER)
    ok = (ent + 1 < len(kind)) & (loc[np.minimum(ent + 1, len(loc) - 1)] == loc[ent])
    ent = ent[ok]
    names = raw.regions["name"].reindex(reg[ent]).to_numpy()
    return pd.DataFrame(
        {
            "location": loc[ent],
            "region": reg[ent],
            "name": names,
            "enter": time[ent],
            "duration": time[ent + 1] - time[ent],
        }
    )


@dataclass
class RunSummary:
    """Figures about one recorded run (see :func:`summarize`)."""

    ranks: int
    events: int
    duration: float
    mpi_time: float
    mpi_fraction: float
    messages: int
    message_bytes: int
    collectives: int
    samples: int
    #: time off the CPU (``off_cpu`` instances) over all ranks, and the part of it inside MPI calls
    off_cpu: float = 0.0
    off_cpu_in_mpi: float = 0.0
    threads: int = 0
    openmp: str = ""
    top_mpi: list[tuple[str, float, int]] = field(default_factory=list)
    hotspots: list[tuple[str, str, float]] = field(default_factory=list)

    def text(self) -> str:
        """Human-readable lines."""
        lines = [
            f"ranks: {self.ranks}"
            + (f"   threads: {self.threads}" if self.threads > self.ranks else "")
            + f"   events: {self.events:,}   run time: {self.duration:.3f} s   samples: {self.samples:,}",
            f"time in MPI: {self.mpi_time:.3f} s over all ranks ({100 * self.mpi_fraction:.1f}% of rank time)",
            f"messages: {self.messages:,} ({self.message_bytes:,} bytes)   collectives: {self.collectives:,}",
        ]
        if self.off_cpu > 0:
            share = self.off_cpu / (self.ranks * self.duration) if self.ranks and self.duration else 0.0
            lines.append(
                f"time off the CPU: {self.off_cpu:.3f} s over all ranks ({100 * share:.1f}% of rank time; "
                f"{self.off_cpu_in_mpi:.3f} s of it inside MPI calls)"
            )
        if self.openmp:
            lines.append(f"OpenMP: {self.openmp}")
        if self.top_mpi:
            lines.append("MPI calls by time: " + ", ".join(f"{n} {t:.3f} s ({c:,})" for n, t, c in self.top_mpi))
        if self.hotspots:
            lines.append("compute hotspots (self time from samples):")
            lines += [f"  {100 * share:5.1f}%  {name}  {where}" for name, where, share in self.hotspots]
        return "\n".join(lines)


def _sampled_functions(raw: RawTrace) -> np.ndarray:
    """Region each sample fell in: its innermost frame, else (an empty stack) the region instance it fell in."""

    smp, ev, st = raw.sample_events, raw.region_events, raw.stacks
    out = np.full(len(smp["stack"]), -1, dtype=np.int64)
    if len(st):
        inner = st.loc[st.groupby("stack")["depth"].idxmax(), ["stack", "region"]].set_index("stack")["region"]
        out = inner.reindex(smp["stack"]).fillna(-1).to_numpy(dtype=np.int64)
    empty = out < 0
    if empty.any() and len(ev["location"]):
        res = scan_regions(ev["location"], ev["kind"], ev["region"], close_open=True)
        inst = enclosing_instance(res.open_after, ev["location"], smp["location"][empty], smp["pos"][empty])
        out[empty] = np.where(inst >= 0, res.cp_region[res.callpath[np.maximum(inst, 0)]], -1)
    return out


def _calling_code(raw: RawTrace, leaf: np.ndarray) -> dict[int, int]:
    """Per sampled leaf region in library code (:func:`perflow.kinds.is_library_module`), the user's region
    that called it in most of its samples: each sample's innermost frame outside the libraries."""
    reg, st, smp = raw.regions, raw.stacks, raw.sample_events
    ids = reg.index.to_numpy(dtype=np.int64)
    is_lib = np.zeros(int(ids.max()) + 2 if len(ids) else 1, dtype=bool)  # by region id; the last: none (-1)
    is_lib[ids] = [is_library_module(str(m)) for m in reg["module"]]
    if not len(st) or not is_lib[leaf[leaf >= 0]].any():
        return {}
    sr = st["region"].to_numpy(dtype=np.int64)
    own = st[~is_lib[sr] & (sr != 0)]
    code = own.loc[own.groupby("stack")["depth"].idxmax(), ["stack", "region"]].set_index("stack")["region"]
    by = pd.DataFrame({"leaf": leaf, "code": code.reindex(smp["stack"]).to_numpy(), "w": smp["weight"]})
    by = by[is_lib[by["leaf"].to_numpy(dtype=np.int64)] & by["code"].notna().to_numpy()]
    if not len(by):
        return {}
    top = by.groupby(["leaf", "code"])["w"].sum().sort_values(ascending=False, kind="stable")
    out: dict[int, int] = {}
    for (lf, cd), _ in top.items():
        out.setdefault(int(lf), int(cd))
    return out


def _off_cpu(raw: RawTrace) -> tuple[float, float]:
    """Time in ``off_cpu`` instances over all ranks, and the part of it inside MPI calls."""
    ev, reg = raw.region_events, raw.regions
    if not len(ev["region"]):
        return 0.0, 0.0
    n = int(reg.index.max()) + 1
    off = ((reg["name"] == OFF_CPU) & (reg["role"] == "artificial")).reindex(range(n), fill_value=False).to_numpy()
    mpi = (reg["paradigm"] == "mpi").reindex(range(n), fill_value=False).to_numpy()
    # an off_cpu instance holds nothing: its Enter is followed by its Leave
    k = np.flatnonzero(off[ev["region"]] & (ev["kind"] == ENTER))
    k = k[k + 1 < len(ev["region"])]
    dur = ev["time"][k + 1] - ev["time"][k]
    inside = (k > 0) & mpi[ev["region"][np.maximum(k - 1, 0)]] & (ev["kind"][np.maximum(k - 1, 0)] == ENTER)
    return float(dur.sum()), float(dur[inside].sum())


def summarize(raw: RawTrace, top: int = 5) -> RunSummary:
    """Summarize a recorded raw trace.

    Parameters
    ----------
    raw : RawTrace
    top : int
        How many MPI functions and hotspots to list.
    """
    ranks = int(raw.locations["process"].nunique())
    duration = float(raw.attrs.get("ticks") or (raw.region_events["time"].max() if raw.n_events else 0.0))
    calls = mpi_durations(raw)
    mpi_time = float(calls["duration"].sum())
    by = calls.groupby("name")["duration"].agg(["sum", "count"]).sort_values("sum", ascending=False).head(top)
    p2p = raw.p2p_events
    sends = np.isin(p2p["kind"], (0, 1, 8))  # SEND, ISEND, SSEND
    coll = raw.coll_events
    smp = raw.sample_events
    hot: list[tuple[str, str, float]] = []
    if len(smp["stack"]):
        leaf = _sampled_functions(raw)
        w = pd.Series(smp["weight"]).groupby(leaf).sum()
        total = float(smp["weight"].sum()) or 1.0
        caller = _calling_code(raw, leaf)
        for reg, weight in w.drop(index=-1, errors="ignore").sort_values(ascending=False).head(top).items():
            r = raw.regions.loc[int(reg)]
            where = f"{r['file']}:{r['line']}" if r["file"] else str(r["module"])
            if int(reg) in caller:  # library code: the user's code that called it, as the findings name it
                c = raw.regions.loc[caller[int(reg)]]
                where += f"  in {c['name']}" + (f" ({c['file']}:{c['line']})" if c["file"] else "")
            hot.append((str(r["name"]), where, float(weight) / total))
    off, off_mpi = _off_cpu(raw)
    return RunSummary(
        ranks=ranks,
        events=raw.n_events,
        duration=duration,
        mpi_time=mpi_time,
        mpi_fraction=mpi_time / (ranks * duration) if ranks and duration else 0.0,
        messages=int(sends.sum()),
        message_bytes=int(p2p["bytes"][sends].sum()),
        collectives=int((coll["kind"] == 1).sum()),
        samples=len(smp["stack"]),
        off_cpu=off,
        off_cpu_in_mpi=off_mpi,
        threads=len(raw.locations),
        openmp=str(raw.attrs.get("openmp", "")),
        top_mpi=[(str(n), float(r["sum"]), int(r["count"])) for n, r in by.iterrows()],
        hotspots=hot,
    )
