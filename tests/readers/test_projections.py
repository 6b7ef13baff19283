"""Charm++ Projections reader on two real traces (tests/data/projections, from Pipit's tests; see the README).

pingpong: charm++ benchmarks/pingpong on 2 PEs (Charm++ 7.0, mpi-linux-x86_64). hello: the 1D-array hello
example on 2 PEs (multicore build), with a user event pair. The numbers below were summed from the log
records by hand (awk over BEGIN/END_PROCESSING and BEGIN/END_IDLE lines; times in microseconds).
"""

from __future__ import annotations

import gzip
import random
import shutil
from pathlib import Path

import numpy as np
import pytest

import perflow
from perflow.errors import FormatError
from perflow.flow.registry import get_pass
from perflow.readers import detect_format
from tests.readers.helpers import check_times, read_damaged

DATA = Path(__file__).resolve().parents[1] / "data" / "projections"
PINGPONG = DATA / "pingpong"
HELLO = DATA / "hello"


def run(name: str, *args, **kw):  # type: ignore[no-untyped-def]
    return get_pass(name).func(*args, **kw)


@pytest.fixture(scope="module")
def pp() -> perflow.PAG:
    return perflow.read(PINGPONG)


def cell(pag: perflow.PAG, name: str, pe: int, metric: str) -> float:
    v = [i for i, n in enumerate(pag.vertex_table["name"].astype(str)) if n == name]
    m = pag.metrics
    return float(sum(m.loc[(i, pe, 0), metric] for i in v if (i, pe, 0) in m.index))


def test_detection() -> None:
    assert detect_format(PINGPONG) == "projections"
    assert detect_format(HELLO / "hello.sts") == "projections"


def test_pes_are_processes(pp: perflow.PAG) -> None:
    assert pp.attrs["format"] == "projections" and pp.attrs["pes"] == 2
    assert pp.attrs["creator"] == "Charm++ Projections 11.0"
    assert pp.trace.locations[["process", "name"]].values.tolist() == [[0, "PE 0"], [1, "PE 1"]]
    check_times(pp)


def test_entry_method_and_idle_times(pp: perflow.PAG) -> None:
    trecv = "Ping1::trecv(PingMsg* impl_msg)"
    assert cell(pp, trecv, 0, "visits") == 60
    assert cell(pp, trecv, 0, "time_inc") == pytest.approx(111e-6)
    assert cell(pp, "Ping1::recv(PingMsg* impl_msg)", 0, "time_inc") == pytest.approx(61e-6)  # END - BEGIN
    assert cell(pp, "Ping1::recv(PingMsg* impl_msg)", 1, "visits") == 20
    assert cell(pp, "Idle", 0, "time_exc") == pytest.approx(618e-6) and cell(pp, "Idle", 0, "visits") == 72
    assert cell(pp, "Idle", 1, "time_exc") == pytest.approx(1426e-6) and cell(pp, "Idle", 1, "visits") == 108
    b = run("breakdown", pp, by="process", wide=True).set_index("process")
    # idle regions are the idle category, less what waited for a message (the wait category)
    np.testing.assert_allclose((b["idle"] + b["wait"]).to_numpy(), [618e-6, 1426e-6])


def test_messages(pp: perflow.PAG) -> None:
    m = pp.trace.messages
    assert len(m) == 221 and pp.attrs["unmatched_processing"] == 86
    assert pp.attrs["unmatched_sends"] == 0 and pp.attrs["clock_violations"] == 0
    # PE 0 creates event 47 for Ping1::recv at 82099 us (192 bytes); PE 1 begins processing it at 82103,
    # its Idle having ended then: the receive is in that Idle instance
    row = m[(np.isclose(m["send_time"], 82099e-6)) & (m["recv_process"] == 1)].iloc[0]
    assert (row["send_process"], row["bytes"]) == (0, 192)
    assert row["recv_time"] == pytest.approx(82103e-6)
    names = pp.vertex_table["name"].astype(str).to_numpy()
    iv = pp.trace.intervals
    assert names[iv["vertex"].iat[row["recv_interval"]]] == "Idle"
    assert names[iv["vertex"].iat[row["send_interval"]]] == "message send"
    assert iv["leave"].iat[row["recv_interval"]] == pytest.approx(82103e-6)


def test_trace_passes(pp: perflow.PAG, tmp_path: Path) -> None:
    ws = run("wait_states", pp)
    assert (ws["kind"] == "late_sender").sum() > 50
    cp = run("critical_path", pp)
    assert cp["summary"]["processes_on_path"].iat[0] == 2
    run("plot_timeline", pp, ws, cp["segments"], messages=True, path=str(tmp_path / "t.png"))
    assert (tmp_path / "t.png").stat().st_size > 0


def test_hello_user_event_pair() -> None:
    pag = perflow.read(HELLO)
    # BEGIN_USER_EVENT_PAIR at 1605, END at 1767 on PE 0; EVENT 1 is "For Bracket Events"
    assert cell(pag, "For Bracket Events", 0, "time_inc") == pytest.approx(162e-6)
    assert cell(pag, "Hello::SayHi(int hiNo)", 0, "visits") == 3
    assert cell(pag, "Hello::SayHi(int hiNo)", 1, "time_inc") == pytest.approx(30e-6)
    assert cell(pag, "Idle", 1, "time_exc") == pytest.approx(346e-6)


def _copy(tmp_path: Path) -> Path:
    d = tmp_path / "pp"
    shutil.copytree(PINGPONG, d)
    return d


def _edit_log(d: Path, pe: int, fn) -> None:  # type: ignore[no-untyped-def]
    f = d / f"pingpong.prj.{pe}.log.gz"
    lines = gzip.decompress(f.read_bytes()).decode().splitlines()
    f.write_bytes(gzip.compress(("\n".join(fn(lines)) + "\n").encode()))


def test_errors(tmp_path: Path) -> None:
    d = _copy(tmp_path)
    (d / "pingpong.prj.1.log.gz").unlink()
    with pytest.raises(FormatError, match=r"names 2 PEs but the log of PE 1 \(pingpong.prj.1.log.gz\) is missing"):
        perflow.read_projections(d)
    d = _copy(tmp_path / "b")
    _edit_log(d, 0, lambda ls: [*ls[:5], "57 1 2 3", *ls[5:]])
    with pytest.raises(FormatError, match=r"pingpong.prj.0.log.gz.*line 6.*unknown record type 57"):
        perflow.read_projections(d)
    d = _copy(tmp_path / "c")
    _edit_log(d, 1, lambda ls: [*ls[:3], "2 4 151", *ls[3:]])
    with pytest.raises(FormatError, match=r"pingpong.prj.1.log.gz.*line 4.*record type 2 has 2 fields"):
        perflow.read_projections(d)
    d = _copy(tmp_path / "d")
    _edit_log(d, 1, lambda ls: [*ls[:3], "2 4 999 80000 1 0 64 0 0 1", *ls[3:]])
    with pytest.raises(FormatError, match=r"line 4.*entry method 999 is not defined"):
        perflow.read_projections(d)
    with pytest.raises(FormatError, match="no Projections .sts file"):
        perflow.read_projections(tmp_path)


@pytest.mark.timeout(120)
def test_fuzz(tmp_path: Path) -> None:
    rng = random.Random(9)
    outcomes = {"pag": 0, "error": 0}
    for i in range(30):
        d = _copy(tmp_path / f"f{i}")
        pe = rng.randrange(2)
        f = d / f"pingpong.prj.{pe}.log.gz"
        if i < 8:  # a cut gzip stream
            data = f.read_bytes()
            f.write_bytes(data[: rng.randrange(10, len(data))])
        else:

            def damage(ls: list[str]) -> list[str]:
                for _ in range(rng.randint(1, 5)):
                    j = rng.randrange(1, len(ls))
                    tok = ls[j].split()
                    if rng.random() < 0.5 and tok:
                        tok[rng.randrange(len(tok))] = rng.choice(["-1", "0", "x", "99999999", "3"])
                        ls[j] = " ".join(tok)
                    else:
                        del ls[j]
                return ls

            _edit_log(d, pe, damage)
        read_damaged(perflow.read_projections, d, outcomes, times=True)
    assert outcomes["error"] >= 8 and outcomes["pag"] >= 3


def test_perflow_info_summarises_the_pes(capsys: pytest.CaptureFixture[str]) -> None:
    from perflow.cli.main import main

    assert main(["info", str(PINGPONG)]) == 0
    out = capsys.readouterr().out
    assert "(projections)" in out and "processes   2   threads/process 1" in out
    assert "221 messages" in out
    assert "Idle" in out and "Ping1::trecv(PingMsg* impl_msg)" in out
    assert "gpu  " not in out  # no GPU streams: no GPU line
