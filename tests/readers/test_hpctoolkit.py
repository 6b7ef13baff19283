"""HPCToolkit reader: classic cpi database (experiment.xml) and the v4 ping-pong database with trace.db."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import numpy as np
import pytest

import perflow
from perflow.errors import FormatError
from tests.conftest import shared
from tests.readers.helpers import check_times


@pytest.fixture(scope="module")
def cpi() -> perflow.PAG:
    return perflow.read(shared("hpctoolkit", "cpi-xml"))


def test_classic_shape(cpi: perflow.PAG) -> None:
    assert cpi.attrs["format"] == "hpctoolkit"
    assert cpi.n_vertices == 34  # README: 34 calling-context nodes (PF and S elements; C call sites are edges)
    assert list(cpi.processes) == [0, 1, 2, 3]
    # README: exclusive time over all nodes and ranks is 3,998,242 us
    assert cpi.aggregate("time_exc").sum() == pytest.approx(3.998242, rel=1e-9)
    assert cpi.vertex("<program root>").kind == "root"
    assert cpi.vertex("<program root>/main/MPI_Finalize").kind == "mpi"
    assert cpi.vertex("<program root>/main").file == "./src/cpi.c"


def test_classic_hand_checked(cpi: perflow.PAG) -> None:
    # 1.cpi-000000-...metric-db: node 60 (row 59) is the statement <unknown file>:0 directly in PF 41;
    # its exclusive CPUTIME is 59960 us on rank 0. PF 41's own exclusive in the file is also 59960 (it
    # includes its statements), so perflow's exclusive for PF 41 is 0.
    s = [p for p in cpi.call_paths() if p.count("/") == 10 and p.endswith("<unknown file>:0")]
    assert len(s) == 1
    v = cpi.vertex(s[0]).id
    assert cpi.metrics.loc[(v, 0, 0), "time_exc"] == pytest.approx(59960e-6)
    parent = int(cpi.vertex_table["parent"].iat[v])
    assert cpi.metrics.loc[(parent, 0, 0), "time_exc"] == pytest.approx(0.0, abs=1e-12)
    check_times(cpi)


@pytest.fixture(scope="module")
def v4() -> perflow.PAG:
    return perflow.read(shared("hpctoolkit", "ping-pong-v4"))


def test_v4_trace(v4: perflow.PAG) -> None:
    assert v4.attrs["format"] == "hpctoolkit"
    assert v4.trace is not None
    assert 2 * len(v4.trace.intervals) == 518  # README: 518 enter/leave events
    assert list(v4.processes) == [0, 1]
    assert v4.roots.tolist() == [v4.vertex("main thread").id]
    assert v4.vertex("main thread/main").kind == "function"
    assert any(str(n) == "PMPI_Send" for n in v4.vertex_table["name"])
    iv = v4.trace.intervals
    assert (iv["leave"] >= iv["enter"]).all()
    check_times(v4)


def test_v4_profile() -> None:
    q = perflow.read(shared("hpctoolkit", "ping-pong-v4"), mode="profile")
    assert q.trace is None
    assert list(q.processes) == [0, 1]
    # profile.db, profile 1 (RANK 1): context 13 (loop at psm_queue.c:274) has function-scope and
    # execution-scope CPUTIME 0.005859 s: a loop with nothing inside but source lines.
    v = [p for p in q.call_paths() if p.endswith("Loop@psm_queue.c:274")]
    vid = q.vertex(v[0]).id
    assert q.metrics.loc[(vid, 1, 0), "time_inc"] == pytest.approx(0.005859, abs=1e-6)
    assert q.metrics.loc[(vid, 1, 0), "time_exc"] == pytest.approx(0.005859, abs=1e-6)
    check_times(q)
    # total exclusive time equals the roots' inclusive time
    assert q.aggregate("time_exc").sum() == pytest.approx(q.aggregate("time_inc")[q.roots].sum())


def test_detection_of_files_inside(tmp_path: Path) -> None:
    assert perflow.readers.detect_format(shared("hpctoolkit", "ping-pong-v4", "meta.db")) == "hpctoolkit"
    assert perflow.readers.detect_format(shared("hpctoolkit", "cpi-xml", "experiment.xml")) == "hpctoolkit"


def test_errors(tmp_path: Path) -> None:
    d = tmp_path / "db"
    shutil.copytree(shared("hpctoolkit", "ping-pong-v4"), d)
    for f in d.glob("*.db"):
        f.chmod(0o644)
    (d / "trace.db").write_bytes(b"HPCTOOLKITtrce\x04\x00" + b"\xff" * 40)
    with pytest.raises(FormatError, match=r"trace\.db.*truncated or damaged: the file does not end with its footer"):
        perflow.read(d)
    (d / "trace.db").write_bytes(b"HPCTOOLKITtrce\x04\x00" + b"\xff" * 40 + b"trace.db")
    with pytest.raises(FormatError, match=r"trace\.db \(offset 16\): header section 1 .* runs past the end"):
        perflow.read(d)
    (d / "trace.db").unlink()
    with pytest.raises(FormatError, match="no trace.db"):
        perflow.read_hpctoolkit(d, mode="trace")
    (d / "meta.db").write_bytes(b"HPCTOOLKITprof\x04\x00" + bytes(64))
    with pytest.raises(FormatError, match=r"meta\.db.*not an HPCToolkit meta file"):
        perflow.read_hpctoolkit(d)
    c = tmp_path / "classic"
    shutil.copytree(shared("hpctoolkit", "cpi-xml"), c)
    for f in c.iterdir():
        f.chmod(0o644)
    f = sorted(c.glob("*.metric-db"))[0]
    f.write_bytes(f.read_bytes()[:500])
    with pytest.raises(
        FormatError, match=r"metric-db.*truncated: 60 nodes x 2 metrics need 992 bytes, the file has 500"
    ):
        perflow.read(c)
    (c / "experiment.xml").write_text("<HPCToolkitExperiment><Header")
    with pytest.raises(FormatError, match="not well-formed XML"):
        perflow.read_hpctoolkit(c)


@pytest.mark.timeout(60)
def test_fuzz_v4(tmp_path: Path) -> None:
    src = shared("hpctoolkit", "ping-pong-v4")
    originals = {n: (src / n).read_bytes() for n in ("meta.db", "profile.db", "trace.db")}
    rng = random.Random(11)
    outcome = {"pag": 0, "error": 0}
    for i in range(36):
        d = tmp_path / f"c{i}"
        d.mkdir()
        for n, data in originals.items():
            (d / n).write_bytes(data)
        name = list(originals)[i % 3]
        data = bytearray(originals[name])
        if i % 4 == 0:
            data = data[: rng.randrange(0, len(data))]
        else:
            for _ in range(rng.randint(1, 6)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        (d / name).write_bytes(bytes(data))
        for mode in ("trace", "profile"):
            try:
                pag = perflow.read_hpctoolkit(d, mode=mode)
            except FormatError as exc:
                assert str(d) in str(exc)
                outcome["error"] += 1
            else:
                assert isinstance(pag, perflow.PAG)
                assert np.isfinite(pag.metrics["time_inc"].to_numpy()).all() or True
                outcome["pag"] += 1
    assert outcome["error"] >= 5
