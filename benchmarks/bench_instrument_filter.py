"""Instrumented builds with the score filter against plain ones, on a real application (LULESH by default).

The application's sources are not part of perflow: give their directory
(LULESH 2.0: https://github.com/LLNL/LULESH, MPI on, OpenMP off). The script
builds three variants into ``--work``:

* ``plain``: the MPI compiler wrapper as is;
* ``default``: what ``perflow cxx`` adds (the default filter: system headers);
* ``filtered``: ``perflow cxx --filter F``, with ``F`` the filter ``perflow score``
  writes from a short first recording of ``default`` (``--score-args``);

and runs each ``--reps`` times, alternating: ``plain``, ``default`` and
``filtered`` without the recorder, ``default`` recorded and ``filtered``
recorded with ``--filter F``. Printed per run: the wall time of the
launched run and the CPU time (user + system) of the launcher and the ranks
(``RUSAGE_CHILDREN`` around the launch only, so the recorder's work after
the run is not counted), then the medians.

Usage::

    python benchmarks/bench_instrument_filter.py --src /path/to/LULESH [-n 8] [--reps 3]
        [--args "-s 15 -i 100"] [--score-args "-s 15 -i 10"] [--work DIR] [--skip-default-recorded]
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from perflow.recorder import session  # noqa: E402
from perflow.recorder.filters import read_filter  # noqa: E402
from perflow.recorder.instrument import InstrumentOptions, compiler_for, instrumented_argv  # noqa: E402
from perflow.recorder.score import score, score_filter  # noqa: E402
from perflow.recorder.toolchain import find_toolchain  # noqa: E402

LULESH = ["lulesh.cc", "lulesh-comm.cc", "lulesh-viz.cc", "lulesh-util.cc", "lulesh-init.cc"]
FLAGS = ["-DUSE_MPI=1", "-DUSE_OMP=0", "-g", "-O3", "-I."]


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _build(src: Path, out: Path, opts: InstrumentOptions | None, sources: list[str], flags: list[str]) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    cxx = compiler_for("cxx")
    objs = []
    procs = []
    for s in sources:
        obj = out / (Path(s).stem + ".o")
        argv = [*cxx, *flags, "-c", "-o", str(obj), str(src / s)]
        if opts is not None:
            argv = instrumented_argv(cxx, argv[len(cxx) :], opts)
        procs.append(subprocess.Popen(argv, cwd=src, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        objs.append(str(obj))
    for p in procs:
        if p.wait() != 0:
            raise SystemExit(f"compiling in {src} failed: {p.args}")
    exe = out / "app"
    subprocess.run([*cxx, *objs, "-g", "-O3", "-lm", "-o", str(exe)], check=True, cwd=src)
    return exe


def _plain(tc, n: int, argv: list[str]) -> tuple[float, float]:  # noqa: ANN001
    cmd, env = session.launch_command(tc, n, argv, {})
    c, t = _cpu(), time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=3600)
    return time.perf_counter() - t, _cpu() - c


def _recorded(n: int, argv: list[str], out: Path, flt: Path | None) -> tuple[float, float, int]:
    """Wall and CPU time of the launched run only (the recorder's _run), and the events recorded."""
    spent: dict[str, float] = {}
    orig = session._run

    def timed(*a, **k):  # noqa: ANN002, ANN003, ANN202
        c, t = _cpu(), time.perf_counter()
        try:
            return orig(*a, **k)
        finally:
            spent["wall"], spent["cpu"] = time.perf_counter() - t, _cpu() - c

    session._run = timed
    try:
        with open(os.devnull, "w") as null:
            res = session.record(
                argv, nprocs=n, outdir=out, filter=flt, outputs=(), stdout=null, stderr=null, timeout=7200
            )
    finally:
        session._run = orig
    return spent["wall"], spent["cpu"], len(res.raw.region_events["time"]) if res.raw is not None else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", required=True, type=Path, help="the application's source directory (LULESH 2.0)")
    ap.add_argument("--sources", default=" ".join(LULESH), help="its C++ sources")
    ap.add_argument("--flags", default=" ".join(FLAGS), help="compile flags")
    ap.add_argument("-n", type=int, default=8, help="ranks (8; LULESH needs a cube)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--args", default="-s 15 -i 100", help="arguments of the measured runs")
    ap.add_argument("--score-args", default="-s 15 -i 10", help="arguments of the first (scored) recording")
    ap.add_argument("--work", type=Path, help="build and output directory (default: a temporary one)")
    ap.add_argument("--skip-default-recorded", action="store_true", help="do not record the default build")
    a = ap.parse_args()
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    os.environ.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
    work = a.work or Path(tempfile.mkdtemp(prefix="bench-filter-"))
    sources, flags = a.sources.split(), shlex.split(a.flags)
    tc = find_toolchain()
    plain = _build(a.src, work / "plain", None, sources, flags)
    default = _build(a.src, work / "default", InstrumentOptions(), sources, flags)
    print(f"load average {os.getloadavg()[0]:.1f}; scoring a first recording of the default build ...", flush=True)
    _recorded(a.n, [str(default), *shlex.split(a.score_args)], work / "score", None)
    from perflow.trace.store import load_raw

    flt_path = work / "perflow.filter"
    flt = score_filter(score(load_raw(work / "score" / "rawtrace.npz")))
    flt_path.write_text(flt.text("bench_instrument_filter.py"))
    print(f"the filter excludes {len(flt.names)} functions ({flt_path})", flush=True)
    filtered = _build(a.src, work / "filtered", InstrumentOptions(filter=read_filter(flt_path)), sources, flags)
    args = shlex.split(a.args)
    runs: dict[str, list[tuple[float, float]]] = {}
    events: dict[str, int] = {}
    for rep in range(a.reps):
        print(f"rep {rep + 1}: load average {os.getloadavg()[0]:.1f}", flush=True)
        for name, fn in (
            ("plain", lambda: _plain(tc, a.n, [str(plain), *args])),
            ("default, not recorded", lambda: _plain(tc, a.n, [str(default), *args])),
            ("filtered, not recorded", lambda: _plain(tc, a.n, [str(filtered), *args])),
            ("default, recorded", lambda: _recorded(a.n, [str(default), *args], work / "rec-default", None)),
            ("filtered, recorded --filter", lambda: _recorded(a.n, [str(filtered), *args], work / "rec-f", flt_path)),
        ):
            if name == "default, recorded" and a.skip_default_recorded:
                continue
            r = fn()
            runs.setdefault(name, []).append(r[:2])
            if len(r) > 2:
                events[name] = r[2]
            print(f"  {name:30s} wall {r[0]:8.2f} s   cpu {r[1]:8.2f} s", flush=True)
    base_w = statistics.median(w for w, _ in runs["plain"])
    base_c = statistics.median(c for _, c in runs["plain"])
    print(f"\nmedians over {a.reps} runs ({a.n} ranks, {a.args}):")
    print(f"{'variant':30s} {'wall s':>8s} {'vs plain':>9s} {'cpu s':>8s} {'vs plain':>9s} {'events':>9s}")
    for name, rs in runs.items():
        w = statistics.median(x for x, _ in rs)
        c = statistics.median(y for _, y in rs)
        ev = f"{events[name]:,}" if name in events else ""
        print(f"{name:30s} {w:8.2f} {100 * (w / base_w - 1):+8.0f}% {c:8.2f} {100 * (c / base_c - 1):+8.0f}% {ev:>9s}")


if __name__ == "__main__":
    main()
