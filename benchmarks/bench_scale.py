"""The Dask engine past memory: a large OTF2 trace read and analysed within a memory budget for all processes.

One run per ``--trace`` (each in a fresh process): a LocalCluster of ``--workers`` single-threaded
worker processes with a memory limit each (``--memory`` shared by them) and a local spill directory
(``--spill``); :meth:`perflow.dask.Engine.load` with ``--parts`` partitions (default: one per
``--events-per-part`` events), then the passes ``wait_states``, ``critical_path`` and
``pop_metrics`` on ``dt.pag()``. A thread samples the resident memory of the **whole process tree**
(this client with the in-process scheduler, the nannies, the workers, the decoders they fork) with psutil
and keeps the peak of the sum of their proportional set sizes (every second) (PSS: resident memory, each page
shared by forked processes counted once in all; a sum of RSS would count it in every process that maps it), the peak per process and the phase in which the sum peaked. Printed per trace:
events, wall time per phase, CPU seconds (user + system) of the whole tree, peak resident of the tree,
bytes spilled to disk, and at the end the ratio of wall and CPU time of the largest trace to the
smallest over the ratio of their events (the target: 200 M events within 12x the 20 M time).

``--save DIR`` keeps each engine's results there as Parquet files (``<trace>.dask/``, ``<trace>.local/``:
the wait-state table with its rows sorted, the critical path's summary, profile and segments, the POP
table; :mod:`scale_results`) and compares them column by column once both are saved (the Dask engine
and, with ``--local-only``, the local one, at different times: the local engine at 60 M events needs about
8 GB). ``--check`` also reads each trace with the local engine (``perflow.read``, in its own fresh process,
after the Dask run) and compares: integers, strings and categories equal, floats exact or (printed: the
largest relative difference) within 1e-9.

Usage::

    python benchmarks/bench_scale.py --trace /work/bench-data/otf2-20M /work/bench-data/scale8/otf2-200M --memory 4.8e9
    python benchmarks/bench_scale.py --trace /work/bench-data/scale8/otf2-60M --check --save /tmp/res
    python benchmarks/bench_scale.py --trace T --workers 2 --memory 6e9 --spill /tmp/spill --parts 64
    python benchmarks/bench_scale.py --trace T --save /tmp/res; python benchmarks/bench_scale.py --trace T --save /tmp/res --local-only
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import scale_results  # noqa: E402
from bench_dask import _child, make  # noqa: E402

PASSES = ("wait_states", "critical_path", "pop_metrics")


class TreeRSS:
    """Sample the resident memory of this process and all its descendants; keep the peaks.

    Every ``every`` seconds the RSS of each process (cheap); every ``pss_every`` seconds their PSS
    (reading every process's page map costs CPU: at 10 Hz it would take a good part of a core).
    """

    def __init__(self, every: float = 0.1, pss_every: float = 1.0) -> None:
        import psutil

        self.me = psutil.Process()
        self.every, self.pss_every = every, pss_every
        # "role pid" -> [RSS, peak RSS, PSS, peak PSS, alive] (bytes; lost processes keep their last figures)
        self.procs: dict[str, list[Any]] = {}
        self._roles: dict[int, str] = {}
        self.phase = "start"
        self.peak, self.peak_phase, self.peak_rss, self.per_proc = 0, "", 0, {}
        self.by_phase: dict[str, list[int]] = {}  # phase -> [peak of the tree, peak of this process] (PSS)
        self.own_cpu = 0.0
        self.last_rss, self.last_pss = 0, 0  # the latest sums (RSS at every sample, PSS every pss_every)
        self.cpu_dead = 0.0  # CPU seconds of descendants that ended while sampled
        self._cpu: dict[int, float] = {}
        self._last_pss = 0.0
        self._procs: list[Any] = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def sample(self) -> None:
        import psutil

        pss = time.monotonic() - self._last_pss >= self.pss_every
        if pss:
            self._last_pss = time.monotonic()
        if pss or not self._procs:  # listing the descendants reads every process of the machine: not at 10 Hz
            self._procs = [self.me, *self.me.children(recursive=True)]
        total, total_rss, seen, mine = 0, 0, {}, 0
        for p in self._procs:
            try:
                with p.oneshot():
                    rss = p.memory_info().rss
                    # PSS: shared pages (forked decoders) split among their sharers
                    size = p.memory_full_info().pss if pss else 0
                    t = p.cpu_times()
                    name = self._roles.get(p.pid) or self._roles.setdefault(p.pid, self._role(p))
            except psutil.Error:
                continue
            total, total_rss = total + size, total_rss + rss
            mine = size if p.pid == self.me.pid else mine
            key = f"{name} {p.pid}"
            self.per_proc[key] = max(self.per_proc.get(key, 0), size)
            f = self.procs.setdefault(key, [0, 0, 0, 0, True])
            f[0], f[1], f[4] = rss, max(f[1], rss), True
            if pss:
                f[2], f[3] = size, max(f[3], size)
            seen[p.pid] = t.user + t.system + getattr(t, "children_user", 0) + getattr(t, "children_system", 0)
        if pss or len(seen) < len(self._procs):
            for key, f in self.procs.items():
                if int(key.rsplit(" ", 1)[1]) not in seen:
                    f[4] = False  # ended or lost (a worker the nanny killed): its last figures stay
        for pid in set(self._cpu) - set(seen):
            if pid != self.me.pid:
                self.cpu_dead += self._cpu.pop(pid)
        self._cpu.update(seen)
        self.peak_rss = max(self.peak_rss, total_rss)
        self.last_rss = total_rss
        if pss:
            self.last_pss = total
            ph = self.by_phase.setdefault(self.phase, [0, 0])
            ph[0], ph[1] = max(ph[0], total), max(ph[1], mine)
        if total > self.peak:
            self.peak, self.peak_phase = total, self.phase

    def _role(self, p: Any) -> str:
        """What a process of the tree is: this client (with the scheduler and the nannies: a LocalCluster's
        nannies run in its event loop), a worker (a child of it), a decoder (a worker's child), or a helper
        of multiprocessing."""
        if p.pid == self.me.pid:
            return "client+scheduler"
        cmd = " ".join(p.cmdline())
        if "resource_tracker" in cmd or "forkserver" in cmd:
            return "mp-helper"
        parent = self._roles.get(p.ppid(), "client+scheduler" if p.ppid() == self.me.pid else "")
        role = {"client+scheduler": "worker", "nanny": "worker"}.get(parent, "decoder")
        if parent == "client+scheduler" and "nanny" in cmd.lower():  # nannies as processes of their own
            role = "nanny"
        return role

    def procs_gb(self) -> dict[str, dict[str, Any]]:
        """Every process seen: RSS and PSS now (as last sampled) and at their peaks, GB; whether still alive."""
        return {k: {"rss": round(f[0] / 1e9, 3), "peak_rss": round(f[1] / 1e9, 3), "pss": round(f[2] / 1e9, 3),
                    "peak_pss": round(f[3] / 1e9, 3), "alive": f[4]} for k, f in self.procs.items()}  # fmt: skip

    def procs_line(self) -> str:
        """The per-process figures on one line: ``role pid RSS now/peak, PSS now/peak`` (GB)."""
        items = list(self.procs.items())
        # ended decoders (one per event file batch: a hundred at 200 M events) as one figure: their number and
        # largest peaks; every other process (a lost worker too) with its own
        ended = [f for k, f in items if k.startswith("decoder ") and not f[4]]
        text = [
            f"{k}{'' if f[4] else ' (gone)'} {f[0] / 1e9:.2f}/{f[1] / 1e9:.2f} {f[2] / 1e9:.2f}/{f[3] / 1e9:.2f}"
            for k, f in items
            if f[4] or not k.startswith("decoder ")
        ]
        if ended:
            rss, pss = max(f[1] for f in ended), max(f[3] for f in ended)
            text.append(f"{len(ended)} decoders ended (largest peaks {rss / 1e9:.2f} RSS, {pss / 1e9:.2f} PSS)")
        return "; ".join(text)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self.own_cpu = time.thread_time()  # what the sampling itself costs
            self._stop.wait(self.every)

    def cpu(self) -> float:
        """CPU seconds (user + system) of the tree so far (ended descendants included, as last sampled)."""
        self.sample()
        return sum(self._cpu.values()) + self.cpu_dead

    def stop(self) -> None:
        self._stop.set()
        self._t.join()
        self._last_pss = 0.0
        self.sample()


def progress(mon: TreeRSS, spilled: list[int], every: float, t0: float) -> None:
    """Print (on stderr) the phase, the time since ``t0`` and the tree's memory every ``every`` seconds and at
    each change of phase, until ``mon`` stops: a long run shows where it is."""
    last = None
    next_at = 0.0
    while not mon._stop.is_set():
        now = time.perf_counter()
        if mon.phase != last or now >= next_at:
            print(f"[{now - t0:7.1f} s] {mon.phase}: tree RSS {mon.last_rss / 1e9:.2f} GB (PSS {mon.last_pss / 1e9:.2f}"
                  f" GB), peak PSS {mon.peak / 1e9:.2f} GB, spilled {spilled[0] / 1e9:.2f} GB\n"
                  f"    per process (RSS now/peak, PSS now/peak, GB): {mon.procs_line()}",
                  file=sys.stderr, flush=True)  # fmt: skip
            last, next_at = mon.phase, now + every
        mon._stop.wait(0.5)


def _passes() -> dict[str, Any]:
    from perflow.passes.critical_path import critical_path
    from perflow.passes.pop import pop_metrics
    from perflow.passes.waitstates import wait_states

    return {"wait_states": wait_states, "critical_path": critical_path, "pop_metrics": pop_metrics}


def _dir_bytes(path: str) -> int:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file()) if os.path.isdir(path) else 0


def _result_dir(save: str, path: str, engine: str) -> Path:
    """Where one engine's results of ``path`` are saved: ``<save>/<trace name>.<engine>``."""
    return Path(save, f"{Path(path).resolve().name}.{engine}")


def dask_child(path: str, a: argparse.Namespace, keep: bool) -> dict[str, Any]:
    """Load and analyse ``path`` on a LocalCluster, in this fresh process; figures of the whole tree.

    With ``keep``, the results are saved as Parquet files under ``a.save`` (:mod:`scale_results`).
    """
    from perflow.dask import Engine

    fns = _passes()
    mon = TreeRSS()
    spill = tempfile.mkdtemp(prefix="perflow-spill-", dir=a.spill)
    out: dict[str, Any] = {"times": {}, "workers": a.workers, "limit_gb": a.memory / a.workers / 1e9}
    spilled = [0]

    def watch_spill() -> None:
        while not mon._stop.is_set():
            spilled[0] = max(spilled[0], _dir_bytes(spill))
            mon._stop.wait(1.0)

    threading.Thread(target=watch_spill, daemon=True).start()
    t_all = time.perf_counter()
    if a.progress:
        threading.Thread(target=progress, args=(mon, spilled, a.progress, t_all), daemon=True).start()
    mon.phase = "cluster"
    import dask

    # the running task's working set (about 0.5 GB at 3 M events per partition) must fit between the
    # managed memory Dask keeps in memory (target) and the pause threshold (0.8 of the limit)
    dask.config.set({"distributed.worker.memory.target": a.target, "distributed.worker.memory.spill": a.target + 0.1})
    try:
        with Engine(
            n_workers=a.workers, threads_per_worker=1, memory_limit=int(a.memory / a.workers), local_directory=spill
        ) as eng:
            out["times"]["cluster"] = time.perf_counter() - t_all
            cpu0 = mon.cpu()
            t0 = time.perf_counter()
            mon.phase = "load"
            opts = {"n_partitions": a.parts} if a.parts else {}
            if not a.parts and a.events_per_part:
                from perflow.readers.otf2._decode import read_defs

                n = float(sum(read_defs(path)[1].loc_events))
                opts["n_partitions"] = max(a.workers, int(-(-n // a.events_per_part)))
            dt = eng.load(path, **opts)
            if a.stream_above is not None:  # replay plans of traces past this many events stay on the workers
                dt.runtime.stream_replay_above = a.stream_above
            pag = dt.pag()
            out["times"]["load"] = time.perf_counter() - t0
            res = {}
            for name, f in fns.items():
                mon.phase = name
                t = time.perf_counter()
                res[name] = f(pag)
                out["times"][name] = time.perf_counter() - t
            out["cpu"] = mon.cpu() - cpu0
            out["monitor_cpu"] = mon.own_cpu
            out["wall"] = time.perf_counter() - t0
            out["events"] = dt.n_events
            out["partitions"] = dt.n_parts
            out["gathered"] = sorted(pag.gathered)
            out["phases"] = {k: round(v, 2) for k, v in dt.timings.items()}
            if keep:
                mon.phase = "results"  # the sorted tables written to Parquet: the benchmark's own memory
                t = time.perf_counter()
                out["saved_rows"] = scale_results.save(res, _result_dir(a.save, path, "dask"))
                out["times"]["save"] = time.perf_counter() - t
            del res, pag, dt
    except BaseException:  # the figures so far (lost workers included) before the error
        mon.stop()
        print(f"failed in {mon.phase}; per process (RSS now/peak, PSS now/peak, GB): {mon.procs_line()}",
              file=sys.stderr, flush=True)  # fmt: skip
        raise
    mon.stop()
    out["peak_gb"] = mon.peak / 1e9
    out["peak_rss_sum_gb"] = mon.peak_rss / 1e9
    out["peak_phase"] = mon.peak_phase
    out["per_proc_gb"] = {k: round(v / 1e9, 2) for k, v in sorted(mon.per_proc.items())}
    out["procs_gb"] = mon.procs_gb()
    out["phase_peaks_gb"] = {k: [round(t / 1e9, 2), round(c / 1e9, 2)] for k, (t, c) in mon.by_phase.items()}
    out["spilled_gb"] = spilled[0] / 1e9
    shutil.rmtree(spill, ignore_errors=True)
    return out


def local_child(path: str, save: str) -> dict[str, Any]:
    """The local engine (``perflow.read`` and the passes) in this fresh process; results saved under ``save``."""
    import perflow

    fns = _passes()
    c = resource.getrusage(resource.RUSAGE_SELF)
    t = time.perf_counter()
    pag = perflow.read(path)
    res = {name: f(pag) for name, f in fns.items()}
    e = resource.getrusage(resource.RUSAGE_SELF)
    wall = time.perf_counter() - t
    rows = scale_results.save(res, _result_dir(save, path, "local"))
    return {
        "wall": wall,
        "cpu": e.ru_utime + e.ru_stime - c.ru_utime - c.ru_stime,
        "peak_gb": e.ru_maxrss / 1e6,  # ru_maxrss is in KiB: GB to 2.4 %
        "saved_rows": rows,
    }


def _run_child(args: list[str], timeout: float) -> dict[str, Any]:
    """This benchmark in a fresh process (as :func:`bench_dask._child`) with its stderr shown as it goes (the
    progress lines, Dask's warnings); its JSON line."""
    env = dict(os.environ, PERFLOW_JIT="compile")
    p = subprocess.run([sys.executable, __file__, *args], stdout=subprocess.PIPE, text=True, timeout=timeout, env=env)
    if p.returncode:
        raise RuntimeError(f"{' '.join(args)} failed (exit {p.returncode}; its messages above)")
    return json.loads(p.stdout.strip().splitlines()[-1])


def _compare(save: str, path: str) -> int:
    """Compare the two engines' saved results of ``path`` when both are saved (1: they differ)."""
    dask, local = _result_dir(save, path, "dask"), _result_dir(save, path, "local")
    if not (dask.exists() and local.exists()):
        print(f"   results saved under {save}; run the other engine to compare")
        return 0
    lines, diff = scale_results.compare(dask, local)
    for line in lines:
        print(f"   {line}")
    print(f"   Dask and local results {'EQUAL' if not diff else 'DIFFER: ' + '; '.join(diff)}"
          f" (floats exact or to a relative {scale_results.RTOL:g})")  # fmt: skip
    return int(bool(diff))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", nargs="+", help="OTF2 archive directories, smallest first")
    ap.add_argument("--make", type=float, nargs="+", help="write the traces with these event counts when absent")
    ap.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--memory", type=float, default=6e9, help="memory limit shared by the workers, bytes (6e9)")
    ap.add_argument("--parts", type=int, help="partitions (default: one per --events-per-part events)")
    ap.add_argument("--events-per-part", type=float, default=4e6, help="events per partition (default 4e6)")
    ap.add_argument("--spill", default=None, help="parent of the workers' local (spill) directory (default: tmp)")
    ap.add_argument(
        "--stream-above",
        type=float,
        default=None,
        help="stream the replay of traces past this many events (default: the Dask runtime's, 3e7)",
    )
    ap.add_argument(
        "--target",
        type=float,
        default=0.45,
        help="fraction of a worker's limit its results may take in memory before Dask spills them "
        "(distributed.worker.memory.target; spill at 0.1 more; default 0.45, Dask's own 0.6)",
    )
    ap.add_argument("--check", action="store_true", help="compare with the local engine (needs its memory)")
    ap.add_argument("--save", help="save each engine's results in this directory and compare them when both are")
    ap.add_argument("--local-only", action="store_true", help="run only the local engine (with --save)")
    ap.add_argument(
        "--progress",
        type=float,
        default=30.0,
        help="print the phase, elapsed time and tree memory every this many seconds (0: never)",
    )
    ap.add_argument("--timeout", type=float, default=7200)
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        kind, path = a.child
        print(json.dumps(local_child(path, a.save) if kind == "local" else dask_child(path, a, kind == "keep")))
        return 0
    if not a.trace:
        ap.error("--trace is required")
    if a.local_only and not a.save:
        ap.error("--local-only needs --save")
    tmp_save = tempfile.mkdtemp(prefix="perflow-scale-") if a.check and not a.save else None
    a.save = a.save or tmp_save
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start")
    if a.make:
        for p, n in zip(a.trace, a.make):
            make(Path(p), n, 64)
    flags = ["--workers", str(a.workers), "--memory", str(a.memory), "--events-per-part", str(a.events_per_part)]
    flags += ["--parts", str(a.parts)] if a.parts else []
    flags += ["--spill", a.spill] if a.spill else []
    flags += ["--stream-above", str(a.stream_above)] if a.stream_above is not None else []
    flags += ["--save", a.save] if a.save else []
    flags += ["--progress", str(a.progress), "--target", str(a.target)]
    runs, bad = [], 0
    for path in a.trace:
        if a.local_only:
            loc = _child(["--save", a.save, "--child", "local", path], a.timeout, __file__)
            print(
                f"\n== {path}: local engine: wall {loc['wall']:.1f} s, CPU {loc['cpu']:.1f} s, peak {loc['peak_gb']:.2f} GB"
            )
            bad += _compare(a.save, path)
            continue
        r = _run_child([*flags, "--child", "keep" if a.check or a.save else "dask", path], a.timeout)
        runs.append(r)
        print(f"\n== {path}: {r['events']:,} events, {r['partitions']} partitions on {a.workers} workers "
              f"(limit {r['limit_gb']:.2f} GB each)")  # fmt: skip
        print(f"   wall {r['wall']:.1f} s (load and passes), CPU {r['cpu']:.1f} s (whole tree; of it "
              f"{r.get('monitor_cpu', 0):.1f} s sampling memory), peak resident of "
              f"the tree {r['peak_gb']:.2f} GB PSS (during {r['peak_phase']}; sum of RSS {r['peak_rss_sum_gb']:.2f} GB), "
              f"spilled {r['spilled_gb']:.2f} GB")  # fmt: skip
        print("   " + ", ".join(f"{k} {v:.1f} s" for k, v in r["times"].items()))
        print("   phases: " + ", ".join(f"{k} {v} s" for k, v in r["phases"].items()))
        print(
            "   peak PSS per phase (tree, client): "
            + ", ".join(f"{k} {t:.2f}/{c:.2f} GB" for k, (t, c) in r.get("phase_peaks_gb", {}).items())
        )
        print("   per process (RSS last/peak, PSS last/peak, GB; a decoder or a lost worker as it ended): "
              + "; ".join(f"{k}{'' if v['alive'] else ' (gone)'} {v['rss']:.2f}/{v['peak_rss']:.2f} "
                          f"{v['pss']:.2f}/{v['peak_pss']:.2f}" for k, v in r.get("procs_gb", {}).items()))  # fmt: skip
        print(f"   gathered to the client: {r['gathered'] or 'nothing'}")
        if a.check:
            loc = _child(["--save", a.save, "--child", "local", path], a.timeout, __file__)
            print(f"   local engine: wall {loc['wall']:.1f} s, CPU {loc['cpu']:.1f} s, peak {loc['peak_gb']:.2f} GB")
        if a.save:
            bad += _compare(a.save, path)
        sys.stdout.flush()
    if len(runs) > 1:
        s, b = runs[0], runs[-1]
        n = b["events"] / s["events"]
        print(f"\n== {b['events'] / 1e6:.0f} M / {s['events'] / 1e6:.0f} M events (x{n:.1f}): wall x"
              f"{b['wall'] / s['wall']:.2f}, CPU x{b['cpu'] / s['cpu']:.2f}")  # fmt: skip
    print(f"load average at the end {os.getloadavg()[0]:.2f}")
    if tmp_save:
        shutil.rmtree(tmp_save, ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
