"""Chrome trace reader on generated samples (tests/data/chrome) and the to_chrome round trip."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import perflow
from perflow.errors import FormatError, PAGError
from perflow.writers.chrome import to_chrome
from tests.readers.helpers import check_times

DATA = Path(__file__).resolve().parents[1] / "data" / "chrome"


def test_viztracer_complete_events() -> None:
    pag = perflow.read(DATA / "viztracer.json")
    assert pag.attrs["format"] == "chrome"
    # pid 4242 -> process 0; tid 4242 (the main thread) -> 0, tid 4250 -> 1
    assert pag.attrs["pid_map"] == {"4242": 0}
    assert pag.attrs["tid_map"] == {"4242/4242": 0, "4242/4250": 1}
    assert sorted(pag.call_paths()) == ["main", "main/MPI_Allreduce", "main/compute", "main/compute/kernel", "worker"]
    compute = pag.vertex("main/compute")
    assert compute.file == "run.py" and compute.line == 5 and compute.kind == "python"
    # compute: ts 1010, dur 50 us; its child kernel: dur 10 us -> exclusive 40 us
    m = pag.metrics
    assert m.loc[(compute.id, 0, 0), "time_inc"] == pytest.approx(50e-6)
    assert m.loc[(compute.id, 0, 0), "time_exc"] == pytest.approx(40e-6)
    # times are seconds since the earliest event (ts 1000 us)
    assert pag.trace.intervals["enter"].min() == 0.0
    assert pag.attrs["time_offset"] == pytest.approx(1000e-6)
    assert len(pag.trace.collectives) == 1  # MPI_Allreduce recognised by name
    check_times(pag)


def test_pytorch_begin_end_and_rank_names() -> None:
    pag = perflow.read(DATA / "pytorch.json")
    # process names "Rank 0" (pid 10) and "Rank 1" (pid 11) give the processes
    assert pag.attrs["pid_map"] == {"10": 0, "11": 1}
    iv = pag.trace.intervals
    assert len(iv) == 6
    barrier = pag.vertex("ProfilerStep#1/MPI_Barrier").id
    # rank 1's barrier: B at 33 us, E at 50 us
    row = iv[(iv["vertex"] == barrier) & (iv["process"] == 1)]
    assert row["enter"].iat[0] == pytest.approx(33e-6) and row["leave"].iat[0] == pytest.approx(50e-6)
    coll = pag.trace.collectives
    assert sorted(coll["process"]) == [0, 1] and coll["instance"].nunique() == 1
    check_times(pag)


def test_perfflow_unterminated_array() -> None:
    pag = perflow.read(DATA / "perfflow.pfw")
    assert pag.attrs["format"] == "chrome"
    step = pag.vertex("solve/step").id
    assert pag.metrics.loc[(step, 0, 0), "visits"] == 2
    assert pag.metrics.loc[(step, 0, 0), "time_inc"] == pytest.approx(80e-6)
    assert pag.metrics.loc[(pag.vertex("solve").id, 0, 0), "time_exc"] == pytest.approx(20e-6)


def test_one_file_per_rank() -> None:
    pag = perflow.read(DATA / "per-rank")
    assert list(pag.processes) == [0, 1, 2]  # trace.rank<N>.json -> process N
    b = pag.vertex("main/MPI_Bcast").id
    assert pag.metrics.loc[(b, 2, 0), "time_inc"] == pytest.approx(18e-6)
    assert pag.trace.collectives["instance"].nunique() == 1


def test_newline_delimited(tmp_path: Path) -> None:
    f = tmp_path / "nd.json"
    f.write_text(
        '{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 0, "dur": 5}\n'
        '{"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": 1, "dur": 2}\n'
    )
    pag = perflow.read_chrome(f)
    assert sorted(pag.call_paths()) == ["a", "a/b"]


def test_round_trip(tmp_path: Path) -> None:
    src = perflow.synthetic.trace(nprocs=4, iterations=6, seed=3)
    out = to_chrome(src, tmp_path / "rt.json")
    back = perflow.read(out)

    def table(p: perflow.PAG, offset: float) -> pd.DataFrame:
        iv = p.trace.intervals
        return (
            pd.DataFrame(
                {
                    "p": iv["process"],
                    "t": iv["thread"],
                    "path": p.call_paths().to_numpy()[iv["vertex"]],
                    "enter": iv["enter"] + offset,
                    "leave": iv["leave"] + offset,
                }
            )
            .sort_values(["p", "t", "enter", "path"])
            .reset_index(drop=True)
        )

    a, b = table(src, 0.0), table(back, back.attrs["time_offset"])
    assert len(a) == len(b) == src.trace.n_intervals
    assert (a["path"] == b["path"]).all() and (a[["p", "t"]].to_numpy() == b[["p", "t"]].to_numpy()).all()
    np.testing.assert_allclose(b["enter"], a["enter"], atol=1e-12)
    np.testing.assert_allclose(b["leave"], a["leave"], atol=1e-12)
    assert len(back.trace.messages) == len(src.trace.messages)
    # message bytes travel in the flows' args (collective byte counts are not written)
    assert back.trace.messages["bytes"].sum() == src.trace.messages["bytes"].sum()
    np.testing.assert_allclose(
        back.aggregate("time_exc").sort_index().to_numpy().sum(), src.aggregate("time_exc").sum()
    )


def test_annotations_and_errors(tmp_path: Path) -> None:
    src = perflow.synthetic.trace(nprocs=2, iterations=2, seed=1)
    ann = pd.DataFrame(
        {
            "process": [0],
            "thread": [0],
            "start": [0.001],
            "end": [0.002],
            "name": ["late sender"],
            "args": [{"wait": 0.001}],
        }
    )
    out = to_chrome(src, tmp_path / "a.json", annotations=ann)
    doc = json.loads(out.read_text())
    b = [e for e in doc["traceEvents"] if e["ph"] == "b"]
    assert b == [
        {
            "ph": "b",
            "cat": "annotation",
            "name": "late sender",
            "id": 0,
            "pid": 0,
            "tid": 0,
            "ts": pytest.approx(1000.0),
            "args": {"wait": 0.001},
        }
    ]
    assert {e["ph"] for e in doc["traceEvents"]} >= {"X", "s", "f", "b", "e", "M"}
    # annotations do not change what is read back
    assert perflow.read(out).trace.n_intervals == src.trace.n_intervals
    with pytest.raises(PAGError, match="annotations lack the columns"):
        to_chrome(src, tmp_path / "b.json", annotations=pd.DataFrame({"process": [0]}))
    with pytest.raises(PAGError, match="trace-backed PAG"):
        to_chrome(perflow.synthetic.profile(nvertices=5, nprocs=2), tmp_path / "c.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 0, "dur": 1}, {"ph": "X", "na')
    with pytest.raises(FormatError, match=r"bad\.json \(line 1, column \d+\): invalid JSON"):
        perflow.read_chrome(bad)
    bad.write_text("")
    with pytest.raises(FormatError, match="empty file"):
        perflow.read_chrome(bad)
    bad.write_text('{"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": "soon", "dur": 1}]}')
    with pytest.raises(FormatError, match="event 0 has a missing or non-numeric 'ts'"):
        perflow.read_chrome(bad)
    bad.write_text('{"traceEvents": [{"ph": "i", "name": "a", "pid": 1, "tid": 1, "ts": 3}]}')
    with pytest.raises(FormatError, match="no duration events"):
        perflow.read_chrome(bad)
    bad.write_bytes(b'[{"ph": "X", "name": "\xff\xfe"}]')
    with pytest.raises(FormatError, match="not UTF-8"):
        perflow.read_chrome(bad)


def test_gzip(tmp_path: Path) -> None:
    import gzip

    f = tmp_path / "trace.json.gz"
    f.write_bytes(gzip.compress((DATA / "viztracer.json").read_bytes()))
    assert perflow.readers.detect_format(f) == "chrome"
    assert perflow.read(f).trace.n_intervals == 5


@pytest.mark.timeout(60)
def test_fuzz_events(tmp_path: Path) -> None:
    import random

    rng = random.Random(5)
    base = json.loads((DATA / "viztracer.json").read_text())["traceEvents"]
    values = [None, -5, 1e300, "x", [], {}, True, 0, 3.5]
    errors = 0
    for i in range(40):
        ev = [dict(e) for e in base]
        for _ in range(rng.randint(1, 4)):
            e = rng.choice(ev)
            e[rng.choice(["ph", "ts", "dur", "pid", "tid", "name", "args"])] = rng.choice(values + ["X", "B", "E"])
        f = tmp_path / f"f{i}.json"
        f.write_text(json.dumps({"traceEvents": ev}))
        try:
            pag = perflow.read_chrome(f)
        except FormatError as exc:
            assert str(f) in str(exc)
            errors += 1
        else:
            assert isinstance(pag, perflow.PAG)
    assert errors >= 1
