"""The OTF2 perflow writes: valid for other tools, complete, and read back to the same PAG.

Every recording of the recorder tests is checked by the ``recorded`` fixture
(:func:`.otf2check.check_otf2`); here the writer's other inputs (synthetic and
hand-made traces with MPI_Init/Finalize markers, non-blocking collectives,
samples, metrics, threads) are checked too, and recordings are read back.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from perflow.kinds import CollectiveOp, CollEv
from perflow.trace.raw import RawTrace

from .otf2check import check_otf2, otf2_print


def _pag_table(pag) -> pd.DataFrame:  # noqa: ANN001
    """Every metric of every (call path, process), with the vertex's file, line and module."""
    vt = pag.vertex_table
    m = pag.metrics.reset_index()
    v = m["vertex"].to_numpy()
    m = m.melt(id_vars=["vertex", "process", "thread"], var_name="metric", value_name="value")
    v = m["vertex"].to_numpy()
    m["path"] = pag.call_paths().to_numpy()[v]
    for c in ("file", "line", "module"):
        m[c] = vt[c].to_numpy()[v]
    keys = ["metric", "path", "file", "line", "module", "process", "thread"]
    return m.groupby(keys, as_index=False)["value"].sum()


@pytest.mark.parametrize("instrument", [False, True], ids=["sampled", "instrumented"])
def test_recording_round_trip(recorded, instrument: bool) -> None:  # noqa: ANN001
    """The OTF2 trace of a recording reads back (both decoders) to the PAG the recorder saved."""
    from perflow.pag.persist import load
    from perflow.readers.otf2 import decode
    from perflow.trace.build import build_pag

    run = recorded("halo_slow.c", n=4, instrument=instrument)
    saved = load(run.result.files["pag"])
    want = _pag_table(saved)
    assert (want["metric"] == "samples").any() or "time_exc" in set(want["metric"])
    counts = check_otf2(run.result.files["otf2"])
    assert counts.get("CallingContextSample", 0) >= 20  # about 40 samples on the slow rank alone
    for engine in ("fast", "bindings"):
        raw = decode(run.result.files["otf2"], decoder=engine)
        assert len(raw.sample_events["time"]) == len(run.raw.sample_events["time"])
        got = _pag_table(build_pag(raw))
        merged = want.merge(got, on=["metric", "path", "file", "line", "module", "process", "thread"], how="outer")
        missing = merged[merged["value_x"].isna() | merged["value_y"].isna()]
        assert missing.empty, f"{engine}: rows only on one side:\n{missing.head(10)}"
        np.testing.assert_allclose(merged["value_y"], merged["value_x"], rtol=1e-9, atol=1e-6)


def test_recording_layout(recorded) -> None:  # noqa: ANN001
    """Host level in the system tree, sampled calling contexts, an interrupt generator; no undefined enum."""
    run = recorded("halo_slow.c", n=4)
    defs = otf2_print(run.result.files["otf2"], "-G")
    host = run.raw.locations["host"].iloc[0]
    assert f'SYSTEM_TREE_NODE                       1  Name: "{host}"' in defs
    assert 'Class: "node"' in defs and 'Parent: "node::' in defs
    assert "INTERRUPT_GENERATOR" in defs and "Mode: TIME" in defs and "Period: 2000000" in defs  # 500 Hz
    assert "CALLING_CONTEXT " in defs and 'Region: "slow_compute"' in defs
    assert "perflow::region_stack" in defs  # the MPI calls' stacks
    events = otf2_print(run.result.files["otf2"])
    assert "MPI_COLLECTIVE_END" in events and "<100>" not in events and "<101>" not in events


def _raw_with_everything() -> RawTrace:
    """Two ranks: MPI_Init/Finalize marked as perflow collectives 100/101, an Iallreduce, samples, metrics."""
    regions = pd.DataFrame(
        {
            "name": ["prog", "MPI_Init", "MPI_Iallreduce", "MPI_Wait", "MPI_Finalize", "work", "inner"],
            "role": ["function", "function", "coll_all2all", "point2point", "function", "function", "function"],
            "paradigm": ["user", "mpi", "mpi", "mpi", "mpi", "user", "user"],
            "file": ["p.c", "", "p.c", "p.c", "", "p.c", "p.c"],
            "line": [1, 0, 10, 11, 0, 20, 30],
            "module": ["p", "", "p", "p", "", "p", "p"],
            "stack": [-1, -1, 1, -1, -1, -1, -1],
        }
    )
    stacks = pd.DataFrame({"stack": [0, 0, 1], "depth": [0, 1, 0], "region": [5, 6, 5]})
    reg, coll, smp, met = [], [], [], []
    for loc in range(2):
        base = len(reg)
        ev = [(0.0, 0, 0), (0.1, 0, 1), (0.5, 1, 1), (0.6, 0, 2), (0.61, 1, 2), (0.9, 0, 3), (1.2, 1, 3)]
        ev += [(1.3, 0, 4), (1.4, 1, 4), (1.5, 1, 0)]
        reg += [(loc, t, k, r) for t, k, r in ev]
        # perflow's markers for MPI_Init (100) and MPI_Finalize (101), then a non-blocking allreduce
        coll += [
            (loc, 0.1, CollEv.BEGIN, 0, 0, -1, 0, 0, base + 2, -1),
            (loc, 0.5, CollEv.END, CollectiveOp.INIT, 0, -1, 0, 0, base + 2, -1),
            (loc, 0.6, CollEv.BEGIN, 0, 0, -1, 0, 0, base + 4, 7 + loc),
            (loc, 1.1, CollEv.END, CollectiveOp.ALLREDUCE, 0, -1, 8, 8, base + 6, 7 + loc),
            (loc, 1.3, CollEv.BEGIN, 0, 0, -1, 0, 0, base + 8, -1),
            (loc, 1.4, CollEv.END, CollectiveOp.FINALIZE, 0, -1, 0, 0, base + 8, -1),
        ]
        smp += [(loc, 0.7, 0, 0.01, base + 5), (loc, 0.8, 1, 0.02, base + 5), (loc, 0.85, 1, 0.01, base + 5)]
        met += [(loc, 0.6, 0, 0.0, base + 4), (loc, 0.61, 0, 64.0, base + 4)]
    cols = ["location", "time", "kind", "op", "comm", "root", "sent", "received", "pos", "request"]
    c = pd.DataFrame(coll, columns=cols)
    return RawTrace(
        locations=pd.DataFrame({"process": [0, 1], "thread": 0, "name": ["r0", "r1"], "host": ["n1", "n2"]}),
        regions=regions,
        region_events={k: np.array(v) for k, v in zip(["location", "time", "kind", "region"], zip(*reg))},
        coll_events={k: c[k].to_numpy() for k in cols},
        sample_events={k: np.array(v) for k, v in zip(["location", "time", "stack", "weight", "pos"], zip(*smp))},
        metric_events={k: np.array(v) for k, v in zip(["location", "time", "metric", "value", "pos"], zip(*met))},
        metrics=pd.DataFrame({"name": ["io_bytes_written"], "unit": ["bytes"], "mode": ["accumulated_start"]}),
        stacks=stacks,
        comms={0: np.array([0, 1])},
        comm_names={0: "MPI_COMM_WORLD"},
        attrs={"creator": "perflow test", "sample_rate": 100},
    )


def test_writer_output_is_valid_and_complete(tmp_path: Path) -> None:
    from perflow.readers.otf2 import decode
    from perflow.writers.otf2 import write_otf2

    raw = _raw_with_everything()
    anchor = write_otf2(raw, tmp_path / "all")
    counts = check_otf2(anchor)
    # Init/Finalize markers are not OTF2 operations: left out (BEGIN and END); the Iallreduce is non-blocking
    assert counts.get("MpiCollectiveBegin", 0) == counts.get("MpiCollectiveEnd", 0) == 0
    assert counts["NonBlockingCollectiveRequest"] == counts["NonBlockingCollectiveComplete"] == 2
    # weights 0.01, 0.02 (two periods), 0.01 -> 4 events per rank
    assert counts["CallingContextSample"] == 8
    defs = otf2_print(anchor, "-G")
    assert 'Name: "n1"' in defs and 'Name: "n2"' in defs
    for engine in ("fast", "bindings"):
        back = decode(anchor, decoder=engine)
        c = back.table("coll_events")
        assert c["request"].tolist() == [7, 7, 8, 8]
        assert c["op"].tolist() == [int(CollectiveOp.ALLREDUCE)] * 4  # the BEGIN gets its END's op
        s = back.table("sample_events")
        assert s["weight"].tolist() == pytest.approx([0.01, 0.02, 0.01] * 2)  # repeats merged again
        assert s["pos"].tolist() == list(raw.sample_events["pos"])
        st = back.stacks.sort_values(["stack", "depth"])
        frames = {k: tuple(g["region"]) for k, g in st.groupby("stack")}
        assert sorted(frames[k] for k in s["stack"].unique()) == [(5,), (5, 6)]
        assert frames[int(back.regions["stack"][2])] == (5,)  # the Iallreduce's call stack
        assert list(back.regions["module"]) == list(raw.regions["module"])


def test_synthetic_traces_are_valid(tmp_path: Path) -> None:
    from perflow.synthetic import raw_trace
    from perflow.writers.otf2 import write_otf2

    for k, kw in enumerate(({}, {"late_sender": 0.5, "imbalance": 0.3, "slow_rank": 1})):
        counts = check_otf2(write_otf2(raw_trace(nprocs=4, iterations=3, seed=k, **kw), tmp_path / f"s{k}"))
        assert counts["Enter"] == counts["Leave"] > 0


def test_hand_made_reader_trace_is_valid(tmp_path: Path) -> None:
    from perflow.writers.otf2 import write_otf2

    from ..readers.conftest import small_raw

    counts = check_otf2(write_otf2(small_raw(), tmp_path / "small"))
    assert counts["MpiCollectiveEnd"] > 0 and counts["ThreadFork"] > 0 and counts["Metric"] > 0
