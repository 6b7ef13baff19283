"""What-if predictions against measured runs: programs with a compile-time fix, recorded slow, run fixed.

Each program of ``tests/recorder/programs/whatif_*.c`` has an injected problem that ``-DFIXED`` removes
or shrinks. The slow build is recorded with ``perflow record -n 2`` (two ranks: one core each); the
what-if replay of that recording predicts the runtime of the fixed build, which is then run three times
(without the recorder) and measured by the program itself (between a barrier after MPI_Init and one
before MPI_Finalize: the replay's region ``init_finalize``). The table also shows what subtracting the
function's time would predict.

Two builds per program: ``sampled`` (``mpicc -O2 -g``, computation that spins for a wall-clock time,
recorded with timer samples at --rate Hz) and ``instrumented`` (``perflow cc``, work that sleeps: its
durations do not depend on getting a core, which keeps the comparison meaningful on a loaded machine).

Usage::

    python benchmarks/whatif_programs.py                 # both builds, every program
    python benchmarks/whatif_programs.py --builds instrumented --runs 5
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PROGRAMS = ROOT / "tests" / "recorder" / "programs"

#: program, arguments, the scenario that -DFIXED makes, the function and the scale it applies
CASES = [
    ("whatif_overlap", ["10", "10", "80", "50"], "slow_a@0=0", "slow_a", 0.0),
    ("whatif_pipeline", ["12", "60", "30"], "produce=0.25", "produce", 0.25),
    ("whatif_rendezvous", ["10", "30", "90"], f"late_work={1 / 6:.6f}", "late_work", 1 / 6),
]

for _k in ("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "OMPI_MCA_rmaps_base_oversubscribe"):
    os.environ.setdefault(_k, "1")
os.environ.setdefault("OMPI_MCA_mpi_yield_when_idle", "1")  # waiting ranks leave the core to the other


def compile_program(name: str, build: str, fixed: bool, out: Path) -> Path:
    """Compile one build of a program; the executable's path."""
    exe = out / f"{name}-{build}{'-fixed' if fixed else ''}"
    flags = ["-O2", "-g", *(["-DFIXED"] if fixed else []), *(["-DSLEEP"] if build == "instrumented" else [])]
    src = str(PROGRAMS / f"{name}.c")
    if build == "instrumented":
        from perflow.recorder.instrument import instrumented_argv

        argv = instrumented_argv(["mpicc"], [*flags, "-o", str(exe), src])
    else:
        argv = ["mpicc", *flags, "-o", str(exe), src]
    subprocess.run(argv, check=True, capture_output=True, text=True, cwd=out)
    return exe


def elapsed(argv: list[str]) -> float:
    """The program's own elapsed time of one plain run on two ranks."""
    p = subprocess.run(["mpirun", "-n", "2", *argv], capture_output=True, text=True, timeout=300, check=True)
    m = re.search(r"elapsed ([0-9.]+)", p.stdout)
    if not m:
        raise RuntimeError(f"no elapsed time in the output of {argv}: {p.stdout!r} {p.stderr!r}")
    return float(m.group(1))


def predict(rec: Path, scenario: str, function: str, scale: float) -> dict[str, float]:
    """The what-if prediction of a recording, and the naive one (the recorded runtime minus the time saved)."""
    import numpy as np

    import perflow
    from perflow.passes._roi import trace_window
    from perflow.passes._whatif import _vertex_time, replay_plan, resolve_vertices
    from perflow.passes.whatif import what_if

    pag = perflow.read(str(rec))
    t = what_if(pag, scenarios=[scenario], span="init_finalize")["what_if"].iloc[0]
    w0, w1, _ = trace_window(pag, "what_if", span="init_finalize")
    vmap = np.full(pag.n_vertices, -1, np.int64)
    vmap[resolve_vertices(pag, function, "what_if")] = 0
    f_time = float(_vertex_time(replay_plan(pag, "what_if"), vmap, 1, (w0, w1)).sum())  # the function, callees too
    T = float(t["runtime [s]"])
    return {"recorded": T, "predicted": float(t["runtime_if [s]"]), "naive": T - (1 - scale) * f_time}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--builds", nargs="*", default=["instrumented", "sampled"], choices=["instrumented", "sampled"])
    ap.add_argument("--runs", type=int, default=3, help="plain runs of each build (the median counts)")
    ap.add_argument("--rate", type=int, default=1000, help="sampling rate of the sampled builds (Hz)")
    a = ap.parse_args(argv)
    from perflow.recorder.session import record

    rows = []
    with tempfile.TemporaryDirectory(prefix="perflow-whatif-") as tmp:
        out = Path(tmp)
        for build in a.builds:
            for name, args, scenario, function, scale in CASES:
                slow = compile_program(name, build, False, out)
                fixed = compile_program(name, build, True, out)
                rec = out / f"rec-{name}-{build}"
                with open(out / "log", "a") as log:
                    res = record([str(slow), *args], nprocs=2, outdir=rec, sample_rate=a.rate, stdout=log, stderr=log)
                if res.status != 0:
                    raise RuntimeError(f"recording {name} ({build}) failed with status {res.status}")
                p = predict(rec, scenario, function, scale)
                m_slow = statistics.median(elapsed([str(slow), *args]) for _ in range(a.runs))
                m_fixed = statistics.median(elapsed([str(fixed), *args]) for _ in range(a.runs))
                rows.append((name, build, scenario, m_slow, p["recorded"], m_fixed, p["predicted"], p["naive"]))
    print(f"{'program':18s} {'build':12s} {'scenario':22s} {'slow':>7s} {'rec.':>7s} {'fixed':>7s} "
          f"{'pred.':>7s} {'err':>6s} {'naive':>7s} {'err':>6s}")  # fmt: skip
    for name, build, sc, ms, rec, mf, pr, nv in rows:
        print(f"{name:18s} {build:12s} {sc:22s} {ms:7.3f} {rec:7.3f} {mf:7.3f} {pr:7.3f} "
              f"{100 * (pr - mf) / mf:+5.1f}% {nv:7.3f} {100 * (nv - mf) / mf:+5.1f}%")  # fmt: skip
    print(
        "\nslow / fixed: median of the plain runs' own elapsed time (s); rec.: the recording's region "
        "init_finalize; pred.: what_if's runtime_if of the recording; naive: rec. minus the time saved"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
