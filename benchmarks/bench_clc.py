"""Cost of the clock correction on an OTF2 trace: read + wait states with clock_correction off, auto and on.

Usage::

    python benchmarks/bench_clc.py --events 2e6            # writes the trace with make_otf2_trace.py
    python benchmarks/bench_clc.py --trace /tmp/otf2-20M/traces.otf2 --repeat 3

Each mode runs in its own process (after a warm-up that compiles the
kernels) and times, on one core, in CPU seconds (user + sys of the
process) and wall seconds, the median of ``--repeat`` runs of: decoding the
trace (in the decoder's worker processes: wall time only means something),
building the PAG (``build_pag(raw, clock_correction=mode, jobs=1)``, where the
correction happens) and the wait states (``WAIT_INSTANCES``); the
comparison is the CPU time of build + wait states. The modes:

* ``off``: no correction, no check;
* ``auto`` (the default): the build checks its tables for violations
  (``clc.built_violations``); the generated trace has none, so this is the
  default's overhead on a consistent trace;
* ``on``: the controlled logical clock always runs (happens-before graph,
  forward and backward amortisation), then the build;
* ``skewed``: rank 1's clock is set 50 ms back, drifting -1 ms/s
  (``clc.skew_clock``), and read with ``auto``: the build finds the
  violations, corrects and builds again (the figure a user with a drifting
  cluster sees).

``clc.correct`` is also timed alone. Figures are printed; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MODES = ("off", "auto", "on", "skewed")


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _timed(fn: Any) -> tuple[Any, float, float]:
    w, c = time.perf_counter(), _cpu()
    out = fn()
    return out, _cpu() - c, time.perf_counter() - w


def _warm_up() -> None:
    from perflow import synthetic
    from perflow.trace import clc
    from perflow.trace.analyses import WAIT_INSTANCES
    from perflow.trace.build import build_pag

    raw = synthetic.raw_trace(nprocs=4, iterations=3, late_sender=0.2, seed=1)
    pag = build_pag(clc.skew_clock(raw, 1, -0.5), clock_correction="on")
    pag.analyses.get(WAIT_INSTANCES)


def _one_run(trace: str, mode: str, info: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """One decode + build + wait states; (CPU s, wall s) per step."""
    from perflow.readers.otf2 import decode
    from perflow.trace import clc
    from perflow.trace.analyses import WAIT_INSTANCES
    from perflow.trace.build import build_pag

    out: dict[str, tuple[float, float]] = {}
    raw, *out["decode"] = _timed(lambda: decode(trace))  # worker processes: its CPU time is not this one's
    if mode == "skewed":
        raw = clc.skew_clock(raw, 1, -0.05, -1e-3)
    if mode in ("on", "skewed"):
        (_, rep), *out["clc.correct alone"] = _timed(lambda: clc.correct(raw))
        info["report"] = rep.as_dict()
    how = "auto" if mode == "skewed" else mode
    pag, *out["build_pag"] = _timed(lambda: build_pag(raw, clock_correction=how, jobs=1))
    waits, *out["wait states"] = _timed(lambda: pag.analyses.get(WAIT_INSTANCES))
    info["events"] = raw.n_events
    info["waiting_s"] = float(waits["amount"].sum())
    info["clock_violations_left"] = int(pag.trace.messages["clock_violation"].sum())
    out["build+waits"] = tuple(out["build_pag"][i] + out["wait states"][i] for i in (0, 1))
    return out


def child(trace: str, mode: str, repeat: int) -> dict[str, Any]:
    """Time one mode in this process (medians of ``repeat`` runs)."""
    import numpy as np

    _warm_up()
    info: dict[str, Any] = {}
    runs = [_one_run(trace, mode, info) for _ in range(repeat)]
    info["times"] = {k: [float(np.median([r[k][i] for r in runs])) for i in (0, 1)] for k in runs[0]}
    info["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return info


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", help="an OTF2 anchor file (default: write one with make_otf2_trace.py)")
    ap.add_argument("--events", type=float, default=2e6, help="events of the written trace (default 2e6)")
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3, help="runs per mode (median reported)")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(child(a.trace, a.child, a.repeat)))
        return 0
    tmp = None
    trace = a.trace
    if trace is None:
        from benchmarks.make_otf2_trace import make_trace

        tmp = tempfile.TemporaryDirectory(prefix="perflow-bench-clc-")
        trace = make_trace(str(Path(tmp.name) / "t"), a.events, a.ranks)
    print(f"trace {trace}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; CPU s (wall s), median of {a.repeat}")
    base = None
    for mode in a.modes.split(","):
        cmd = [sys.executable, __file__, "--trace", trace, "--child", mode, "--repeat", str(a.repeat)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        cpu, wall = r["times"].pop("build+waits")
        steps = ", ".join(f"{k} {c:.2f} ({w:.2f})" for k, (c, w) in r["times"].items())
        base = cpu if mode == "off" else base
        rel = f", {100 * (cpu / base - 1):+.1f} % CPU against off" if base and mode != "off" else ""
        print(f"{mode:7s} build+waits {cpu:.2f} ({wall:.2f}){rel}; {steps}; {r['events']:,} events, "
              f"waiting {r['waiting_s']:.4f} s, violations left {r['clock_violations_left']}, "
              f"peak RSS {r['peak_rss_mb']:.0f} MB")  # fmt: skip
        if "report" in r:
            rep = r["report"]
            print(f"        clc: {rep['violations']} violations ({rep['messages']} messages, {rep['collectives']} "
                  f"collectives), {rep['remaining']} left, largest shift {rep['max_shift']:.4g} s")  # fmt: skip
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
