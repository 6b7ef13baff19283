"""CUBE4 reader on the shared Score-P cpi profile, re-encoded variants and mutated copies."""

from __future__ import annotations

import io
import random
import struct
import tarfile
import zlib
from pathlib import Path

import numpy as np
import pytest

import perflow
from perflow.errors import FormatError
from tests.conftest import shared
from tests.readers.helpers import check_times, read_damaged, value


@pytest.fixture(scope="module")
def cpi() -> perflow.PAG:
    return perflow.read(shared("cube", "scorep-cpi", "profile.cubex"))


def _members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as tf:
        return {m.name: tf.extractfile(m).read() for m in tf if m.isfile()}


def _pack(members: dict[str, bytes], out: Path) -> Path:
    with tarfile.open(out, "w") as tf:
        for name, data in members.items():
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    return out


def test_shape(cpi: perflow.PAG) -> None:
    assert cpi.attrs["format"] == "cube"
    # README: 10 call-tree nodes, 4 locations. (The sampled MPI_Bcast wrapper cnode is merged into
    # its instrumented sibling MPI_Bcast; merge_siblings=False keeps all 11 cnodes.)
    assert cpi.n_vertices == 10
    assert len(cpi.locations) == 4
    assert list(cpi.processes) == [0, 1, 2, 3]
    assert {"time_inc", "time_exc", "visits", "bytes_sent", "bytes_recv", "min_time", "max_time"} <= set(
        cpi.metric_names
    )
    assert cpi.metric_info["time_inc"].unit == "s"
    assert cpi.metric_info["bytes_sent"].unit == "bytes"
    assert cpi.attrs["creator"] == "Score-P 7.1"
    assert perflow.read(shared("cube", "scorep-cpi", "profile.cubex"), merge_siblings=False).n_vertices == 11
    it = cpi.vertex("cpi/main/iteration")
    assert it.file.endswith("cpi.c") and it.line == 20
    assert cpi.vertex("cpi/main/MPI_Init").kind == "mpi"


def test_hand_checked(cpi: perflow.PAG) -> None:
    # 1.data (time, INCLUSIVE; rows in "children first" order: cpi, main, MPI_Init, MPI_Comm_size,
    # MPI_Comm_rank, iteration, iteration.cold.1, MPI_Finalize, MPI_Bcast, MPI_Reduce, sampled MPI_Bcast);
    # row 5 (iteration), location 0: 4.53914232 s; 0.data (visits, EXCLUSIVE, pre-order) row 5: 100082.
    assert value(cpi, "cpi/main/iteration", "time_inc", 0) == pytest.approx(4.53914232, rel=1e-8)
    assert value(cpi, "cpi/main/iteration", "visits", 0) == 100082
    # MPI_Init on rank 0: 0.506503952 s, a leaf: exclusive = inclusive
    assert value(cpi, "cpi/main/MPI_Init", "time_exc", 0) == pytest.approx(0.506503952, rel=1e-8)
    assert value(cpi, "cpi/main/MPI_Finalize", "visits", 2) == 1
    # 9.data (bytes_sent, index lists pre-order positions 6 and 7: MPI_Bcast, MPI_Reduce):
    # first value 0x0c3500 = 800000 bytes on location 0, then zeros
    assert value(cpi, "cpi/main/iteration/MPI_Bcast", "bytes_sent", 0) == 800000
    assert value(cpi, "cpi/main/iteration/MPI_Reduce", "bytes_sent", 1) == 400000


def test_consistent_times(cpi: perflow.PAG) -> None:
    check_times(cpi)


def test_compressed_and_dense_encodings(tmp_path: Path, cpi: perflow.PAG) -> None:
    mem = _members(shared("cube", "scorep-cpi", "profile.cubex"))
    # 1.data as ZCUBEX.DATA: one zlib segment per cnode (4 doubles each)
    body = mem["1.data"][10:]
    segs = [zlib.compress(body[i : i + 32]) for i in range(0, len(body), 32)]
    hdr = b"".join(struct.pack("<III", 32 * k, 0, len(s)) for k, s in enumerate(segs))
    mem["1.data"] = b"ZCUBEX.DATA" + struct.pack("<I", len(segs)) + hdr + b"".join(segs)
    # 0.index as a dense index (type 0): values for every cnode in order
    mem["0.index"] = b"CUBEX.INDEX" + struct.pack("<iH", 1, 0) + b"\x00"
    pag = perflow.read(_pack(mem, tmp_path / "z.cubex"))
    np.testing.assert_allclose(pag.metrics["time_inc"], cpi.metrics["time_inc"])
    np.testing.assert_allclose(pag.metrics["visits"], cpi.metrics["visits"])


def test_detection_by_content(tmp_path: Path) -> None:
    mem = _members(shared("cube", "scorep-cpi", "profile.cubex"))
    f = _pack(
        {"anchor.xml": mem["anchor.xml"], **{k: v for k, v in mem.items() if k != "anchor.xml"}}, tmp_path / "x.tar"
    )
    assert perflow.readers.detect_format(f) == "cube"


def test_errors(tmp_path: Path) -> None:
    mem = _members(shared("cube", "scorep-cpi", "profile.cubex"))
    f = tmp_path / "e.cubex"
    f.write_bytes(b"")
    with pytest.raises(FormatError, match=r"e\.cubex: empty file"):
        perflow.read(f)
    f.write_bytes(b"hello world" * 100)
    with pytest.raises(FormatError, match="not a readable CUBE4 archive"):
        perflow.read(f)
    _pack({k: v for k, v in mem.items() if k != "anchor.xml"}, f)
    with pytest.raises(FormatError, match="has no anchor.xml"):
        perflow.read(f)
    _pack({**mem, "1.data": mem["1.data"][:100]}, f)
    with pytest.raises(FormatError, match=r"1\.data: holds 90 bytes of values, expected 352 \(11 cnodes x 4 locations"):
        perflow.read(f)
    _pack({**mem, "9.index": b"CUBEX.INDEX" + struct.pack("<iHBI", 1, 0, 1, 1000)}, f)
    with pytest.raises(FormatError, match=r"9\.index: announces 1000 cnode ids but holds 0"):
        perflow.read(f)
    _pack({**mem, "anchor.xml": mem["anchor.xml"][:5000]}, f)
    with pytest.raises(FormatError, match="anchor.xml is not well-formed XML"):
        perflow.read(f)


def test_damaged_values_are_rejected(tmp_path: Path) -> None:
    mem = _members(shared("cube", "scorep-cpi", "profile.cubex"))
    f = tmp_path / "v.cubex"
    # 1.data (time, double): stored row 5 (iteration), location 0 becomes NaN
    data = bytearray(mem["1.data"])
    struct.pack_into("<d", data, 10 + 8 * (5 * 4 + 0), float("nan"))
    _pack({**mem, "1.data": bytes(data)}, f)
    with pytest.raises(
        FormatError, match=r"v\.cubex.*metric 'time': value nan at stored cnode row 5, location 0 is not finite"
    ):
        perflow.read(f)
    # 0.data (visits, uint64): a count no double holds exactly (a flipped high bit)
    data = bytearray(mem["0.data"])
    struct.pack_into("<Q", data, 10 + 8 * (2 * 4 + 3), 1 << 60)
    _pack({**mem, "0.data": bytes(data)}, f)
    with pytest.raises(
        FormatError, match=r"metric 'visits': .* at stored cnode row 2, location 3 is not a visit count"
    ):
        perflow.read(f)
    # the error names the damaged member
    with pytest.raises(FormatError) as err:
        perflow.read(f)
    assert "0.data" in str(err.value)


@pytest.mark.timeout(60)
def test_fuzz(tmp_path: Path) -> None:
    src = shared("cube", "scorep-cpi", "profile.cubex")
    raw = src.read_bytes()
    mem = _members(src)
    rng = random.Random(7)
    outcomes = {"pag": 0, "error": 0}

    def attempt(p: Path) -> None:
        read_damaged(perflow.read_cube, p, outcomes)

    for i in range(12):  # truncated archives
        p = tmp_path / f"t{i}.cubex"
        p.write_bytes(raw[: rng.randrange(1, len(raw))])
        attempt(p)
    names = [n for n in mem if n.endswith((".index", ".data"))] + ["anchor.xml"] * 4
    for i in range(30):  # members with flipped bytes or cut short
        name = rng.choice(names)
        data = bytearray(mem[name])
        if rng.random() < 0.3:
            data = data[: rng.randrange(0, len(data))]
        else:
            for _ in range(rng.randint(1, 8)):
                if data:
                    data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        attempt(_pack({**mem, name: bytes(data)}, tmp_path / f"m{i}.cubex"))
    assert outcomes["error"] >= 10
