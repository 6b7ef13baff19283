"""Invariants every analysis must keep on every dataset, as a table: one line per (pass, invariant).

To put a new pass under the suite, add a line to :data:`CHECKS`, usually with
one of the generic invariants:

* ``agree(q(pass_a, extract_a), q(pass_b, extract_b))`` -- two passes report
  the same quantity (``extract`` turns a pass's output into a Series);
* ``per_process_time(pass, column, **settings)`` -- a per-process table adds
  up to each process's time;
* ``within(q(pass, extract), lo, hi)`` -- values lie in a range;

or with a function of the PAG that asserts. ``needs`` says which datasets a
check applies to ("trace", "profile" or "any").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

import perflow
from perflow.flow.registry import get_pass
from perflow.passes.waitstates import WAIT_FAMILIES
from perflow.trace.waits import IDLE_KINDS

#: Relative tolerance for sums computed in different orders.
RTOL = 1e-9
#: cProfile records a caller->callee graph: calling contexts (and their inclusive times) are approximated.
APPROX_RTOL = 1e-5


@dataclass(frozen=True)
class Check:
    """One invariant of one or more passes."""

    passes: str
    invariant: str
    fn: Callable[[perflow.PAG], None]
    needs: str = "any"

    @property
    def id(self) -> str:
        return f"{self.passes}: {self.invariant}"


def run(name: str, pag: perflow.PAG, **settings: Any) -> Any:
    """Run a registered pass by name (as a flow would)."""
    return get_pass(name).func(pag, **settings)


@dataclass(frozen=True)
class Quantity:
    """A number (or Series) one pass reports: the pass, its settings, and how to read it from the output."""

    name: str
    extract: Callable[[Any, perflow.PAG], pd.Series | float]
    settings: tuple[tuple[str, Any], ...] = ()

    def __call__(self, pag: perflow.PAG) -> pd.Series | float:
        return self.extract(run(self.name, pag, **dict(self.settings)), pag)


def q(name: str, extract: Callable[[Any, perflow.PAG], pd.Series | float], **settings: Any) -> Quantity:
    return Quantity(name, extract, tuple(sorted(settings.items())))


def _scale(*xs: Any) -> float:
    vals = [np.abs(np.asarray(x, dtype=np.float64)) for x in xs]
    return max([float(v.max()) for v in vals if v.size] + [1e-300])


def close(a: Any, b: Any, what: str, rtol: float = RTOL) -> None:
    """``a`` equals ``b`` (Series aligned on their index, missing entries 0) up to ``rtol`` of the largest value."""
    if isinstance(a, pd.Series) or isinstance(b, pd.Series):
        a, b = pd.Series(a), pd.Series(b)
        idx = a.index.union(b.index)
        a, b = a.reindex(idx, fill_value=0.0), b.reindex(idx, fill_value=0.0)
    tol = rtol * _scale(a, b)
    diff = np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))
    assert (diff <= tol).all(), f"{what}: differ by up to {diff.max():.3g} (tolerance {tol:.3g})\n{a}\n{b}"


def agree(a: Quantity, b: Quantity, rtol: float = RTOL) -> Callable[[perflow.PAG], None]:
    def check(pag: perflow.PAG) -> None:
        close(a(pag), b(pag), f"{a.name} vs {b.name}", rtol)

    return check


def within(x: Quantity, lo: float, hi: float) -> Callable[[perflow.PAG], None]:
    def check(pag: perflow.PAG) -> None:
        v = pd.Series(x(pag)).dropna()
        eps = RTOL * max(abs(lo), abs(hi), 1.0)
        bad = v[(v < lo - eps) | (v > hi + eps)]
        assert not len(bad), f"{x.name}: outside [{lo}, {hi}]:\n{bad}"

    return check


def process_time(pag: perflow.PAG) -> pd.Series:
    """Each process's time: its exclusive time summed over call paths and threads."""
    return pag.metrics["time_exc"].groupby(level="process").sum()


def per_process_time(name: str, column: str, **settings: Any) -> Callable[[perflow.PAG], None]:
    def check(pag: perflow.PAG) -> None:
        df = run(name, pag, **settings)
        close(df.groupby("process")[column].sum(), process_time(pag), f"{name}.{column} vs process time")

    return check


def _tol(pag: perflow.PAG) -> float:
    return APPROX_RTOL if pag.attrs.get("approximation") else RTOL


# ----------------------------------------------------------------- invariants of the PAG itself


def exclusive_partitions_inclusive(pag: perflow.PAG) -> None:
    """Per location and call path: time_inc = time_exc + the children's time_inc (absent rows are 0)."""
    m = pag.metrics[["time_exc", "time_inc"]].reset_index()
    parent = pag.vertex_table["parent"].to_numpy()
    m["parent"] = parent[m["vertex"].to_numpy()]
    child = m[m["parent"] >= 0].groupby(["parent", "process", "thread"])[["time_inc"]].sum()
    child.index.names = ["vertex", "process", "thread"]
    own = m.set_index(["vertex", "process", "thread"])
    idx = own.index.union(child.index)
    own = own.reindex(idx, fill_value=0.0)
    ch = child["time_inc"].reindex(idx, fill_value=0.0)
    close(own["time_inc"], own["time_exc"] + ch, "time_inc vs time_exc + children's time_inc", _tol(pag))
    roots = m[np.isin(m["vertex"], pag.roots)].groupby(["process", "thread"])["time_inc"].sum()
    close(roots, m.groupby(["process", "thread"])["time_exc"].sum(), "root time_inc vs sum of time_exc", _tol(pag))


# ----------------------------------------------------------------- trace invariants


def waits_within_calls(pag: perflow.PAG) -> None:
    """The waiting time charged to a call never exceeds the call's duration, nor to a call path its time."""
    iv = pag.trace.intervals
    per_call = run_waiting_time(pag, per="interval")
    if not len(per_call):
        return
    i = per_call["interval"].to_numpy()
    known = i >= 0
    dur = (iv["leave"].to_numpy() - iv["enter"].to_numpy())[i[known]]
    assert (per_call["wait"].to_numpy()[known] <= dur * (1 + RTOL) + 1e-15).all()
    fams = per_call[list(WAIT_FAMILIES)].sum(axis=1)
    close(fams, per_call["wait"], "families vs wait")
    ws = run("wait_states", pag)
    idle = ws[ws["kind"].isin([k for f in WAIT_FAMILIES.values() for k in f]).to_numpy() & (ws["interval"] >= 0)]
    d = iv["leave"].to_numpy()[idle["interval"]] - iv["enter"].to_numpy()[idle["interval"]]
    assert (idle["amount"].to_numpy() <= d * (1 + RTOL) + 1e-15).all(), "a wait-state instance outlasts its call"
    per_vertex = run_waiting_time(pag).groupby(["vertex", "process", "thread"])["wait"].sum()
    inc = pag.metrics["time_inc"].reindex(per_vertex.index, fill_value=0.0)
    assert (per_vertex <= inc * (1 + RTOL) + 1e-15).all(), "a call path waits longer than it runs"


def waits_partition_calls(pag: perflow.PAG, **settings: Any) -> None:
    """The wait states of one call (all kinds, completion included) lie inside it and never overlap.

    So their sum never exceeds the call's duration: an MPI_Sendrecv's Late Sender and Late Receiver are a
    partition of its time, not two counts of the same seconds.
    """
    w = run("wait_states", pag, **settings)
    w = w[w["interval"].to_numpy() >= 0]
    if not len(w):
        return
    iv = pag.trace.intervals
    i = w["interval"].to_numpy().astype(np.int64)
    enter, leave = iv["enter"].to_numpy()[i], iv["leave"].to_numpy()[i]
    start, end, amount = w["start"].to_numpy(), w["end"].to_numpy(), w["amount"].to_numpy()
    t0, t1 = pag.trace.span
    tol = RTOL * max(abs(t0), abs(t1), t1 - t0, 1.0)
    close(amount, end - start, "wait amount vs end - start")
    outside = (start < enter - tol) | (end > leave + tol)
    assert not outside.any(), f"wait states outside their calls:\n{w[outside].head()}"
    o = np.lexsort((start, i))
    covered = pd.Series(end[o]).groupby(i[o], sort=False).cummax().shift(1).to_numpy()
    first = np.r_[True, i[o][1:] != i[o][:-1]]
    overlap = ~first & (start[o] < covered - tol)
    assert not overlap.any(), (
        f"wait states of one call overlap:\n{w.iloc[o[np.r_[overlap[1:], False] | overlap]].head(6)}"
    )
    per_call = np.bincount(np.unique(i, return_inverse=True)[1], weights=amount)
    dur = pd.Series(leave - enter).groupby(i).first().to_numpy()
    assert (per_call <= dur + tol).all(), "the wait states of a call add up to more than its duration"


def unattributed_waiting_reported(pag: perflow.PAG) -> None:
    """root_cause accounts for all waiting it analyses: attributed + off_cpu + unattributed + lost = total_wait.

    (``off_cpu``: waiting caused by time a recorded rank spent off the CPU, which is no code's; the
    ``off_cpu`` table per call path sums to it.) And it
    analyses no more than the idle wait states (no double counting), short-term and long-term.
    """
    ws = run("wait_states", pag)
    idle = float(ws.loc[ws["kind"].isin(list(IDLE_KINDS)).to_numpy(), "amount"].sum())
    for long_term in (False, True):
        res = run("root_cause", pag, long_term=long_term)
        s = res["summary"].iloc[0]
        close(float(res["off_cpu"]["total"].sum()), s["off_cpu"], "root_cause's off_cpu table against its summary")
        assert s["unattributed"] >= 0 and s["lost"] >= 0 and s["attributed"] >= 0 and s["off_cpu"] >= 0
        close(
            s["attributed"] + s["off_cpu"] + s["unattributed"] + s["lost"],
            s["total_wait"],
            f"root_cause (long_term={long_term})",
        )
        assert s["total_wait"] <= idle * (1 + RTOL) + 1e-12, "root_cause analyses more waiting than there is"


def run_waiting_time(pag: perflow.PAG, **kw: Any) -> pd.DataFrame:
    from perflow.passes.waitstates import waiting_time

    return waiting_time(pag, **kw)


def critical_path_spans_run(pag: perflow.PAG) -> None:
    """The path ends where the run ends, starts where its first location starts, and is contiguous; by default
    (Scalasca's ends) the run is the span from a location's MPI_Init enter to the last MPI_Finalize enter."""
    from perflow.passes.critical_path import critical_path_tables
    from perflow.trace.analyses import CriticalSettings

    iv = pag.trace.intervals
    names = pag.vertex_table["name"].astype(str).to_numpy()[iv["vertex"].to_numpy()]
    fin = iv[names == "MPI_Finalize"]
    ini = iv[np.isin(names, ["MPI_Init", "MPI_Init_thread"])]
    for ends in ("trace", "finalize"):
        r = critical_path_tables(pag, "critical_path", CriticalSettings(path_ends=ends))
        s = r["summary"].iloc[0]
        t0, t1 = pag.trace.span
        seg = r["segments"]
        first = r["hops"].iloc[0]  # the path may begin with a zero-length hop (a late start into MPI_Init)
        starts = iv.groupby(["process", "thread"])["enter"].min()
        start = starts.loc[(first["process"], first["thread"])]
        if ends == "finalize":
            t1 = fin["enter"].max() if len(fin) else t1
            own = ini[(ini["process"] == first["process"]) & (ini["thread"] == first["thread"])]
            start = max(start, own["enter"].min()) if len(own) else start
        close(s["end"], t1, f"path end vs end of the run ({ends})")
        close(s["start"], start, f"path start vs start of its first location ({ends})")
        assert s["length"] <= (t1 - t0) * (1 + RTOL)
        close(s["length"], t1 - s["start"], f"path length vs the run's span after its first location starts ({ends})")
        close((seg["end"] - seg["start"]).sum(), s["length"], "segments vs path length")
        close(seg["start"].to_numpy()[1:], seg["end"].to_numpy()[:-1], "contiguous segments")
        prof = r["profile"]
        close(prof["cp_time"].sum(), s["length"], "critical-path time per call path vs path length")


def _ls_from_instances(ws: pd.DataFrame, pag: perflow.PAG) -> pd.Series:
    ls = ws[ws["kind"].isin(list(WAIT_FAMILIES["late_sender"])).to_numpy()]
    return ls.groupby("process")["amount"].sum()


def _overlap_free(pag: perflow.PAG) -> bool:
    """No call waits in two families at once (then per-family sums of instances equal waiting_time's)."""
    w = run("wait_states", pag)
    fam = (
        pd.Series({k: f for f, ks in WAIT_FAMILIES.items() for k in ks}, dtype=object)
        .reindex(w["kind"].astype(str))
        .to_numpy()
    )
    x = pd.DataFrame({"interval": w["interval"].to_numpy(), "fam": fam}).dropna()
    return bool((x.groupby("interval")["fam"].nunique() <= 1).all())


def late_sender_agrees(pag: perflow.PAG) -> None:
    wt = run_waiting_time(pag).groupby("process")["late_sender"].sum()
    cs = run("comm_summary", pag).set_index("process")["late_sender_wait"]
    close(cs, wt, "comm_summary.late_sender_wait vs waiting_time.late_sender")
    if _overlap_free(pag):
        close(_ls_from_instances(run("wait_states", pag), pag), wt, "wait_states (Late Sender) vs waiting_time")
        per_vertex = run("late_sender", pag).set_index("vertex")["late_sender_total"]
        by_v = run_waiting_time(pag).groupby("vertex")["late_sender"].sum()
        close(per_vertex, by_v[by_v > 0], "late_sender.late_sender_total vs waiting_time per call path")


def edge_waits_agree(pag: perflow.PAG) -> None:
    """The parallel view's p2p edges carry the Late Sender waiting time the wait states report, per receiver."""
    et = pag.parallel.edge_table
    p2p = et[et["kind"].astype(str).to_numpy() == "p2p"]
    dst_proc = pag.parallel.vertex_frame["process"].to_numpy()[p2p["dst"].to_numpy()]
    edges = pd.Series(p2p["wait"].to_numpy(), index=dst_proc).groupby(level=0).sum()
    inst = _ls_from_instances(run("wait_states", pag), pag)
    close(edges[edges > 0], inst[inst > 0], "p2p edge waits per receiving process vs wait_states (Late Sender)")


def breakdown_wait_agrees(pag: perflow.PAG) -> None:
    b = run("breakdown", pag, by="process", wide=True).set_index("process")["wait"]
    close(b, run_waiting_time(pag).groupby("process")["wait"].sum(), "breakdown wait vs waiting_time")
    cp = run("critical_path", pag)["profile"].set_index("vertex")["wait"]
    bd = run("breakdown", pag, by="vertex", wide=True).set_index("vertex")["wait"]
    close(cp[cp.index >= 0], bd, "critical_path profile wait vs breakdown's per call path")
    close(cp.sum(), run_waiting_time(pag)["wait"].sum(), "critical_path profile wait vs waiting_time")


def _pop(df: pd.DataFrame, pag: perflow.PAG) -> pd.Series:
    return df.set_index("metric")["value"]


_EFFICIENCIES = [
    "parallel_efficiency",
    "load_balance",
    "communication_efficiency",
    "serialisation_efficiency",
    "transfer_efficiency",
]


def pop_identities(pag: perflow.PAG) -> None:
    for span in ("init_finalize", "run"):
        v = _pop(run("pop_metrics", pag, span=span), pag)
        eff = v[_EFFICIENCIES].dropna()
        assert ((eff >= -RTOL) & (eff <= 1 + RTOL)).all(), f"POP efficiency outside [0, 1] (span={span}):\n{eff}"
        if v["useful_max"] > 0:  # else LB is 0 / 0
            close(v["parallel_efficiency"], v["load_balance"] * v["communication_efficiency"], "PE vs LB x CommE")
        if np.isfinite(v["serialisation_efficiency"]):
            close(
                v["communication_efficiency"],
                v["serialisation_efficiency"] * v["transfer_efficiency"],
                "CommE vs SerE x TE",
            )
            assert v["useful_max"] <= v["ideal_runtime"] * (1 + RTOL) <= v["runtime"] * (1 + RTOL) ** 2


def replay_useful_time_agrees(pag: perflow.PAG) -> None:
    """The replay's computation per location (whole run) equals the profile's useful time."""
    from perflow.passes.pop import useful_time

    v = _pop(run("pop_metrics", pag, span="run"), pag)
    expected = useful_time(pag)
    kind = pag.vertex_table["kind"].astype(str).to_numpy()
    m = pag.metrics
    host = np.ones(len(m), dtype=bool)
    if "type" in pag.locations.columns:
        gpu_locs = pag.locations.loc[pag.locations["type"].astype(str) == "gpu", ["process", "thread"]]
        key = pd.MultiIndex.from_frame(gpu_locs)
        host = ~pd.MultiIndex.from_arrays(
            [m.index.get_level_values("process"), m.index.get_level_values("thread")]
        ).isin(key)
    api = (kind[np.asarray(m.index.codes[0])] == "gpu") & host
    if not api.any():
        close(v["useful_total"], expected.sum(), "pop_metrics useful_total vs useful_time")
        return
    # a host's blocking GPU API call (a synchronous cudaMemcpy) waits for its device work: the replay
    # counts that part as waiting, the profile the whole call as the call's time; the replay lies between
    blocked = float(m["time_exc"].to_numpy(dtype=np.float64)[api].sum())
    total = float(expected.sum())
    assert total - blocked - 1e-9 <= v["useful_total"] <= total * (1 + RTOL) + 1e-12, (
        v["useful_total"],
        total,
        blocked,
    )


def comm_totals(pag: perflow.PAG) -> None:
    for metric, sent, recv in (("bytes", "bytes_sent", "bytes_recv"), ("count", "msgs_sent", "msgs_recv")):
        cm = run("comm_matrix", pag, metric=metric)
        cs = run("comm_summary", pag).set_index("process")
        close(cm.sum(axis=1), cs[sent], f"comm_matrix({metric}) row sums vs comm_summary.{sent}")
        close(cm.sum(axis=0), cs[recv], f"comm_matrix({metric}) column sums vs comm_summary.{recv}")
    if pag.trace is not None:
        close(run("comm_matrix", pag).to_numpy().sum(), pag.trace.messages["bytes"].sum(), "matrix vs message bytes")
        sizes = run("message_sizes", pag)
        close(sizes["bytes"].sum(), pag.trace.messages["bytes"].sum(), "message_sizes vs message bytes")


def _sum_col(col: str) -> Callable[[Any, perflow.PAG], float]:
    return lambda df, pag: float(df[col].sum())


def _hotspot_all(df: pd.DataFrame, pag: perflow.PAG) -> float:
    return float(df.attrs["total"])


#: The table: (passes, invariant, check, datasets it applies to).
CHECKS: list[Check] = [
    Check("PAG", "exclusive time partitions inclusive time per location", exclusive_partitions_inclusive),
    Check("breakdown", "categories add up to each process's time", per_process_time("breakdown", "value")),
    Check(
        "breakdown/hotspot",
        "total time agrees",
        agree(q("breakdown", _sum_col("value"), by="total"), q("hotspot", _hotspot_all, metric="time_exc")),
    ),
    Check("comm_matrix/comm_summary/message_sizes", "totals equal bytes and messages sent and received", comm_totals),
    Check("waiting_time/wait_states", "waits never exceed the calls they are charged to", waits_within_calls, "trace"),
    Check("wait_states", "no two waits of one call overlap, none outlasts it", waits_partition_calls, "trace"),
    Check(
        "wait_states",
        "no two waits of one call overlap (late_receiver=synchronous)",
        lambda pag: waits_partition_calls(pag, late_receiver="synchronous"),
        "trace",
    ),
    Check("root_cause", "unattributed waiting reported: waits add up", unattributed_waiting_reported, "trace"),
    Check("wait_states/comm_summary/late_sender", "Late Sender per process agrees", late_sender_agrees, "trace"),
    Check("breakdown/critical_path", "waiting time agrees with waiting_time", breakdown_wait_agrees, "trace"),
    Check("parallel view/wait_states", "p2p edge waits agree with the Late Sender waits", edge_waits_agree, "trace"),
    Check("critical_path", "the path covers the run from its first location's start", critical_path_spans_run, "trace"),
    Check(
        "critical_path/pop_metrics",
        "ideal runtime agrees",
        agree(
            q("critical_path", lambda r, pag: float(r["summary"]["ideal_runtime"].iloc[0])),
            q("pop_metrics", lambda df, pag: float(_pop(df, pag)["ideal_runtime"]), span="run"),
        ),
        "trace",
    ),
    Check("pop_metrics", "efficiencies in [0, 1], PE = LB x CommE, CommE = SerE x TE", pop_identities),
    Check("pop_metrics", "the replay's useful time equals the profile's", replay_useful_time_agrees, "trace"),
    Check(
        "imbalance",
        "load balance in [0, 1]",
        within(q("imbalance", lambda df, pag: df["load_balance"]), 0.0, 1.0),
    ),
]
