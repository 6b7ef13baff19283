"""Benchmark of the replay engine: the what-if gains of the top causes, the plan, POP and the critical path.

Usage::

    python benchmarks/bench_whatif.py                       # 20 M events (benchmarks/make_otf2_trace.py)
    python benchmarks/bench_whatif.py --events 2e6 --trace /tmp/otf2-2M
    python benchmarks/bench_whatif.py --synthetic           # perflow.synthetic.raw_trace instead

The trace is written once by ``benchmarks/make_otf2_trace.py`` (kept at ``--trace``) and read with
perflow's OTF2 reader; reading and ``root_cause`` (which names the causes) are timed but not part of the
goal: **the gains of the top 20 causes** (``balance_gains``: one replay pass for all of them, the plan
built first) **under 10 s** on this machine. The synthetic OTF2 trace has fewer than 20 call paths, so 20
balance scenarios over its call paths (cycled) are timed as well. CPU time (user + sys) is printed
next to wall time: the machine is shared, and CPU time is what the code costs.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

os.environ.setdefault("NUMBA_NUM_THREADS", "1")


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def _timed(what: str, fn: Any, rows: list) -> Any:  # noqa: ANN401
    w, c = time.perf_counter(), _cpu()
    out = fn()
    rows.append((what, time.perf_counter() - w, _cpu() - c))
    return out


def _warm_up() -> None:
    """Compile the kernels on a tiny trace so compilation is not timed."""
    import numpy as np

    from perflow import synthetic
    from perflow.passes._gains import balance_gains
    from perflow.passes.critical_path import critical_path
    from perflow.passes.delay import root_cause
    from perflow.passes.pop import pop_metrics
    from perflow.passes.whatif import what_if

    pag = synthetic.trace(nprocs=4, iterations=3, late_sender=0.2, seed=1)
    balance_gains(pag, np.arange(pag.n_vertices), None, "bench")
    what_if(pag, function="compute", scale=0.5)
    root_cause(pag, long_term=True, gains=0)
    pop_metrics(pag)
    critical_path(pag)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=float, default=2e7)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--trace", default=None, help="OTF2 archive to use or create (default /tmp/perflow-otf2-EVENTS)")
    ap.add_argument("--synthetic", action="store_true", help="perflow.synthetic.raw_trace instead of OTF2")
    ap.add_argument("--top", type=int, default=20)
    a = ap.parse_args(argv)
    import numpy as np

    _warm_up()
    import perflow
    from perflow.passes._gains import balance_gains
    from perflow.passes._whatif import BALANCE, Change, Scenario, rates_for
    from perflow.passes.critical_path import critical_path
    from perflow.passes.delay import root_cause
    from perflow.passes.pop import pop_metrics
    from perflow.trace.analyses import FLAT_TIMELINE, LOCATIONS, REPLAY_PLAN
    from perflow.trace.build import build_pag
    from perflow.trace.replay import run_many

    rows: list = []
    if a.synthetic:
        from perflow import synthetic

        it = synthetic.iterations_for(a.events, a.ranks)
        raw = synthetic.raw_trace(nprocs=a.ranks, iterations=it, late_sender=0.01, seed=7)
        pag = _timed("build_pag (synthetic)", lambda: build_pag(raw), rows)
        del raw
    else:
        path = Path(a.trace or f"/tmp/perflow-otf2-{a.events:.0e}")
        anchor = path / "traces.otf2"
        if not anchor.exists():
            subprocess.run([sys.executable, str(ROOT / "benchmarks" / "make_otf2_trace.py"), "--events",
                            str(a.events), "--ranks", str(a.ranks), "--out", str(path)], check=True)  # fmt: skip
        pag = _timed("read OTF2 (build_pag)", lambda: perflow.read(str(anchor)), rows)
    tr = pag.trace
    _timed("locations + flat timeline", lambda: (pag.analyses.get(LOCATIONS), pag.analyses.get(FLAT_TIMELINE)), rows)
    causes = _timed("root_cause long-term (gains=0)", lambda: root_cause(pag, long_term=True, gains=0), rows)["causes"]
    plan = _timed("replay plan (shared by POP, critical path, what-if)", lambda: pag.analyses.get(REPLAY_PLAN), rows)
    top = causes["vertex"].to_numpy()[: a.top]
    g = _timed(
        f"gains of the top {len(top)} causes (the goal: < 10 s)", lambda: balance_gains(pag, top, None, "bench"), rows
    )
    t0, t1 = tr.span
    verts = [v for v in range(pag.n_vertices)]
    sc = [Scenario((Change(verts[i % len(verts)], None, BALANCE),)) for i in range(a.top)]
    rates = [rates_for(pag, plan, s, (t0, t1), "bench", callees=False) for s in sc]
    _timed(f"{a.top} balance scenarios, one pass", lambda: run_many(plan, rates, (t0, t1)), rows)
    _timed("pop_metrics (ideal network + gains)", lambda: pop_metrics(pag), rows)
    _timed("critical_path pass", lambda: critical_path(pag), rows)
    print(f"\n{len(tr.intervals):,} intervals, {len(tr.messages):,} messages, {len(tr.collectives):,} collective rows; "
          f"plan: {len(plan.ptime):,} points, {len(plan.xs):,} pieces, {plan.n_slots} slots, "
          f"{plan.memory_bytes() / 1e6:.0f} MB, {plan.skipped:,} dependencies skipped")  # fmt: skip
    for what, w, c in rows:
        print(f"  {what:56s} {w:8.2f} s wall {c:8.2f} s CPU")
    goal = next(r for r in rows if r[0].startswith("gains of"))
    plan_row = next(r for r in rows if r[0].startswith("replay plan"))
    print(f"  {'plan + gains':56s} {goal[1] + plan_row[1]:8.2f} s wall {goal[2] + plan_row[2]:8.2f} s CPU")
    print(
        f"  peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB; load {os.getloadavg()[0]:.1f}"
    )
    print("  top gains:", ", ".join(f"{n}: {x:.3g} s" for n, x in zip(causes["name"].astype(str)[: len(g)], g)))
    return 0 if np.isfinite(g).all() else 1


if __name__ == "__main__":
    raise SystemExit(main())
