"""Real applications recorded without recompiling: overhead, sample coverage and what the flows name.

Each application (built by you outside the repository, e.g. NPB CG/MG, HPCCG,
CoMD, LULESH with ``mpicc -O2 -g``) is run plain and recorded, alternating,
``--reps`` times each; the figures are the wall time of the launcher run and
the CPU time (user + system) of all its processes, medians. The last
recording is then analysed: samples per rank-second (of the run, of the
computation, i.e. rank time outside MPI calls, and of the computation on the
CPU, i.e. less the time off the CPU), the share of rank time left on the
program's root region and off the CPU, and the first rows of ``root_cause``
and ``critical_path``'s imbalance table.

Usage::

    python benchmarks/bench_recorded_apps.py --reps 3 \\
        --app "cg:4:/work/apps/rec/nas/bin/cg.A.x" \\
        --app "hpccg:4:/work/apps/rec/HPCCG/test_HPCCG 35 35 35" [--rate HZ] [--keep DIR]

An ``--app`` is ``NAME:RANKS:COMMAND`` (the command split like a shell
would). ``--rate`` is the sampling rate (default: the recorder's).
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from perflow.recorder.session import launch_command  # noqa: E402
from perflow.recorder.toolchain import build_library, find_toolchain, program_mpi  # noqa: E402


def _timed(cmd: list[str], env: dict[str, str], timeout: float, cwd: Path) -> tuple[float, float, int]:
    """(wall s, CPU s of the children, status) of one launcher run, in ``cwd`` (the files an app writes
    there, such as CoMD's and HPCCG's YAML reports, stay out of the directory the benchmark runs from)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=timeout)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    if p.returncode:
        sys.stderr.write(p.stderr.decode(errors="replace")[-2000:])
    return wall, cpu, p.returncode


def _label(row) -> str:  # noqa: ANN001
    src = str(row.get("source", "") or "")
    return f"{row['name']} [{Path(src).name or '?'}] p{int(row.get('top_process', row.get('process', -1)))}"


def analyse(rawdir: Path, nranks: int, top: int = 3) -> dict:
    """Figures of one recording (its ``raw/`` folder)."""
    import perflow
    from perflow.recorder import load_recording
    from perflow.recorder.summary import mpi_durations
    from perflow.sdk.profile import categories
    from perflow.trace.build import build_pag

    raw = load_recording(rawdir)
    pag = build_pag(raw)
    ev = raw.region_events
    span = float(ev["time"].max() - ev["time"].min()) if len(ev["time"]) else 0.0
    t_loc = np.zeros(len(raw.locations))
    np.maximum.at(t_loc, ev["location"], ev["time"])
    first = np.full(len(raw.locations), np.inf)
    np.minimum.at(first, ev["location"], ev["time"])
    rank_time = float((t_loc - first).sum())
    mpi = float(mpi_durations(raw)["duration"].sum())
    smp = raw.sample_events
    nsmp = len(smp["time"])
    g = pag.metrics
    cats = categories(pag)
    vt = pag.vertex_table
    exc = g.groupby(level="vertex")["time_exc"].sum() if "time_exc" in g.columns else None
    root = float(exc.get(0, 0.0)) if exc is not None else float("nan")
    off = off_out = 0.0
    if exc is not None:
        v = exc.index.to_numpy()
        is_off = cats[v] == "off_cpu"
        par = vt["parent"].to_numpy()[v]
        in_mpi = np.char.startswith(vt["name"].astype(str).to_numpy()[np.maximum(par, 0)].astype(str), "MPI_")
        off = float(exc.to_numpy()[is_off].sum())
        off_out = float(exc.to_numpy()[is_off & ~in_mpi].sum())  # outside MPI calls
    res = perflow.run("root_cause", pag=pag, outputs=["causes", "summary"], jobs=1)
    causes, summ = res["causes"], res["summary"].iloc[0]
    imb = perflow.run("critical_path", pag=pag, outputs=["imbalance"], jobs=1)["imbalance"]
    return {
        "span": span,
        "rank_time": rank_time,
        "comp_time": rank_time - mpi,
        "samples": nsmp,
        "per_rank_s": nsmp / rank_time if rank_time > 0 else 0.0,
        "per_comp_s": nsmp / (rank_time - mpi) if rank_time > mpi else 0.0,
        "per_oncpu_s": nsmp / (rank_time - mpi - off_out) if rank_time > mpi + off_out else 0.0,
        "root_share": root / rank_time if rank_time > 0 else 0.0,
        "off_share": off / rank_time if rank_time > 0 else 0.0,
        "off_out_share": off_out / rank_time if rank_time > 0 else 0.0,
        "causes": [(_label(r), float(r["percent"])) for _, r in causes.head(top).iterrows()],
        "code_causes": [
            (_label(r), float(r["percent"]))
            for _, r in causes[~causes["name"].astype(str).str.startswith("MPI_")].head(top).iterrows()
        ],
        "off_cpu_wait": float(summ.get("off_cpu", 0.0)) / float(summ["total_wait"]) if summ["total_wait"] > 0 else 0.0,
        "unattributed": float(summ["unattributed"]) / float(summ["total_wait"]) if summ["total_wait"] > 0 else 0.0,
        "imbalance": [(str(r["name"]), float(r["cpi"])) for _, r in imb.head(top).iterrows()],
        "n_vertices": int(len(vt)),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--app", action="append", required=True, help="NAME:RANKS:COMMAND")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rate", type=int, default=None, help="sampling rate in Hz (the recorder's default)")
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--keep", help="keep the recordings in this folder")
    args = ap.parse_args()
    for k in ("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "OMPI_MCA_rmaps_base_oversubscribe"):
        os.environ.setdefault(k, "1")
    tmp = (Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="perflow-apps-"))).resolve()
    tmp.mkdir(parents=True, exist_ok=True)
    print(f"{os.cpu_count()} cores; load average before: {os.getloadavg()[0]:.2f}; {args.reps} runs each, alternating")
    try:
        for spec in args.app:
            name, n, cmdline = spec.split(":", 2)
            argv = shlex.split(cmdline)
            if os.path.exists(argv[0]):  # (the apps run in the temporary folder: a relative program path)
                argv[0] = os.path.abspath(argv[0])
            nr = int(n)
            tc = find_toolchain(program_mpi(argv[0]))
            lib = build_library(tc)
            plain, rec = [], []
            rawdir = tmp / name / "raw"
            for _ in range(args.reps):
                cmd, env = launch_command(tc, nr, argv, {})
                plain.append(_timed(cmd, env, args.timeout, tmp))
                if rawdir.exists():
                    shutil.rmtree(rawdir)
                rawdir.mkdir(parents=True)
                renv = {"PERFLOW_RECORD_DIR": str(rawdir.resolve()), "LD_PRELOAD": str(lib)}
                if args.rate is not None:
                    renv["PERFLOW_RECORD_HZ"] = str(args.rate)
                cmd, env = launch_command(tc, nr, argv, renv)
                rec.append(_timed(cmd, env, args.timeout, tmp))
            wp, wr = statistics.median(x[0] for x in plain), statistics.median(x[0] for x in rec)
            cp, cr = statistics.median(x[1] for x in plain), statistics.median(x[1] for x in rec)
            a = analyse(rawdir, nr)
            print(f"\n== {name} ({nr} ranks): {cmdline}")
            print(
                f"wall   plain {', '.join(f'{x[0]:.2f}' for x in plain)}  recorded {', '.join(f'{x[0]:.2f}' for x in rec)}"
            )
            print(
                f"CPU    plain {', '.join(f'{x[1]:.2f}' for x in plain)}  recorded {', '.join(f'{x[1]:.2f}' for x in rec)}"
            )
            print(
                f"median wall {wp:.2f} -> {wr:.2f} s ({100 * (wr / wp - 1):+.1f}%), CPU {cp:.2f} -> {cr:.2f} s ({100 * (cr / cp - 1):+.1f}%)"
            )
            print(
                f"samples {a['samples']} = {a['per_rank_s']:.0f} per rank-second, {a['per_comp_s']:.0f} per rank-second "
                f"of computation ({a['comp_time']:.2f} of {a['rank_time']:.2f} rank-s), {a['per_oncpu_s']:.0f} per "
                "rank-second of computation on the CPU"
            )
            print(
                f"root region {100 * a['root_share']:.1f}% of rank time; off the CPU {100 * a['off_share']:.1f}% "
                f"({100 * a['off_out_share']:.1f}% outside MPI calls)"
            )
            print(
                f"root_cause (unattributed {100 * a['unattributed']:.1f}%, caused by time off the CPU "
                f"{100 * a['off_cpu_wait']:.1f}%):"
            )
            for lab, pct in a["causes"]:
                print(f"   {pct:5.1f}%  {lab}")
            print("first causes that are no MPI call:")
            for lab, pct in a["code_causes"]:
                print(f"   {pct:5.1f}%  {lab}")
            print("critical-path imbalance:")
            for lab, s in a["imbalance"]:
                print(f"   {s:7.3f} s  {lab}")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
