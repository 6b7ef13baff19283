"""The smallest injected imbalance that root_cause, critical_path and backtracking still name.

The halo_slow test programs (``tests/recorder/programs``) run a halo exchange
and an allreduce every iteration; one rank also runs ``slow_compute`` with
``extra`` inner sweeps. This script records a program with ``perflow record
-n 4`` for decreasing ``extra``, sampling only and with compiler
instrumentation (what ``perflow cc/cxx/fc`` adds), runs the three flows on
each recording and reports, per flow, whether its top row names
``slow_compute`` on the slow rank:

* ``root_cause``: the first row of ``causes`` (long-term delay costs) and its
  ``top_process``;
* ``critical_path``: the first row of ``imbalance`` (critical-path
  imbalance per call path) and the process holding most of that call path's
  time on the path (``segments``);
* ``backtracking``: the first row of ``root_causes`` and its process.

The imbalance is measured, not assumed: the mean waiting time of the other
ranks per allreduce (``imbalance/it``), also as a share of the iteration
time (``share``). Each point is recorded ``--reps`` times; a flow counts as
finding the function at that point when it names it in every repetition.

Usage::

    python benchmarks/bench_smallest_imbalance.py [--program halo_slow.c] [--modes sampled inst]
        [--extra 40000 20000 10000 ...] [--iterations 10] [--reps 3] [--sample-rate 1000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from perflow.recorder.instrument import instrumented_argv  # noqa: E402
from perflow.recorder.session import DEFAULT_SAMPLE_RATE, record  # noqa: E402
from perflow.recorder.toolchain import build_library, find_toolchain  # noqa: E402

PROGRAMS = REPO / "tests" / "recorder" / "programs"
FLOWS = ("root_cause", "critical_path", "backtracking")
#: program -> (compile flags, the slow function's name as resolved)
KNOWN = {
    "halo_slow.c": (["-O2"], "slow_compute"),
    "halo_slow.cpp": (["-O3"], "halo::Grid::slow_compute(long)"),
    "halo_slow_mpifh.f90": (["-O2"], "slow_compute"),
    "halo_slow_mpi.f90": (["-O2"], "halo_kernels::slow_compute"),
    "halo_slow_f08.f90": (["-O2"], "halo_kernels::slow_compute"),
}


def build(source: str, out: Path, mpicc: str, instrument: bool) -> str:
    """Compile a test program (instrumented as ``perflow cc/cxx/fc`` would)."""
    cc = mpicc.replace(
        "mpicc", "mpicxx" if source.endswith(".cpp") else "mpifort" if source.endswith(".f90") else "mpicc"
    )
    argv = [cc, *KNOWN[source][0], "-g", "-o", str(out), str(PROGRAMS / source)]
    if instrument:
        argv = instrumented_argv(argv[:1], argv[1:])
    subprocess.run(argv, check=True, timeout=300, cwd=out.parent, capture_output=True)
    return str(out)


def top_causes(pag) -> dict[str, tuple[int, int]]:  # noqa: ANN001
    """(vertex, process) of the top row of each flow."""
    import perflow

    out = {}
    r = perflow.run("root_cause", pag=pag, outputs=["causes"], jobs=1)["causes"]
    out["root_cause"] = (int(r["vertex"].iloc[0]), int(r["top_process"].iloc[0])) if len(r) else (-1, -1)
    res = perflow.run("critical_path", pag=pag, outputs=["imbalance", "segments"], jobs=1)
    imb, seg = res["imbalance"], res["segments"]
    if len(imb):
        v = int(imb["vertex"].iloc[0])
        s = seg[seg["vertex"] == v]
        by = (s["end"] - s["start"]).groupby(s["process"]).sum()
        out["critical_path"] = (v, int(by.idxmax()) if len(by) else -1)
    else:
        out["critical_path"] = (-1, -1)
    b = perflow.run("backtracking", pag=pag, outputs=["root_causes"], jobs=1)["root_causes"]
    out["backtracking"] = (int(b["vertex"].iloc[0]), int(b["process"].iloc[0])) if len(b) else (-1, -1)
    return out


def measured_imbalance(pag, slow: int) -> tuple[float, float]:  # noqa: ANN001
    """Mean wait of the other ranks per allreduce (s), and that as a share of the mean iteration time."""
    iv = pag.trace.intervals
    names = pag.vertex_table["name"].astype(str).to_numpy()
    ar = iv[names[iv["vertex"].to_numpy()] == "MPI_Allreduce"]
    if not len(ar):
        return float("nan"), float("nan")
    c = pag.trace.collectives
    c = c[c["interval"].isin(ar.index)]
    last = c.groupby("instance")["begin"].transform("max")
    others = c[c["process"] != slow]
    wait = float((last[others.index] - others["begin"]).mean())
    n_it = c["instance"].nunique()
    ends = c.groupby("instance")["end"].max().sort_values().to_numpy()
    step = float(np.diff(ends).mean()) if n_it > 1 else float("nan")
    return wait, wait / step if step > 0 else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--program", default="halo_slow.c", choices=sorted(KNOWN))
    ap.add_argument("--modes", nargs="*", default=["sampled", "inst"], choices=["sampled", "inst"])
    ap.add_argument("--extra", nargs="*", type=int, default=[40000, 20000, 10000, 5000, 2500, 1200, 600, 300])
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--work", type=int, default=1000, help="relax() sweeps per iteration on every rank")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument(
        "--sample-rate",
        type=int,
        default=DEFAULT_SAMPLE_RATE,
        help=f"timer samples per second ({DEFAULT_SAMPLE_RATE})",
    )
    args = ap.parse_args()
    for k in ("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "OMPI_MCA_rmaps_base_oversubscribe"):
        os.environ.setdefault(k, "1")
    from perflow.trace.build import build_pag

    tc = find_toolchain("openmpi")
    build_library(tc)
    fname = KNOWN[args.program][1]
    slow = 3
    print(
        f"{args.program}: 4 ranks on {os.cpu_count()} cores, {args.iterations} iterations, relax {args.work} sweeps, "
        f"{args.sample_rate} Hz sampling, {args.reps} recordings per point; load {os.getloadavg()[0]:.2f}"
    )
    head = f"{'mode':<8}{'extra':>7}{'imbalance/it':>14}{'share':>8}" + "".join(f"{f:>15}" for f in FLOWS)
    print(head)
    print("-" * len(head))
    smallest: dict[tuple[str, str], tuple[int, float]] = {}
    missed: set[tuple[str, str]] = set()  # (mode, flow) that failed once: smaller points do not count
    with tempfile.TemporaryDirectory(prefix="perflow-imb-") as tmp:
        tmpd = Path(tmp)
        for mode in args.modes:
            exe = build(args.program, tmpd / f"prog-{mode}", tc.mpicc, mode == "inst")
            for extra in args.extra:
                hits = dict.fromkeys(FLOWS, 0)
                imb, share = [], []
                for rep in range(args.reps):
                    with open(os.devnull, "w") as dn:
                        res = record(
                            [exe, str(args.iterations), str(args.work), str(extra), str(slow)],
                            nprocs=4,
                            outdir=tmpd / f"run-{mode}-{extra}-{rep}",
                            outputs=(),
                            sample_rate=args.sample_rate,
                            stdout=dn,
                            stderr=dn,
                            timeout=600,
                        )
                    pag = build_pag(res.raw)
                    names = pag.vertex_table["name"].astype(str).to_numpy()
                    for flow, (v, p) in top_causes(pag).items():
                        hits[flow] += int(v >= 0 and names[v] == fname and p == slow)
                    w, s = measured_imbalance(pag, slow)
                    imb.append(w)
                    share.append(s)
                cells = "".join(f"{f'{hits[f]}/{args.reps}':>15}" for f in FLOWS)
                wait = float(np.median(imb))
                print(f"{mode:<8}{extra:>7}{wait * 1e3:>11.2f} ms{float(np.median(share)):>8.1%}{cells}", flush=True)
                for f in FLOWS:
                    if hits[f] < args.reps:
                        missed.add((mode, f))
                    elif (mode, f) not in missed:
                        smallest[(mode, f)] = (extra, wait)
    print(
        "\nsmallest imbalance named in every recording down to it (extra sweeps, median wait of the others per allreduce):"
    )
    for mode in args.modes:
        for f in FLOWS:
            e = smallest.get((mode, f))
            print(f"  {mode:<8}{f:<15}" + (f"extra {e[0]:>6}  {e[1] * 1e3:8.2f} ms" if e else "not found at any point"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
