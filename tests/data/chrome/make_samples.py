"""Regenerate the small Chrome-trace samples in this folder (run from the repository root).

Each file imitates one tool's output: viztracer (X events, real pids/tids,
metadata), the PyTorch profiler (B/E pairs, categories, an instant event),
PerfFlowAspect (an unterminated array, one event per line, ``.pfw``), and a
directory with one file per rank.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent


def viztracer() -> dict:
    ev = [
        {"ph": "M", "name": "process_name", "pid": 4242, "tid": 4242, "args": {"name": "python"}},
        {"ph": "M", "name": "thread_name", "pid": 4242, "tid": 4242, "args": {"name": "MainThread"}},
        # main thread: main [0, 100] > compute [10, 60] > kernel [20, 30]; main > MPI_Allreduce [70, 95]
        {"ph": "X", "name": "main (run.py:1)", "cat": "FEE", "pid": 4242, "tid": 4242, "ts": 1000.0, "dur": 100.0},
        {"ph": "X", "name": "compute (run.py:5)", "cat": "FEE", "pid": 4242, "tid": 4242, "ts": 1010.0, "dur": 50.0},
        {"ph": "X", "name": "kernel (run.py:9)", "cat": "FEE", "pid": 4242, "tid": 4242, "ts": 1020.0, "dur": 10.0},
        {"ph": "X", "name": "MPI_Allreduce", "cat": "FEE", "pid": 4242, "tid": 4242, "ts": 1070.0, "dur": 25.0},
        # a worker thread
        {"ph": "X", "name": "worker (run.py:20)", "cat": "FEE", "pid": 4242, "tid": 4250, "ts": 1005.0, "dur": 40.0},
        {"ph": "i", "name": "marker", "pid": 4242, "tid": 4242, "ts": 1050.0, "s": "t"},
    ]
    return {"traceEvents": ev, "displayTimeUnit": "ns", "viztracer_metadata": {"version": "0.16"}}


def pytorch() -> dict:
    ev = [
        {"ph": "M", "name": "process_name", "pid": 11, "args": {"name": "Rank 1"}},
        {"ph": "M", "name": "process_name", "pid": 10, "args": {"name": "Rank 0"}},
    ]
    for pid, shift in ((10, 0.0), (11, 3.0)):
        ev += [
            {"ph": "B", "name": "ProfilerStep#1", "cat": "cpu_op", "pid": pid, "tid": 1, "ts": 0.0 + shift},
            {"ph": "B", "name": "aten::matmul", "cat": "cpu_op", "pid": pid, "tid": 1, "ts": 5.0 + shift},
            {"ph": "E", "pid": pid, "tid": 1, "ts": 25.0 + shift},
            {"ph": "B", "name": "MPI_Barrier", "cat": "cpu_op", "pid": pid, "tid": 1, "ts": 30.0 + shift},
            {"ph": "E", "pid": pid, "tid": 1, "ts": 50.0},
            {"ph": "E", "pid": pid, "tid": 1, "ts": 60.0},
        ]
    return {"traceEvents": ev}


def perfflow() -> str:
    ev = [
        {"name": "solve", "cat": "app", "pid": 7, "tid": 7, "ts": 100, "ph": "B"},
        {"name": "step", "cat": "app", "pid": 7, "tid": 7, "ts": 110, "ph": "B"},
        {"name": "step", "cat": "app", "pid": 7, "tid": 7, "ts": 150, "ph": "E"},
        {"name": "step", "cat": "app", "pid": 7, "tid": 7, "ts": 150, "ph": "B"},
        {"name": "step", "cat": "app", "pid": 7, "tid": 7, "ts": 190, "ph": "E"},
        {"name": "solve", "cat": "app", "pid": 7, "tid": 7, "ts": 200, "ph": "E"},
    ]
    return "[\n" + "".join(json.dumps(e) + ",\n" for e in ev)  # PerfFlowAspect never closes the array


def per_rank() -> dict[str, list]:
    out = {}
    for r in range(3):
        out[f"trace.rank{r}.json"] = [
            {"ph": "X", "name": "main", "pid": 1000 + r, "tid": 1000 + r, "ts": 0, "dur": 100},
            {"ph": "X", "name": "MPI_Bcast", "pid": 1000 + r, "tid": 1000 + r, "ts": 10 + r, "dur": 20 - r},
        ]
    return out


def main() -> None:
    (HERE / "viztracer.json").write_text(json.dumps(viztracer(), indent=1))
    (HERE / "pytorch.json").write_text(json.dumps(pytorch(), indent=1))
    (HERE / "perfflow.pfw").write_text(perfflow())
    d = HERE / "per-rank"
    d.mkdir(exist_ok=True)
    for name, ev in per_rank().items():
        (d / name).write_text(json.dumps(ev))


if __name__ == "__main__":
    main()
