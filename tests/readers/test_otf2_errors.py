"""Bad OTF2 input: one FormatError naming the file, never a crash, a hang or a raw traceback."""

from __future__ import annotations

import ctypes
import os
import random
import shutil
from pathlib import Path

import numpy as np
import pytest

from perflow.errors import FormatError
from perflow.readers.otf2 import decode

from .conftest import small_raw

ENGINES = ["fast", "bindings"]
pytestmark = pytest.mark.timeout(60)


def copy_archive(src: Path, dst: Path) -> Path:
    """A writable copy of an archive directory (the shared samples are read-only)."""
    shutil.copytree(src, dst)
    for p in [dst, *dst.rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    return dst


@pytest.fixture
def pingpong(otf2_sample, tmp_path):
    return copy_archive(otf2_sample("ping-pong"), tmp_path / "pp")


@pytest.mark.parametrize("engine", ENGINES)
def test_missing_paths(tmp_path, engine):
    with pytest.raises(FormatError, match=r"nope.*no such file or directory"):
        decode(tmp_path / "nope" / "traces.otf2", decoder=engine)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FormatError, match=r"empty: directory holds no OTF2 anchor file"):
        decode(tmp_path / "empty", decoder=engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_not_an_anchor(tmp_path, engine):
    (tmp_path / "e.otf2").write_bytes(b"")
    with pytest.raises(FormatError, match=r"e\.otf2: empty file"):
        decode(tmp_path / "e.otf2", decoder=engine)
    (tmp_path / "t.otf2").write_text("this is not a trace\n")
    with pytest.raises(FormatError, match=r"t\.otf2 \(offset 0\): not an OTF2 anchor file"):
        decode(tmp_path / "t.otf2", decoder=engine)
    (tmp_path / "two").mkdir()
    (tmp_path / "two" / "a.otf2").write_bytes(b"x")
    (tmp_path / "two" / "b.otf2").write_bytes(b"x")
    with pytest.raises(FormatError, match="several OTF2 anchor files"):
        decode(tmp_path / "two", decoder=engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_truncated_anchor(pingpong, engine):
    a = pingpong / "traces.otf2"
    a.write_bytes(a.read_bytes()[:100])
    with pytest.raises(FormatError, match=r"traces\.otf2: cannot read the OTF2 anchor file: .*anchor file"):
        decode(pingpong, decoder=engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_global_definitions_missing_or_truncated(pingpong, engine):
    d = pingpong / "traces.def"
    d.write_bytes(d.read_bytes()[:3000])
    with pytest.raises(FormatError, match=r"traces\.def: cannot read the OTF2 definitions: Invalid or inconsistent"):
        decode(pingpong, decoder=engine)
    d.write_bytes(b"")
    with pytest.raises(FormatError, match=r"traces\.def: global definitions file is empty"):
        decode(pingpong, decoder=engine)
    d.unlink()
    with pytest.raises(FormatError, match=r"traces\.def: global definitions file of the archive is missing"):
        decode(pingpong, decoder=engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_event_file_missing(pingpong, engine):
    (pingpong / "traces" / "1.evt").unlink()
    with pytest.raises(FormatError, match=r"traces/1\.evt: event file of location 1 is missing"):
        decode(pingpong, decoder=engine)


def test_event_file_truncated_or_garbage(pingpong):
    e = pingpong / "traces" / "1.evt"
    data = e.read_bytes()
    e.write_bytes(data[:300])
    with pytest.raises(FormatError, match=r"traces/1\.evt: corrupt event data: Invalid or inconsistent record data"):
        decode(pingpong, decoder="fast")
    with pytest.raises(FormatError, match=r"traces/\*\.evt: cannot decode the events: Invalid or inconsistent"):
        decode(pingpong, decoder="bindings")
    e.write_bytes(b"")
    with pytest.raises(FormatError, match=r"traces/1\.evt: cannot open the event file"):
        decode(pingpong, decoder="fast")
    e.write_bytes(bytes(random.Random(1).randrange(256) for _ in range(len(data))))
    with pytest.raises(FormatError, match=r"traces/1\.evt: cannot open the event file"):
        decode(pingpong, decoder="fast", jobs=0)


def test_local_definitions_truncated(pingpong):
    d = pingpong / "traces" / "1.def"
    d.write_bytes(d.read_bytes()[:40])
    with pytest.raises(FormatError, match=r"traces/1\.def: corrupt local definitions"):
        decode(pingpong, decoder="fast")


def test_undefined_region_in_events(tmp_path, monkeypatch):
    """An event naming a region the definitions lack: both decoders refuse it."""
    from perflow.trace.raw import RawTrace
    from perflow.writers.otf2 import write_otf2

    raw = small_raw()
    raw.regions = raw.regions.iloc[:-1]  # drop the last region definition; "work" is still entered
    monkeypatch.setattr(RawTrace, "validate", lambda self: None)  # let the writer write the broken trace
    anchor = write_otf2(raw, tmp_path / "t")
    monkeypatch.undo()
    with pytest.raises(FormatError, match=r"traces/\d\.evt \(event \d+\): undefined region 9"):
        decode(anchor, decoder="fast")
    with pytest.raises(FormatError, match="cannot decode the events"):
        decode(anchor, decoder="bindings")


@pytest.mark.parametrize("small", [True, False])
def test_worker_crash_becomes_format_error(pingpong, monkeypatch, small):
    """A worker killed by a signal inside the C library -> FormatError, and the caller lives on."""
    import perflow.readers.otf2._decode as d
    import perflow.readers.otf2._workers as w

    def crashing_worker(*args):
        import faulthandler

        faulthandler.disable()  # no fault report from the child on the test's stderr
        ctypes.string_at(0)  # segmentation fault in the worker process

    monkeypatch.setattr(w, "_worker", crashing_worker)
    if small:  # the whole decode of a small trace runs in one child
        msg = r"traces\.otf2: the OTF2 library crashed while reading the archive \(killed by signal 11"
    else:
        monkeypatch.setattr(d, "SMALL_TRACE_BYTES", 0)
        msg = r"traces\.otf2: the OTF2 library crashed reading one of the event files 0\.evt, 1\.evt \(killed by signal"
    with pytest.raises(FormatError, match=msg):
        decode(pingpong, decoder="fast", jobs=1)
    monkeypatch.undo()
    assert decode(pingpong, decoder="fast", jobs=1).n_events == 120  # ProgramBegin/End are region events


def test_hung_worker_is_killed(pingpong, monkeypatch):
    import time

    import perflow.readers.otf2._decode as d
    import perflow.readers.otf2._workers as w

    def hanging_worker(*args):
        time.sleep(60)

    monkeypatch.setattr(w, "_worker", hanging_worker)
    monkeypatch.setattr(w, "WATCHDOG_SECONDS", 1.0)
    monkeypatch.setattr(d, "SMALL_TRACE_BYTES", 0)
    t = time.monotonic()
    # the behaviour, not the phase: on a busy machine the 1 s watchdog may already fire while the
    # definitions are read ("reading the archive ..."), before the hung event-file worker
    with pytest.raises(FormatError, match=r"did not finish in time"):
        decode(pingpong, decoder="fast", jobs=1)
    assert time.monotonic() - t < 30


def _stuck_on_location_1(anchor, arena, worker, *rest):
    """A worker that reads 5 records of location 1, then spins (as the C library does on some damage)."""
    arena.progress[worker] = (1, 5)
    while True:
        pass


def _growing_on_location_1(anchor, arena, worker, *rest):
    """A worker whose memory grows while it reads location 1, records still arriving."""
    import time

    held = []
    for i in range(10_000):
        arena.progress[worker] = (1, i)
        held.append(np.ones(1 << 20, dtype=np.uint8))  # 1 MB more each time
        time.sleep(0.01)


@pytest.mark.parametrize(
    ("worker", "msg"),
    [
        (
            _stuck_on_location_1,
            r"spent [\d.]+ CPU seconds without progress reading this event file \(location 1, after 5 event",
        ),
        (_growing_on_location_1, r"used \d+ MB of memory reading this event file"),
    ],
)
def test_stuck_worker_is_stopped_naming_its_event_file(pingpong, monkeypatch, worker, msg):
    """The watchdog: a worker making no progress (CPU time without a batch done), or growing its private
    memory, is killed within seconds, and the error names the event file it was reading."""
    import time

    import perflow.readers.otf2._decode as d
    import perflow.readers.otf2._workers as w

    monkeypatch.setattr(w, "_worker", worker)
    monkeypatch.setattr(w, "STALL_CPU_SECONDS", 0.5)
    monkeypatch.setattr(w, "MAX_PRIVATE_GROWTH", 64 << 20)
    monkeypatch.setattr(d, "SMALL_TRACE_BYTES", 0)
    t = time.monotonic()
    with pytest.raises(FormatError, match=r"pp/traces/1\.evt: the OTF2 library " + msg):
        decode(pingpong, decoder="fast", jobs=1)
    assert time.monotonic() - t < 30


@pytest.fixture(scope="module")
def two_chunks(tmp_path_factory):
    """A 2-process trace whose event files span two OTF2 chunks (1 MB each)."""
    from perflow import synthetic
    from perflow.writers.otf2 import write_otf2

    raw = synthetic.raw_trace(nprocs=2, iterations=8000, seed=1)
    return Path(write_otf2(raw, tmp_path_factory.mktemp("chunks") / "t")).parent


@pytest.mark.parametrize("frac", [0.5, 0.8])
def test_truncated_event_file_is_named(two_chunks, tmp_path, frac):
    """Cut inside its second chunk, an event file makes the C library return its damaged chunk again and again
    (a 20 M-event trace grew to 23.5 GB, and the error named other files): now the records read from a file
    are bounded by its size, and the error names it."""
    d = copy_archive(two_chunks, tmp_path / "t")
    f = d / "traces" / "1.evt"
    assert f.stat().st_size > 1.2 * (1 << 20)  # two chunks
    os.truncate(f, int(f.stat().st_size * frac))
    # the bound on records, the decoder's own check, or (on a loaded machine, first) the watchdog: each names 1.evt
    msg = (
        r"t/traces/1\.evt: (the OTF2 library returned [\d,]+ event records from this [\d,]+-byte file|corrupt event"
        r"|the OTF2 library .+: the file is truncated or corrupt)"
    )
    with pytest.raises(FormatError, match=msg):
        decode(d, decoder="fast")


def test_write_refuses_existing_archive(small_trace):
    from perflow.writers.otf2 import write_otf2

    raw, anchor = small_trace
    with pytest.raises(FileExistsError, match="already exists"):
        write_otf2(raw, anchor.parent)
    assert np.isclose(decode(anchor).region_events["time"][0], 1.0)


@pytest.mark.parametrize("engine", ENGINES)
def test_location_without_events_may_lack_its_file(tmp_path, engine):
    """A location declaring no events needs no event file; one declaring events does."""
    import pandas as pd

    from perflow.writers.otf2 import write_otf2

    from .conftest import raw_from_streams

    locations = pd.DataFrame({"process": [0, 1], "thread": [0, 0], "name": ["a", "idle"], "type": "cpu"})
    raw = raw_from_streams(
        [[("enter", 0.0, 0), ("leave", 1.0, 0)], []], locations, regions=pd.DataFrame({"name": ["r"]})
    )
    anchor = Path(write_otf2(raw, tmp_path / "t"))
    (anchor.parent / "traces" / "1.evt").unlink()
    got = decode(anchor, decoder=engine)
    assert got.region_events["location"].tolist() == [0, 0] and len(got.locations) == 2
    (anchor.parent / "traces" / "0.evt").unlink()
    with pytest.raises(FormatError, match=r"traces/0\.evt: event file of location 0 is missing \(2 events declared\)"):
        decode(anchor, decoder=engine)
