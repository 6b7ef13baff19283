"""write_otf2: RawTrace -> OTF2 archive that both decoders (and the otf2 package) read back."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from perflow.kinds import P2P
from perflow.readers.otf2 import decode
from perflow.trace.raw import RawTrace
from perflow.writers.otf2 import write_otf2

from .conftest import raw_from_streams, small_raw
from .test_otf2_decode import TABLES, assert_same_tables

pytestmark = pytest.mark.timeout(120)


def assert_round_trip(a: RawTrace, b: RawTrace, res: float) -> None:
    """Tables equal, times equal up to half a tick."""
    for t in TABLES:
        for c in getattr(a, t):
            x, y = getattr(a, t)[c], getattr(b, t)[c]
            if c == "time":
                np.testing.assert_allclose(y, x, rtol=0, atol=0.5 / res + 1e-12, err_msg=t)
            else:
                np.testing.assert_array_equal(y, x, err_msg=f"{t}.{c}")


@pytest.mark.parametrize("name", ["ping-pong", "ping-pong-papi"])
def test_round_trip_samples(otf2_sample, tmp_path, name):
    a = decode(otf2_sample(name), decoder="fast")
    res = a.attrs["timer_resolution"]
    anchor = write_otf2(a, tmp_path / "rt", timer_resolution=res)
    assert anchor.endswith("rt/traces.otf2")
    for engine in ("fast", "bindings"):
        b = decode(anchor, decoder=engine)
        b.validate()
        assert_round_trip(a, b, res)
        pd.testing.assert_frame_equal(a.locations, b.locations)
        pd.testing.assert_frame_equal(a.regions, b.regions)
        pd.testing.assert_frame_equal(a.metrics, b.metrics)
        assert a.comm_names == b.comm_names
        assert {k: v.tolist() for k, v in a.comms.items()} == {k: v.tolist() for k, v in b.comms.items()}
        assert b.attrs["creator"] == a.attrs["creator"]
        assert b.attrs["skipped_events"] == {}  # ProgramBegin/End are not written


def test_round_trip_small_trace_coarse_clock(tmp_path):
    a = decode(write_otf2(small_raw(), tmp_path / "a"), decoder="fast")
    b_anchor = write_otf2(a, tmp_path / "b.otf2", timer_resolution=1000)  # anchor path form, ms ticks
    assert b_anchor.endswith("/b.otf2")
    b = decode(b_anchor, decoder="bindings")
    assert_round_trip(a, b, 1000)
    assert b.attrs["timer_resolution"] == 1000
    assert_same_tables(b, decode(b_anchor, decoder="fast"))


def test_generic_raw_trace_gets_mpi_definitions(tmp_path):
    """A trace from a non-OTF2 source: no comms, threads, negative times, a synchronous send."""
    locations = pd.DataFrame({"process": [0, 0, 1, 2], "thread": [0, 1, 0, 0], "name": "", "type": "cpu"})
    streams = [
        [("enter", -0.5, 0), ("p2p", -0.4, P2P.SSEND, 1, 7, 0, 10, -1), ("leave", 0.25, 0)],
        [("enter", 0.1, 1), ("leave", 0.2, 1)],
        [("enter", 0.0, 0), ("p2p", 0.1, P2P.RECV, 0, 7, 0, 10, -1), ("leave", 0.3, 0)],
        [("enter", 0.0, 1), ("leave", 1.0, 1)],
    ]
    regions = pd.DataFrame({"name": ["f", "g"], "role": ["function", "loop"], "paradigm": ["python", "user"]})
    raw = raw_from_streams(streams, locations, regions=regions)
    anchor = write_otf2(raw, tmp_path / "g", timer_resolution=1_000_000)
    for engine in ("fast", "bindings"):
        b = decode(anchor, decoder=engine)
        assert b.locations[["process", "thread"]].values.tolist() == [[0, 0], [0, 1], [1, 0], [2, 0]]
        assert b.comm_names == {0: "MPI_COMM_WORLD", 7: "undefined comm 7"}
        assert b.comms[0].tolist() == [0, 1, 2] and b.comms[7].tolist() == []
        np.testing.assert_allclose(b.region_events["time"], raw.region_events["time"], atol=1e-9)
        assert b.attrs["global_offset"] == 500_000  # shifted so that the first tick is not negative
        assert b.p2p_events["kind"].tolist() == [P2P.SEND, P2P.RECV]  # OTF2 has no synchronous-send record
        assert b.regions["role"].tolist() == ["function", "loop"]
        assert b.regions["paradigm"].tolist() == ["unknown", "user"]  # "python" is no OTF2 paradigm


def test_metric_events_grouping(tmp_path):
    """Rows sharing time and position form one OTF2 Metric event unless a member repeats."""
    locations = pd.DataFrame({"process": [0], "thread": [0], "name": "m", "type": "cpu"})
    stream = [
        ("enter", 1.0, 0),
        ("metric", 1.0, 0, 1.0),
        ("metric", 1.0, 1, 2.0),
        ("metric", 1.0, 0, 3.0),  # member 0 again: a second event
        ("metric", 1.5, 1, 4.5),
        ("leave", 2.0, 0),
    ]
    metrics = pd.DataFrame({"name": ["a", "b"], "unit": ["s", "B"], "mode": ["absolute_point", "accumulated_start"]})
    raw = raw_from_streams([stream], locations, regions=pd.DataFrame({"name": ["r"]}), metrics=metrics)
    anchor = write_otf2(raw, tmp_path / "m")
    for engine in ("fast", "bindings"):
        b = decode(anchor, decoder=engine)
        assert b.metric_events["metric"].tolist() == [0, 1, 0, 1]
        assert b.metric_events["value"].tolist() == [1.0, 2.0, 3.0, 4.5]
        assert b.metric_events["pos"].tolist() == [1, 1, 1, 1]
        assert b.metrics[["name", "unit", "mode"]].values.tolist() == [
            ["a", "s", "absolute_point"],
            ["b", "B", "accumulated_start"],
        ]

    import otf2

    with otf2.reader.open(anchor) as tr:  # the events as the otf2 package sees them
        classes = sorted(tuple(m.name for m in c.members) for c in tr.definitions.metrics)
        n_metric = sum(type(ev).__name__ == "Metric" for _, ev in tr.events)
    assert classes == [("a",), ("a", "b"), ("b",)] and n_metric == 3


def test_writer_rejects_invalid_traces(tmp_path):
    from perflow.errors import TraceError

    raw = small_raw()
    raw.region_events["time"][1] = 0.0  # time goes backwards on location 0
    with pytest.raises(TraceError, match="time goes backwards"):
        write_otf2(raw, tmp_path / "bad")
    with pytest.raises(ValueError, match="timer_resolution must be positive"):
        write_otf2(small_raw(), tmp_path / "bad2", timer_resolution=0)
