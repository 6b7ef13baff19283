"""GPU timelines as traces (perflow.readers._gputrace): a worked example with hand-computed numbers.

The run (times in seconds; one process, host thread 0, device 0):

    host   main                [0, 10]
             cudaLaunchKernel  [1, 1.5]   launches A (correlation 1) on stream 1
             cudaLaunchKernel  [2, 2.5]   launches B (2) on stream 2
             cudaLaunchKernel  [3, 3.5]   launches C (3) on stream 1
             cudaDeviceSynchronize [4, 8.1]
    stream 1   A [1.6, 5]   C [5, 8]      (C queued behind A: it starts when A ends)
    stream 2   B [2.6, 6]

By hand:

* GPU busy: stream 1 3.4 + 3.0 = 6.4 s, stream 2 3.4 s; the device (union) [1.6, 8] = 6.4 s.
* GPU idle (the streams exist from the process's start 0 to its end 10): stream 1 10 - 6.4 = 3.6 s
  ([0, 1.6] and [8, 10]), stream 2 6.6 s ([0, 2.6] and [6, 10]); the device 10 - 6.4 = 3.6 s.
* Waiting: the host waits in cudaDeviceSynchronize from 4 until the last operation ends (C, at 8): 4.0 s,
  a Late Sender; stream 1 waits for A's launch from 0 to 1 (the launch call's enter), 1.0 s; stream 2
  for B's from 0 to 2, 2.0 s. The 0.6 s from a launch call's enter to its kernel's start is launch latency.
* Critical path, backwards from the end (10, host): main [8.1, 10]; the sync's tail [8, 8.1]; the sync
  waited for C, so the path moves to stream 1 at 8: C [5, 8], A [1.6, 5] (C did not wait for its
  launch: it followed A), the idle period [1, 1.6] that ended with A's start; stream 1 waited for A's
  launch, so the path moves to the host at 1 (the launch call's enter): main [0, 1]. Length 10 s:
  main 2.9, A 3.4, C 3.0, GPU idle 0.6, cudaDeviceSynchronize 0.1. B is not on it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import perflow
from perflow.errors import TraceError
from perflow.flow.registry import get_pass
from perflow.kinds import GPU_IDLE, is_gpu_api
from perflow.readers._gputrace import Timeline, is_waiting_call, timeline_pag, timeline_raw
from tests.readers.helpers import check_times

HOST_COLS = ["process", "thread", "start", "end", "name", "paradigm", "corr", "sync"]
GPU_COLS = ["process", "device", "stream", "start", "end", "name", "kind", "corr", "bytes"]


def run(name: str, *args, **kw):  # type: ignore[no-untyped-def]
    return get_pass(name).func(*args, **kw)


def example(*, copy: bool = False) -> Timeline:
    host = [
        (0, 0, 0.0, 10.0, "main", "user", -1, False),
        (0, 0, 1.0, 1.5, "cudaLaunchKernel", "cuda", 1, False),
        (0, 0, 2.0, 2.5, "cudaLaunchKernel", "cuda", 2, False),
        (0, 0, 3.0, 3.5, "cudaLaunchKernel", "cuda", 3, False),
        (0, 0, 4.0, 8.1, "cudaDeviceSynchronize", "cuda", -1, True),
    ]
    gpu = [
        (0, 0, 1, 1.6, 5.0, "A", "kernel", 1, 0),
        (0, 0, 2, 2.6, 6.0, "B", "kernel", 2, 0),
        (0, 0, 1, 5.0, 8.0, "C", "kernel", 3, 0),
    ]
    if copy:  # a blocking copy after the sync: 4 MB device-to-host on stream 1 during [8.5, 9.5], call [8.4, 9.6]
        host.append((0, 0, 8.4, 9.6, "cudaMemcpy", "cuda", 4, True))
        gpu.append((0, 0, 1, 8.5, 9.5, "[CUDA memcpy Device-to-Host]", "memcpy", 4, 4_000_000))
    return Timeline(
        pd.DataFrame(host, columns=HOST_COLS), pd.DataFrame(gpu, columns=GPU_COLS), tick=1.0, attrs={"source": "ex"}
    )


@pytest.fixture(scope="module")
def pag() -> perflow.PAG:
    return timeline_pag(example())


def test_locations_are_the_host_thread_and_one_per_stream(pag: perflow.PAG) -> None:
    loc = pag.trace.locations
    assert loc[["process", "thread", "type"]].values.tolist() == [[0, 0, "cpu"], [0, 1, "gpu"], [0, 2, "gpu"]]
    assert loc["name"].tolist() == ["thread 0", "GPU 0 stream 1", "GPU 0 stream 2"]
    assert pag.trace.locations_of_type("gpu")["thread"].tolist() == [1, 2]
    assert pag.attrs["gpu_streams"] == 2 and pag.attrs["gpu_kernels"] == 3 and pag.attrs["gpu_launches_linked"] == 3


def test_kernels_sit_below_their_launching_call(pag: perflow.PAG) -> None:
    paths = set(pag.call_paths())
    assert {"main/cudaLaunchKernel/A", "main/cudaLaunchKernel/B", "main/cudaLaunchKernel/C", GPU_IDLE} <= paths
    assert list(pag.roots) == [pag.vertex("main").id, pag.vertex(GPU_IDLE).id]  # one main: the host's
    m = pag.metrics
    a, launch, main = (pag.vertex(p).id for p in ("main/cudaLaunchKernel/A", "main/cudaLaunchKernel", "main"))
    assert m.loc[(a, 0, 1), "time_exc"] == pytest.approx(3.4)
    # on stream 1 the host frames carry the kernels' time, no visits; on the host their own
    assert m.loc[(launch, 0, 1), ["time_inc", "time_exc", "visits"]].tolist() == pytest.approx([6.4, 0.0, 0.0])
    assert m.loc[(launch, 0, 0), ["time_inc", "visits"]].tolist() == pytest.approx([1.5, 3.0])
    assert m.loc[(main, 0, 2), "time_inc"] == pytest.approx(3.4)
    check_times(pag)


def test_busy_and_idle_time_by_hand(pag: perflow.PAG) -> None:
    b = run("breakdown", pag, by="process", wide=True).iloc[0]
    assert b["gpu"] == pytest.approx(9.8)  # 6.4 + 3.4
    # idle regions: 3.6 + 6.6; 3.0 of it is waiting for launches (the wait category)
    assert b["idle"] == pytest.approx(10.2 - 3.0)
    assert b["wait"] == pytest.approx(4.0 + 1.0 + 2.0)
    assert b["total"] == pytest.approx(30.0)  # three locations over [0, 10]
    per_loc = pag.metrics.xs(pag.vertex(GPU_IDLE).id, level="vertex")["time_exc"]
    assert per_loc.tolist() == pytest.approx([3.6, 6.6])
    ws = run("wait_states", pag)
    late = ws[ws["kind"] == "late_sender"].sort_values("thread")
    np.testing.assert_allclose(late[["thread", "start", "end"]].to_numpy(float), [[0, 4, 8], [1, 0, 1], [2, 0, 2]])
    assert late["cause_thread"].tolist() == [1, 0, 0]


def test_critical_path_by_hand(pag: perflow.PAG) -> None:
    cp = run("critical_path", pag)
    seg = cp["segments"]
    names = [pag.vertex_table["name"].iat[v] if v >= 0 else "-" for v in seg["vertex"]]
    assert list(zip(names, seg["thread"], seg["start"], seg["end"])) == [
        ("main", 0, 0.0, 1.0),
        (GPU_IDLE, 1, 1.0, pytest.approx(1.6)),
        ("A", 1, pytest.approx(1.6), 5.0),
        ("C", 1, 5.0, 8.0),
        ("cudaDeviceSynchronize", 0, 8.0, pytest.approx(8.1)),
        ("main", 0, pytest.approx(8.1), 10.0),
    ]
    s = cp["summary"].iloc[0]
    assert s["length"] == pytest.approx(10.0)
    prof = cp["profile"].set_index("name")["cp_time"]
    assert prof[["main", "A", "C", GPU_IDLE, "cudaDeviceSynchronize"]].tolist() == pytest.approx(
        [2.9, 3.4, 3.0, 0.6, 0.1]
    )
    assert "B" not in prof.index or prof["B"] == 0


def test_launches_and_the_wait_are_messages(pag: perflow.PAG) -> None:
    m = pag.trace.messages
    comm = {v: k for k, v in pag.trace.comm_names.items()}["gpu"]
    assert (m["comm"] == comm).all() and (m["bytes"] == 0).all()
    iv = pag.trace.intervals
    name = pag.vertex_table["name"].astype(str).to_numpy()
    rows = [
        (
            int(r.send_thread),
            name[iv["vertex"].iat[r.send_interval]],
            int(r.recv_thread),
            name[iv["vertex"].iat[r.recv_interval]],
        )
        for r in m.itertuples()
    ]
    # A and B found their streams idle (received by the idle period); C followed A (received by C itself);
    # the completion of C is sent by the idle period that begins when C ends
    assert sorted(rows) == sorted(
        [
            (0, "cudaLaunchKernel", 1, GPU_IDLE),
            (0, "cudaLaunchKernel", 2, GPU_IDLE),
            (0, "cudaLaunchKernel", 1, "C"),
            (1, GPU_IDLE, 0, "cudaDeviceSynchronize"),
        ]
    )
    et = pag.parallel.edge_table
    assert (et["kind"].astype(str) == "p2p").sum() == 4


def test_timeline_shows_gpu_time_on_the_stream_rows(pag: perflow.PAG) -> None:
    from perflow.passes._binned import aggregate_bins, timeline_data

    td = timeline_data(pag)
    assert td.labels() == ["0.0", "0.1 GPU 0 stream 1", "0.2 GPU 0 stream 2"]
    assert td.names == ["computation", "gpu", "idle"]
    kw = dict(n_rows=td.n_rows, n_cats=len(td.names), t0=0.0, t1=10.0, bins=10)
    b = aggregate_bins(td.row, td.enter, td.leave, td.cat, td.parent_cat, **kw)  # (row, 1 s bin, category)
    gpu, idle = td.names.index("gpu"), td.names.index("idle")
    # stream 1: A from 1.6 to 5, C from 5 to 8; idle [0, 1.6] and [8, 10]
    np.testing.assert_allclose(b[1, :, gpu], [0, 0.4, 1, 1, 1, 1, 1, 1, 0, 0], atol=1e-12)
    np.testing.assert_allclose(b[1, :, idle], [1, 0.6, 0, 0, 0, 0, 0, 0, 1, 1], atol=1e-12)
    # stream 2: B from 2.6 to 6
    np.testing.assert_allclose(b[2, :, gpu], [0, 0, 0.4, 1, 1, 1, 0, 0, 0, 0], atol=1e-12)
    # the host is busy all along (main and its API calls); the device work is not counted on it
    np.testing.assert_allclose(b[0].sum(axis=1), np.ones(10), atol=1e-12)
    assert b[0, :, gpu].sum() == 0
    assert b[:, :, gpu].sum() == pytest.approx(9.8)  # as the breakdown's gpu time


def test_shipped_passes_run_on_the_example(pag: perflow.PAG, tmp_path) -> None:  # type: ignore[no-untyped-def]
    ws = run("wait_states", pag)
    cp = run("critical_path", pag)
    fig = run("plot_timeline", pag, ws, cp["segments"], messages=True, path=str(tmp_path / "t.png"))
    assert (tmp_path / "t.png").stat().st_size > 0 and fig is not None
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == ["0.0", "0.1 GPU 0 stream 1", "0.2 GPU 0 stream 2"]
    html = run("timeline_html", pag, ws, cp["segments"])
    assert "GPU 0 stream 2" in html
    hot = run("hotspot", pag)
    assert {"A", "B", "C", GPU_IDLE} <= set(hot["name"].astype(str))


def test_bytes_of_copies_and_a_blocking_copy() -> None:
    pag = timeline_pag(example(copy=True))
    v = pag.vertex("main/cudaMemcpy/[CUDA memcpy Device-to-Host]").id
    assert pag.metrics.loc[(v, 0, 1), "gpu_bytes"] == 4_000_000
    assert pag.metric_info["gpu_bytes"].unit == "bytes"
    ws = run("wait_states", pag)
    w = ws[(ws["kind"] == "late_sender") & (ws["thread"] == 0)].sort_values("start")
    # the copy call waits from its enter (8.4) until the copy ends (9.5)
    np.testing.assert_allclose(w[["start", "end"]].to_numpy(float), [[4, 8], [8.4, 9.5]])
    assert pag.attrs["gpu_waits_linked"] == 2
    check_times(pag)


def test_a_copy_that_ends_after_its_call_returns_is_not_waited_for() -> None:
    tl = example(copy=True)
    tl.gpu.loc[tl.gpu["corr"] == 4, "end"] = 9.7  # a staged copy: the call returned at 9.6
    pag = timeline_pag(tl)
    assert pag.attrs["gpu_waits_linked"] == 1 and pag.attrs["gpu_waits_unlinked"] == 1


def test_device_work_without_a_host() -> None:
    tl = example()
    tl = Timeline(tl.host.iloc[:0], tl.gpu.assign(corr=-1), tick=1.0, attrs={"source": "gpu only"})
    pag = timeline_pag(tl)
    assert sorted(pag.call_paths()) == ["A", "B", "C", GPU_IDLE]
    assert len(pag.trace.messages) == 0
    # the run spans the device work [1.6, 8]: stream 2's B [2.6, 6] leaves 1.0 + 2.0 idle
    iv = pag.trace.intervals
    idle = iv[(iv["vertex"] == pag.vertex(GPU_IDLE).id) & (iv["thread"] == 1)]
    assert (idle["leave"] - idle["enter"]).sum() == pytest.approx(1.0 + 2.0)


def test_overlapping_operations_on_a_stream_are_serialised() -> None:
    tl = example()
    tl.gpu.loc[tl.gpu["name"] == "C", "start"] = 4.5  # starts before A (stream 1) ends
    raw = timeline_raw(tl)
    assert raw.attrs["gpu_overlaps_shifted"] == 1
    pag = perflow.build_pag(raw)
    c = pag.vertex("main/cudaLaunchKernel/C").id
    assert pag.metrics.loc[(c, 0, 1), "time_exc"] == pytest.approx(3.0)  # moved to [5, 8]


def test_bad_input_names_the_row() -> None:
    tl = example()
    tl.gpu.loc[1, "end"] = 0.0
    with pytest.raises(TraceError, match=r"GPU row 1 \('B'\) ends before it starts"):
        timeline_raw(tl)
    with pytest.raises(TraceError, match="lacks columns"):
        timeline_raw(Timeline(tl.host.drop(columns=["sync"]), tl.gpu))
    empty = Timeline(tl.host.iloc[:0], tl.gpu.iloc[:0], attrs={"source": "nothing"})
    with pytest.raises(TraceError, match="nothing: no host calls and no GPU operations"):
        timeline_raw(empty)


@pytest.mark.parametrize(
    ("name", "waits"),
    [
        ("cudaDeviceSynchronize", True),
        ("cudaStreamSynchronize_ptsz", True),
        ("cudaMemcpy", True),
        ("cuMemcpyDtoH_v2", True),
        ("hipMemcpy", True),
        ("hipDeviceSynchronize", True),
        ("cudaMemcpyAsync", False),
        ("cudaLaunchKernel", False),
        ("hipLaunchKernel", False),
        ("MPI_Wait", False),
    ],
)
def test_waiting_calls(name: str, waits: bool) -> None:
    assert is_waiting_call(name) is waits


def test_gpu_api_names_are_host_work() -> None:
    assert is_gpu_api("cudaLaunchKernel") and is_gpu_api("hsa_signal_wait_scacquire") and is_gpu_api("nvtxRangePush")
    assert not is_gpu_api("saxpy") and not is_gpu_api("[CUDA memcpy Host-to-Device]") and not is_gpu_api("curand_init")


def test_partitioned_builds_agree() -> None:
    raw = timeline_raw(example(copy=True))
    one = perflow.build_pag(raw, infer_collectives=True, jobs=1)
    for jobs in (2, 3):
        other = perflow.build_pag(raw, infer_collectives=True, jobs=jobs)
        pd.testing.assert_frame_equal(one.metrics, other.metrics)
        np.testing.assert_array_equal(one.vertex_table["parent"], other.vertex_table["parent"])


def test_a_wait_comes_out_of_the_waiting_threads_time() -> None:
    """The copy sits below the cudaMemcpy that waited for it, on the GPU stream: it keeps its time as gpu."""
    pag = timeline_pag(example(copy=True))
    b = run("breakdown", pag, by="process", wide=True).iloc[0]
    assert b["gpu"] == pytest.approx(9.8 + 1.0)
    # the host: sync 4.0 and the copy call 8.4 .. 9.5; stream 1: A's launch 1.0 and the copy's, from C's end
    # at 8 to the call's enter at 8.4; stream 2: B's launch 2.0
    assert b["wait"] == pytest.approx(4.0 + 1.1 + 1.0 + 0.4 + 2.0)


def test_trace_locations_survive_save_and_load(tmp_path) -> None:  # type: ignore[no-untyped-def]
    pag = timeline_pag(example())
    pag.save(tmp_path / "x.pag")
    back = perflow.load(tmp_path / "x.pag")
    pd.testing.assert_frame_equal(back.trace.locations, pag.trace.locations)
    assert back.trace.locations_of_type("gpu")["thread"].tolist() == [1, 2]
