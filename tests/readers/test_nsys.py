"""Nsight Systems SQLite reader on two real exports (tests/data/nsys, see its README): facts checked by hand.

saxpy-mpi-cuda.sqlite (nsys 2022.2, rank 0 of an MPI+CUDA saxpy on an A100; Pipit's test data): 5 kernels,
10 host-to-device and 5 device-to-host copies of 262,144,000 bytes, NVTX ranges (saxpy, MPI calls).
cloverleaf-cuda.sqlite (nsys 2024.5, CloverLeaf CUDA on an A100, cut to its first 100 kernels): launch,
cudaDeviceSynchronize, launch, ... on stream 7, OS runtime calls on three threads.
The numbers below were read off the SQLite tables (start/end in ns).
"""

from __future__ import annotations

import random
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

import perflow
from perflow.errors import FormatError
from perflow.flow.registry import get_pass
from perflow.kinds import GPU_IDLE
from perflow.readers import detect_format, reader_module
from tests.readers.helpers import check_times, read_damaged

DATA = Path(__file__).resolve().parents[1] / "data" / "nsys"
SAXPY = DATA / "saxpy-mpi-cuda.sqlite"
CLOVER = DATA / "cloverleaf-cuda.sqlite"
KERNEL = "saxpy(double *, double *, double *, double, int)"


def run(name: str, *args, **kw):  # type: ignore[no-untyped-def]
    return get_pass(name).func(*args, **kw)


@pytest.fixture(scope="module")
def saxpy() -> perflow.PAG:
    return perflow.read(SAXPY)


@pytest.fixture(scope="module")
def clover() -> perflow.PAG:
    return perflow.read(CLOVER)


def test_detected_by_content(tmp_path: Path) -> None:
    assert detect_format(SAXPY) == "nsys"
    renamed = tmp_path / "report.data"
    shutil.copyfile(SAXPY, renamed)
    assert detect_format(renamed) == "nsys"
    other = tmp_path / "other.sqlite"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE t(x)")
    con.close()
    assert not reader_module("nsys").detect(other)


def test_saxpy_locations_and_kernels(saxpy: perflow.PAG) -> None:
    assert saxpy.attrs["format"] == "nsys" and saxpy.attrs["creator"] == "Nsight Systems 2022.2.1.31"
    loc = saxpy.trace.locations
    assert loc[["thread", "name", "type"]].values.tolist() == [[0, "MPI Rank 0", "cpu"], [1, "GPU 0 stream 7", "gpu"]]
    assert saxpy.attrs["gpu_models"] == "0: NVIDIA A100-SXM4-40GB"
    # the kernel sits below the launch call inside the NVTX range "saxpy"
    k = saxpy.vertex(f"saxpy/cudaLaunchKernel/{KERNEL}").id
    assert saxpy.vertex_table["kind"].iat[k] == "gpu"
    m = saxpy.metrics.loc[(k, 0, 1)]
    assert m["visits"] == 5
    assert m["time_exc"] == pytest.approx(88_573_480e-9)  # the five kernels' end - start
    iv = saxpy.trace.intervals
    first = iv[iv["vertex"] == k].sort_values("enter").iloc[0]
    assert first["leave"] - first["enter"] == pytest.approx((942_626_994 - 924_922_186) * 1e-9)  # 17.704808 ms
    # times count from the first event (the NVTX range MPI_Init at 65,117,824 ns)
    assert saxpy.attrs["time_offset"] == pytest.approx(0.065117824)
    assert first["enter"] == pytest.approx((924_922_186 - 65_117_824) * 1e-9)
    check_times(saxpy)


def test_saxpy_copies_and_their_bytes(saxpy: perflow.PAG) -> None:
    h2d = saxpy.vertex("cudaMemcpy/[CUDA memcpy Host-to-Device]").id
    d2h = saxpy.vertex("cudaMemcpy/[CUDA memcpy Device-to-Host]").id
    m = saxpy.metrics
    assert m.loc[(h2d, 0, 1), "gpu_bytes"] == 10 * 262_144_000
    assert m.loc[(d2h, 0, 1), "gpu_bytes"] == 5 * 262_144_000
    assert m.loc[(h2d, 0, 1), "time_exc"] == pytest.approx(186_001_123e-9)
    assert m.loc[(d2h, 0, 1), "visits"] == 5


def test_saxpy_nvtx_ranges(saxpy: perflow.PAG) -> None:
    v = saxpy.vertex("saxpy").id
    iv = saxpy.trace.intervals
    rng = iv[(iv["vertex"] == v) & (iv["thread"] == 0)].sort_values("enter")
    assert len(rng) == 5
    assert rng["leave"].iat[0] - rng["enter"].iat[0] == pytest.approx((924_940_911 - 924_881_857) * 1e-9)
    assert saxpy.vertex_table["kind"].iat[saxpy.vertex("MPI_Send").id] == "mpi"
    assert saxpy.metrics.loc[(saxpy.vertex("MPI_Send").id, 0, 0), "visits"] == 10
    assert saxpy.metrics.loc[(saxpy.vertex("MPI_Recv").id, 0, 0), "visits"] == 5


def test_saxpy_launches_and_waits(saxpy: perflow.PAG) -> None:
    # 5 kernel launches and 15 copies are linked to their calls; the 5 device-to-host copies end inside
    # their cudaMemcpy (the host waited for them); the 10 host-to-device copies end after theirs returned
    assert saxpy.attrs["gpu_launches_linked"] == 20
    assert saxpy.attrs["gpu_waits_linked"] == 5 and saxpy.attrs["gpu_waits_unlinked"] == 10
    m = saxpy.trace.messages
    assert len(m) == 25 and saxpy.attrs["unmatched_sends"] == 0 and saxpy.attrs["clock_violations"] == 0


def test_cloverleaf_launch_sync_pattern(clover: perflow.PAG) -> None:
    assert clover.attrs["creator"] == "Nsight Systems 2024.5.1.113"
    assert clover.attrs["gpu_kernels"] == 100 and clover.attrs["gpu_copies"] == 36
    names = clover.trace.locations["name"].tolist()
    assert names == ["cuda-cloverleaf", "cuda-EvtHandlr", "cuda-EvtHandlr", "GPU 0 stream 7"]
    gpu = clover.metrics.xs(3, level="thread")
    cats = run("breakdown", clover, by="process", wide=True).iloc[0]
    assert cats["gpu"] == pytest.approx((18_399_790 + 790_589) * 1e-9)  # kernels + copies, end - start
    assert gpu["gpu_bytes"].sum() == 18_460_440  # the 36 copies' bytes
    # the first kernel (correlation 452) and the cudaDeviceSynchronize (453) that waits for it
    ws = run("wait_states", clover)
    first = ws[(ws["kind"] == "late_sender") & (ws["thread"] == 0)].sort_values("start").iloc[0]
    t0 = clover.attrs["time_offset"]
    assert first["start"] + t0 == pytest.approx(533_338_435e-9)
    assert first["end"] + t0 == pytest.approx(534_705_884e-9)  # the kernel's end
    assert first["cause_thread"] == 3


def test_cloverleaf_critical_path_runs_through_the_gpu(clover: perflow.PAG) -> None:
    from perflow.sdk.profile import categories

    cp = run("critical_path", clover)
    seg = cp["segments"]
    kern = seg[(seg["thread"] == 3) & (seg["vertex"] >= 0)]
    assert any("par_ranged2d_kernel" in n for n in clover.vertex_table["name"].astype(str).to_numpy()[kern["vertex"]])
    # the host waits for every kernel and copy it launches, so (nearly) all GPU time is on the path
    prof = cp["profile"][cp["profile"]["vertex"] >= 0]
    on_path = prof["cp_time"][categories(clover)[prof["vertex"]] == "gpu"].sum()
    busy = run("breakdown", clover, by="total", wide=True)["gpu"].iat[0]
    assert busy == pytest.approx((18_399_790 + 790_589) * 1e-9)
    assert 0.99 * busy < on_path <= busy * (1 + 1e-9)
    assert cp["summary"]["hops"].iat[0] > 200  # host -> GPU -> host for every launch and sync


def test_perflow_info_summarises_the_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    from perflow.cli.main import main

    assert main(["info", str(SAXPY)]) == 0
    out = capsys.readouterr().out
    assert "(nsys)" in out
    assert "gpu         1 stream on 1 device: 5 kernels, 15 copies" in out
    assert GPU_IDLE in out


def test_several_files_are_several_processes(tmp_path: Path) -> None:
    a, b = tmp_path / "r0.sqlite", tmp_path / "r1.sqlite"
    shutil.copyfile(SAXPY, a)
    shutil.copyfile(SAXPY, b)
    con = sqlite3.connect(b)  # rank 1, started 1 ms later
    con.execute("UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = utcEpochNs + 1000000")
    con.execute("UPDATE StringIds SET value = 'MPI Rank 1' WHERE value = 'MPI Rank 0'")
    con.commit()
    con.close()
    pag = perflow.read(tmp_path)
    assert pag.n_processes == 2 and pag.attrs["files"] == 2
    iv = pag.trace.intervals
    k = pag.vertex(f"saxpy/cudaLaunchKernel/{KERNEL}").id
    s0 = iv[(iv["vertex"] == k) & (iv["process"] == 0)]["enter"].min()
    s1 = iv[(iv["vertex"] == k) & (iv["process"] == 1)]["enter"].min()
    assert s1 - s0 == pytest.approx(1e-3)


def test_options() -> None:
    short = perflow.read(SAXPY, kernel_names="short", nvtx=False, osrt=False)
    assert "cudaLaunchKernel/saxpy" in set(short.call_paths())
    assert "saxpy/cudaLaunchKernel/saxpy" not in set(short.call_paths())  # no NVTX range above it
    with pytest.raises(ValueError, match="kernel_names must be one of"):
        perflow.read(SAXPY, kernel_names="pretty")


def test_errors_name_the_file_and_table(tmp_path: Path) -> None:
    bad = tmp_path / "bad.sqlite"
    shutil.copyfile(SAXPY, bad)
    con = sqlite3.connect(bad)
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start - 5 WHERE correlationId = 156")
    con.commit()
    con.close()
    with pytest.raises(FormatError, match=r"bad.sqlite.*CUPTI_ACTIVITY_KIND_KERNEL, rowid 2: ends"):
        perflow.read_nsys(bad)
    missing = tmp_path / "missing.sqlite"
    shutil.copyfile(SAXPY, missing)
    con = sqlite3.connect(missing)
    con.execute("DELETE FROM StringIds WHERE value LIKE 'saxpy(%'")
    con.commit()
    con.close()
    with pytest.raises(
        FormatError, match=r"missing.sqlite.*CUPTI_ACTIVITY_KIND_KERNEL, rowid 1: string id \d+ is not in StringIds"
    ):
        perflow.read_nsys(missing)
    text = tmp_path / "text.sqlite"
    text.write_text("hello")
    with pytest.raises(FormatError, match="not an SQLite file"):
        perflow.read_nsys(text)


@pytest.mark.timeout(120)
def test_fuzz(tmp_path: Path) -> None:
    raw = SAXPY.read_bytes()
    rng = random.Random(11)
    outcomes = {"pag": 0, "error": 0}
    for i in range(30):
        data = bytearray(raw)
        if i < 10:
            data = data[: rng.randrange(100, len(data))]  # truncated
        else:
            for _ in range(rng.randint(1, 40)):
                j = rng.randrange(100, len(data))
                data[j] ^= 1 << rng.randrange(8)
        f = tmp_path / f"f{i}.sqlite"
        f.write_bytes(bytes(data))
        read_damaged(perflow.read_nsys, f, outcomes, times=True)
    assert outcomes["error"] >= 5
    # and damaged values in good pages
    for i, (table, col, val, rowid) in enumerate(
        [("CUPTI_ACTIVITY_KIND_KERNEL", "start", "x", 3), ("CUPTI_ACTIVITY_KIND_MEMCPY", "end", "x", 1),
         ("CUPTI_ACTIVITY_KIND_RUNTIME", "nameId", 10**9, 7), ("NVTX_EVENTS", "globalTid", "?", 4)]
    ):  # fmt: skip
        f = tmp_path / f"v{i}.sqlite"
        shutil.copyfile(SAXPY, f)
        con = sqlite3.connect(f)
        con.execute(f"UPDATE {table} SET {col} = ? WHERE rowid = ?", (val, rowid))
        con.commit()
        con.close()
        with pytest.raises(FormatError, match=f"{table}, rowid {rowid}: "):
            perflow.read_nsys(f)
    np.testing.assert_array_equal(
        perflow.read_nsys(SAXPY).metrics.to_numpy(), perflow.read_nsys(SAXPY).metrics.to_numpy()
    )


@pytest.mark.parametrize("flow", ["critical_path", "wait_states", "hotspot", "pop", "comm_pattern"])
def test_shipped_flows_run_on_a_gpu_trace(clover: perflow.PAG, flow: str, tmp_path: Path) -> None:
    res = perflow.run(flow, pag=clover)
    res.raise_for_status()
    res.save(tmp_path)
    assert (tmp_path / "index.html").is_file()
