"""Benchmark: start-up of perflow as a user meets it, in a fresh virtual environment.

Builds a virtual environment in a temporary directory, installs perflow into it
(``pip install --no-deps --no-build-isolation``: the environment sees this
interpreter's packages, so no network is needed; see ``tests/freshenv.py``),
points the per-user cache at an empty temporary directory (``XDG_CACHE_HOME``)
and times, each in a new process, wall clock (best of ``--repeat`` runs, since
the machine is shared) and the CPU time of that run:

=========================  =================================================  ======
figure                     command                                            target
=========================  =================================================  ======
version                    ``perflow --version``                              0.3 s
help                       ``perflow --help``                                 0.3 s
import                     ``python -c "import perflow"``                     0.5 s
first run                  ``perflow run mpi_profiler --input ring8``,        5 s
                           compiled-kernel caches emptied before each run
warm run                   the same, caches filled                            1.0 s
first/warm run, compiled   the same two with ``PERFLOW_JIT=compile`` (every   --
                           kernel compiled, the path a large trace takes)
record post-processing     ``perflow record -n 2 -- ./ring``: from the        1 s
                           program's exit to the command's end (reading the
                           recording, writing rawtrace/OTF2/PAG, summary)
=========================  =================================================  ======

``record`` needs an MPI C compiler (``mpicc``) and is skipped without one.

**First contact with a real trace** (``--trace``, default a 2-million-event
trace from ``benchmarks/make_otf2_trace.py``; ``--no-trace`` skips it):
``perflow run wait_states --input TRACE`` with the compiled-kernel caches
emptied before each run, against the same run warm; CPU seconds and wall,
and the ratio first / warm (target 1.5). perflow is installed with its
kernels compiled ahead of time by the build (``setup.py``, ``perflow/_aot.py``;
``--no-aot`` installs without); the first runs are measured with the shipped
kernels and, as the figure before them, ignoring them (``PERFLOW_AOT=0``).

    python benchmarks/bench_startup.py
    python benchmarks/bench_startup.py --repeat 7 --first-repeat 3
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
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.freshenv import REPO, FreshEnv, copy_source, make_env  # noqa: E402

RING8 = REPO / "examples" / "data" / "ring8" / "traces.otf2"
TARGETS = {
    "perflow --version": 0.3,
    "perflow --help": 0.3,
    "import perflow": 0.5,
    "first run (empty caches)": 5.0,
    "warm run": 1.0,
    "record post-processing": 1.0,
}
#: first contact with a real trace: the empty-cache run within this factor of the warm run
FIRST_CONTACT_RATIO = 1.5


def trace_for_first_contact(given: str | None) -> Path:
    """The trace of the first-contact figure: ``given``, or a 2-million-event one made once."""
    if given:
        return Path(given)
    out = Path(tempfile.gettempdir()) / "perflow-bench-startup-2M"
    if not (out / "traces.otf2").exists():
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from make_otf2_trace import make_trace

        make_trace(str(out), 2e6, 64)
    return out


# Runs `perflow record` in-process and notes when the launched program returned: the post-processing is
# what follows until the command ends. Printed as "launch=<s> postprocess=<s>" on the last line.
_RECORD_PROBE = textwrap.dedent(
    """
    import resource, sys, time
    def cpu():
        s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime
    t0 = time.perf_counter()
    from perflow.cli import main as cli
    from perflow.recorder import session
    marks = {}
    _run = session._run
    def timed_run(*a, **k):
        marks["start"] = time.perf_counter()
        try:
            return _run(*a, **k)
        finally:
            marks["end"], marks["cpu"] = time.perf_counter(), cpu()
    session._run = timed_run
    rc = cli.main(sys.argv[1:])
    t1 = time.perf_counter()
    print(f"launch={marks['start'] - t0:.4f} postprocess={t1 - marks['end']:.4f} postcpu={cpu() - marks['cpu']:.4f} rc={rc}")
    """
)


def _cpu_children() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_once(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds and standard output of one run (which must succeed)."""
    c0, t0 = _cpu_children(), time.perf_counter()
    res = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=900)
    wall, cpu = time.perf_counter() - t0, _cpu_children() - c0
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stdout[-2000:]}\n{res.stderr[-4000:]}")
    return wall, cpu, res.stdout


def best_of(n: int, cmd: list[str], env: dict[str, str], cwd: Path, before: object = None) -> tuple[float, float]:
    """Best wall time of ``n`` runs and the CPU time of that run (``before()`` is called ahead of each)."""
    best = (float("inf"), 0.0)
    for _ in range(n):
        if callable(before):
            before()
        wall, cpu, _ = run_once(cmd, env, cwd)
        best = min(best, (wall, cpu))
    return best


def empty_kernel_caches(fresh: FreshEnv, cache_home: Path) -> None:
    """Remove the per-user cache and any compiled-kernel cache files numba wrote inside the installed package
    (the kernels compiled ahead of time, ``perflow/_kernels/``, are part of the installation and stay)."""
    shutil.rmtree(cache_home, ignore_errors=True)
    cache_home.mkdir(parents=True)
    pkg = fresh.site_packages / "perflow"
    for pattern in ("*.nbi", "*.nbc"):
        for f in pkg.rglob(pattern):
            if "_kernels" not in f.relative_to(pkg).parts:
                f.unlink()


def record_figure(fresh: FreshEnv, env: dict[str, str], work: Path, repeat: int) -> tuple[float, ...] | None:
    """(post-processing wall, its CPU, start-up before launch) of ``perflow record -n 2`` on the ring program."""
    mpicc = shutil.which("mpicc")
    if mpicc is None:
        print("record post-processing: skipped (no mpicc)")
        return None
    programs = REPO / "tests" / "recorder" / "programs"
    exe = work / "ring"
    subprocess.run([mpicc, "-O2", "-g", "-o", str(exe), str(programs / "ring.c")], check=True, cwd=programs)
    probe = work / "record_probe.py"
    probe.write_text(_RECORD_PROBE)
    env = dict(env, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
    cmd = [
        str(fresh.python),
        str(probe),
        "-q",
        "record",
        "-n",
        "2",
        "-o",
        str(work / "rec"),
        "--",
        str(exe),
        "20",
        "1000",
    ]
    results = []
    for i in range(repeat + 1):  # the first run builds the interposition library and fills the caches
        _, _, out = run_once(cmd, env, work)
        fields = dict(kv.split("=") for kv in out.strip().splitlines()[-1].split())
        if i:
            results.append((float(fields["postprocess"]), float(fields["postcpu"]), float(fields["launch"])))
    return min(results)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5, help="runs per figure; the best is printed (5)")
    ap.add_argument("--first-repeat", type=int, default=2, help="runs of the empty-cache first run (2)")
    ap.add_argument("--keep", metavar="DIR", help="build the environment in DIR and keep it")
    ap.add_argument("--no-record", action="store_true", help="skip the perflow record figure")
    ap.add_argument("--trace", help="trace of the first-contact figure (default: 2 M events, made once)")
    ap.add_argument("--no-trace", action="store_true", help="skip the first-contact figure")
    ap.add_argument("--only-trace", action="store_true", help="only the first-contact figure")
    ap.add_argument("--no-aot", action="store_true", help="install without compiling the kernels ahead of time")
    args = ap.parse_args()

    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="perflow-startup-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        t = time.perf_counter()
        src = copy_source(root / "src")
        fresh = make_env(root / "venv")
        fresh.install(src, aot=not args.no_aot)
        print(f"environment: {fresh.root} (built and installed in {time.perf_counter() - t:.1f} s)")
        manifest = fresh.site_packages / "perflow" / "_kernels" / "manifest.json"
        if manifest.exists():
            m = json.loads(manifest.read_text())
            print(f"kernels compiled ahead of time by the build: {m['kernels']} kernels, {m['signatures']} "
                  f"signatures in {m['seconds']} s wall, {m.get('cpu_seconds', '?')} s CPU (numba {m['numba']}, CPU {m['cpu'][1]})")  # fmt: skip
        else:
            print("no kernels compiled ahead of time (--no-aot, or the build could not)")
        cache_home = root / "cache"
        cache_home.mkdir(exist_ok=True)
        env = fresh.env(XDG_CACHE_HOME=str(cache_home))
        for k in ("NUMBA_CACHE_DIR", "PERFLOW_CACHE_DIR"):
            env.pop(k, None)
        work = root / "work"
        work.mkdir(exist_ok=True)
        perflow, python = str(fresh.perflow), str(fresh.python)
        run_cmd = [perflow, "run", "mpi_profiler", "--input", str(RING8)]

        figures: dict[str, tuple[float, float]] = {}
        if not args.no_trace:
            big = trace_for_first_contact(args.trace)
            cmd = [perflow, "-q", "run", "wait_states", "--input", str(big)]
            empty = lambda: empty_kernel_caches(fresh, cache_home)  # noqa: E731
            nonaot = best_of(args.first_repeat, cmd, dict(env, PERFLOW_AOT="0"), work, before=empty)
            first = best_of(args.first_repeat, cmd, env, work, before=empty)
            warm = best_of(args.repeat, cmd, env, work)
            figures["trace, first run, no AOT kernels"] = nonaot
            figures["wait_states on a trace, first run"] = first
            figures["wait_states on a trace, warm"] = warm
            print(f"first contact without the kernels compiled ahead of time (PERFLOW_AOT=0): {nonaot[1]:.2f} s CPU "
                  f"({nonaot[0]:.2f} s wall): / warm = {nonaot[1] / warm[1]:.2f} CPU, {nonaot[0] / warm[0]:.2f} wall")  # fmt: skip
            print(f"first contact, perflow run wait_states on {big}: first run {first[1]:.2f} s CPU "
                  f"({first[0]:.2f} s wall), warm {warm[1]:.2f} s CPU ({warm[0]:.2f} s wall): "
                  f"first / warm = {first[1] / warm[1]:.2f} CPU, {first[0] / warm[0]:.2f} wall "
                  f"(target {FIRST_CONTACT_RATIO})")  # fmt: skip
            if args.only_trace:
                return
        figures["first run, no AOT kernels"] = best_of(
            args.first_repeat, run_cmd, dict(env, PERFLOW_AOT="0"), work,
            before=lambda: empty_kernel_caches(fresh, cache_home),
        )  # fmt: skip
        figures["first run (empty caches)"] = best_of(
            args.first_repeat, run_cmd, env, work, before=lambda: empty_kernel_caches(fresh, cache_home)
        )
        figures["warm run"] = best_of(args.repeat, run_cmd, env, work)
        compiled = dict(env, PERFLOW_JIT="compile")
        figures["first run, compiled (PERFLOW_JIT)"] = best_of(
            args.first_repeat, run_cmd, compiled, work, before=lambda: empty_kernel_caches(fresh, cache_home)
        )
        figures["warm run, compiled (PERFLOW_JIT)"] = best_of(args.repeat, run_cmd, compiled, work)
        figures["perflow --version"] = best_of(args.repeat, [perflow, "--version"], env, work)
        figures["perflow --help"] = best_of(args.repeat, [perflow, "--help"], env, work)
        figures["import perflow"] = best_of(args.repeat, [python, "-c", "import perflow"], env, work)
        figures["python (no perflow)"] = best_of(args.repeat, [python, "-c", "pass"], env, work)
        rec = None if args.no_record else record_figure(fresh, env, work, max(1, args.repeat // 2))
        if rec is not None:
            figures["record post-processing"] = (rec[0], rec[1])
            figures["record start-up before launch"] = (rec[2], float("nan"))

        pkg = fresh.site_packages / "perflow"
        files = [p.relative_to(pkg) for p in pkg.rglob("*") if p.suffix in (".nbi", ".nbc")]
        written = [str(p) for p in files if "_kernels" not in p.parts]  # by numba at run time: must be none
        print(f"\n{'figure':34s} {'wall s':>8s} {'cpu s':>8s} {'target':>8s}")
        for name, (wall, cpu) in figures.items():
            target = TARGETS.get(name)
            mark = "" if target is None else ("  ok" if wall <= target else "  OVER")
            tgt = f"{target:8.1f}" if target else " " * 8
            cpu_s = f"{cpu:8.2f}" if cpu == cpu else " " * 8
            print(f"{name:34s} {wall:8.2f} {cpu_s} {tgt}{mark}")
        print(f"(best of {args.repeat} runs; first run best of {args.first_repeat}; {os.cpu_count()} CPUs)")
        print(f"compiled-kernel files shipped by the build (perflow/_kernels): {len(files) - len(written)}; "
              f"written inside the installed package at run time: {len(written)}")  # fmt: skip
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
