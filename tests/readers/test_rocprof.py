"""rocprof reader on real CSV output of three generations (tests/data/rocprof, see its README), hand-checked.

* v1-benchmark-mi200/timestamps.csv: rocprof (v1) ``--timestamp on`` kernel trace from Omniperf's test
  workloads (MI200), cut to its first 40 dispatches; one queue.
* v2-vcopy-mi300x/timestamps.csv: rocprofv2 kernel trace (Omniperf, MI300X), 3 dispatches of vecCopy.
* v3-docs-two-streams/: rocprofv3 ``kernel_trace.csv`` and ``memory_copy_trace.csv`` of one run
  (rocprofiler-sdk documentation data): 8 kernels and 4 host-to-device copies on streams 1 and 2.

None of the real files holds HIP API calls of the same run, so the launch and wait links are checked on a
small rocprofv3-format directory written by the test (``hip_run``), labelled as such.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import perflow
from perflow.errors import FormatError
from perflow.flow.registry import get_pass
from perflow.kinds import GPU_IDLE
from perflow.readers import detect_format
from tests.readers.helpers import check_times, read_damaged

DATA = Path(__file__).resolve().parents[1] / "data" / "rocprof"
V1 = DATA / "v1-benchmark-mi200" / "timestamps.csv"
V2 = DATA / "v2-vcopy-mi300x" / "timestamps.csv"
V3 = DATA / "v3-docs-two-streams"


def run(name: str, *args, **kw):  # type: ignore[no-untyped-def]
    return get_pass(name).func(*args, **kw)


def durations(pag: perflow.PAG, name: str) -> list[float]:
    iv = pag.trace.intervals
    v = [i for i, n in enumerate(pag.vertex_table["name"].astype(str)) if n == name]
    sel = iv[iv["vertex"].isin(v)].sort_values("enter")
    return (sel["leave"] - sel["enter"]).tolist()


def test_detection() -> None:
    assert detect_format(V1) == "rocprof" and detect_format(V2) == "rocprof" and detect_format(V3) == "rocprof"
    assert detect_format(V3 / "kernel_trace.csv") == "rocprof"


def test_v1_kernel_trace() -> None:
    pag = perflow.read(V1)
    assert pag.attrs["format"] == "rocprof" and pag.attrs["gpu_kernels"] == 40
    assert pag.trace.locations[["name", "type"]].values.tolist() == [["GPU 0 stream 0", "gpu"]]
    # "__amd_rocclr_fillBufferAligned.kd": BeginNs 17250653618423, EndNs 17250653858583
    assert durations(pag, "__amd_rocclr_fillBufferAligned") == pytest.approx([240_160e-9])
    assert durations(pag, "void benchmark_func<short, 256, 8u, 0u>(short, short*)") == pytest.approx([13_120e-9])
    b = run("breakdown", pag, by="total", wide=True).iloc[0]
    assert b["gpu"] == pytest.approx(5_182_396e-9)  # the 40 dispatches' EndNs - BeginNs
    assert b["gpu"] + b["idle"] == pytest.approx(11_242_386e-9)  # first BeginNs to last EndNs
    assert pag.attrs["time_offset"] == pytest.approx(17250.653618423)
    check_times(pag)


def test_v2_kernel_trace() -> None:
    pag = perflow.read(V2)
    assert pag.trace.locations["name"].tolist() == ["GPU 60633 stream 1"]
    assert durations(pag, "vecCopy(double*, double*, double*, int, int)") == pytest.approx(
        [16_119e-9, 13_560e-9, 13_480e-9]
    )


def test_v3_kernels_and_copies_on_two_streams() -> None:
    pag = perflow.read(V3)
    assert pag.attrs["gpu_kernels"] == 8 and pag.attrs["gpu_copies"] == 4 and pag.attrs["files"] == 2
    assert pag.trace.locations["name"].tolist() == ["GPU 2 stream 1", "GPU 2 stream 2"]
    add = "void addition_kernel<float>(float*, float const*, float const*, int, int)"
    # stream 1: 2414192765353337 .. 2414192765369494; stream 2: 2414192765608844 .. 2414192765621674
    assert durations(pag, add) == pytest.approx([16_157e-9, 12_830e-9])
    iv = pag.trace.intervals
    copies = iv[iv["vertex"] == pag.vertex("[HIP memcpy Host-to-Device]").id].sort_values("enter")
    assert copies["thread"].tolist() == [0, 0, 1, 1]
    assert (copies["leave"] - copies["enter"]).iat[0] == pytest.approx(101_594e-9)
    m = pag.metrics
    assert m.loc[(pag.vertex(GPU_IDLE).id, 0, 0), "visits"] == 6  # before each of 6 operations that waited, and after
    check_times(pag)


def hip_run(tmp_path: Path) -> Path:
    """A rocprofv3-format run written here (not real output): the worked example of test_gputrace in ns."""
    d = tmp_path / "host" / "4242"
    d.mkdir(parents=True)
    api = ['"Domain","Function","Process_Id","Thread_Id","Correlation_Id","Start_Timestamp","End_Timestamp"']
    api += [
        '"MARKER_CORE_API","main",4242,4242,0,1000000000,1010000000',
        '"HIP_RUNTIME_API","hipLaunchKernel",4242,4242,1,1001000000,1001500000',
        '"HIP_RUNTIME_API","hipLaunchKernel",4242,4242,2,1002000000,1002500000',
        '"HIP_RUNTIME_API","hipLaunchKernel",4242,4242,3,1003000000,1003500000',
        '"HIP_RUNTIME_API","hipDeviceSynchronize",4242,4242,5,1004000000,1008100000',
        '"MARKER_CORE_API","a mark",4242,4242,6,1009000000,1009000000',
    ]
    (d / "4242_hip_api_trace.csv").write_text("\n".join(api) + "\n")
    k = [
        '"Kind","Agent_Id","Queue_Id","Stream_Id","Thread_Id","Dispatch_Id","Kernel_Id","Kernel_Name",'
        '"Correlation_Id","Start_Timestamp","End_Timestamp"'
    ]
    k += [
        '"KERNEL_DISPATCH","Agent 1",1,1,4242,1,1,"A(float*) [clone .kd]",1,1001600000,1005000000',
        '"KERNEL_DISPATCH","Agent 1",2,2,4242,2,2,"B(float*)",2,1002600000,1006000000',
        '"KERNEL_DISPATCH","Agent 1",1,1,4242,3,3,"C(float*)",3,1005000000,1008000000',
    ]
    (d / "4242_kernel_trace.csv").write_text("\n".join(k) + "\n")
    (d / "4242_agent_info.csv").write_text('"Node_Id","Name"\n0,"cpu"\n1,"gfx90a"\n')
    return tmp_path


def test_hip_launches_and_waits_are_linked(tmp_path: Path) -> None:
    pag = perflow.read(hip_run(tmp_path))
    assert pag.attrs["gpu_launches_linked"] == 3 and pag.attrs["gpu_waits_linked"] == 1
    assert {"main/hipLaunchKernel/A(float*)", "main/hipLaunchKernel/C(float*)", "main/hipDeviceSynchronize"} <= set(
        pag.call_paths()
    )
    assert "a mark" not in set(pag.vertex_table["name"].astype(str))  # instantaneous markers are skipped
    assert pag.trace.locations["name"].tolist() == ["tid 4242", "GPU 1 stream 1", "GPU 1 stream 2"]
    cp = run("critical_path", pag)
    prof = cp["profile"].set_index("name")["cp_time"]
    assert prof[["main", "A(float*)", "C(float*)", GPU_IDLE]].tolist() == pytest.approx(
        [2.9e-3, 3.4e-3, 3.0e-3, 0.6e-3]
    )
    ws = run("wait_states", pag)
    host = ws[(ws["kind"] == "late_sender") & (ws["thread"] == 0)]
    assert host["amount"].sum() == pytest.approx(4.0e-3)


def test_errors_name_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "kernel_trace.csv"
    lines = V3.joinpath("kernel_trace.csv").read_text().splitlines()
    lines[3] = lines[3].replace("2414192765487486", "later")
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(FormatError, match=r"kernel_trace.csv.*line 4.*non-numeric value 'later'"):
        perflow.read_rocprof(bad)
    lines = V3.joinpath("kernel_trace.csv").read_text().splitlines()
    lines[2] = lines[2].replace("2414192765435326", "2414192765424000")
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(FormatError, match=r"line 3.*ends \(2414192765424000\) before it starts"):
        perflow.read_rocprof(bad)
    empty = tmp_path / "e"
    empty.mkdir()
    with pytest.raises(FormatError, match="no rocprof kernel, copy or API trace"):
        perflow.read_rocprof(empty)
    two = tmp_path / "two"
    (two / "1").mkdir(parents=True)
    (two / "1" / "7_hip_api_trace.csv").write_text(
        hip_run(tmp_path / "x").joinpath("host/4242/4242_hip_api_trace.csv").read_text()
    )
    (two / "1" / "kernel_trace.csv").write_text(V3.joinpath("kernel_trace.csv").read_text())
    (two / "1" / "8_kernel_trace.csv").write_text(V3.joinpath("kernel_trace.csv").read_text())
    with pytest.raises(FormatError, match="rows without a process id among several processes"):
        perflow.read_rocprof(two)


@pytest.mark.timeout(120)
def test_fuzz(tmp_path: Path) -> None:
    rng = random.Random(3)
    texts = {f.name: f.read_text() for f in sorted(V3.iterdir())}
    outcomes = {"pag": 0, "error": 0}
    for i in range(40):
        d = tmp_path / f"r{i}"
        d.mkdir()
        for name, text in texts.items():
            t = list(text)
            if name == "kernel_trace.csv" or rng.random() < 0.5:
                for _ in range(rng.randint(1, 6)):
                    j = rng.randrange(len(t))
                    t[j] = rng.choice(['"', ",", "\n", "x", "-", "9", ""])
                if rng.random() < 0.3:
                    t = t[: rng.randrange(len(t))]
            (d / name).write_text("".join(t))
        read_damaged(perflow.read_rocprof, d, outcomes, times=True)
    assert outcomes["error"] >= 5 and outcomes["pag"] >= 1


def test_perflow_info_summarises_the_streams(capsys: pytest.CaptureFixture[str]) -> None:
    from perflow.cli.main import main

    assert main(["info", str(V3)]) == 0
    out = capsys.readouterr().out
    assert "(rocprof)" in out and "threads/process 2" in out
    assert "gpu         2 streams on 1 device: 8 kernels, 4 copies" in out
    assert "0 launches and 0 waits linked" in out  # no HIP API trace in these files
