"""``python -m perflow.cli.aot DEST [SOURCE]``: compile perflow's kernels ahead of time into ``DEST``.

What the build hook (``setup.py``) runs: a small analysis workload with every
kernel compiled, saved as numba cache files into the shipped-cache directory
that :mod:`perflow._aot` reads at run time (see ``docs/startup.md``).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .. import _aot, _jit
from . import main as cli

__all__ = ["build", "main"]

PACKAGE = _aot.PACKAGE
log = logging.getLogger(__name__)


def _workload(out: Path, source: Path | None) -> list[list[str]]:
    """The command lines run to compile kernels: the analyses a large trace meets, on small traces."""
    traces = []
    ring8 = (source or PACKAGE.parent) / "examples" / "data" / "ring8" / "traces.otf2"
    if ring8.exists():
        traces.append(str(ring8))
    maker = (source or PACKAGE.parent) / "benchmarks" / "make_otf2_trace.py"
    if maker.exists():
        sys.path.insert(0, str(maker.parent))
        try:
            from make_otf2_trace import make_trace

            make_trace(str(out / "synthetic"), 20_000, 8)
            traces.append(str(out / "synthetic" / "traces.otf2"))
        finally:
            sys.path.remove(str(maker.parent))
    flows = ("wait_states", "critical_path", "mpi_profiler", "pop", "root_cause", "imbalance")
    runs = [["-q", "run", flow, "--input", t] for t in traces for flow in flows]
    # the outputs' kernels (the timelines' binning and summary pixels): one run with --output, on the
    # last (largest) trace only; a page costs about 4 s of CPU on a small trace, most of it Bokeh and matplotlib
    runs += [["-q", "run", "critical_path", "--input", traces[-1], "--output", str(out / "outputs")]] if traces else []
    # the controlled logical clock's kernels, which a trace violating the clock condition needs
    return runs + [["-q", "--clock-correction", "on", "run", "wait_states", "--input", t] for t in traces]


def _streamed_replay() -> None:
    """Run the streamed replay's kernels (:mod:`perflow.trace.replaystream`, the Dask engine's replay of a trace
    past ``STREAM_REPLAY_EVENTS`` events) on a small trace built in three partitions in this process: the
    calls the critical path, POP's gains and the what-if vertex times make (no Dask needed)."""
    import numpy as np

    from .. import synthetic
    from ..pag.partitioned import LocalRuntime
    from ..trace.analyses import ReplaySettings, vertex_roles
    from ..trace.build import build_pag
    from ..trace.pipeline import BuildOptions, build
    from ..trace.replay import Rates, run_many, run_plan
    from ..trace.replayparts import part_refs
    from ..trace.replaystream import StreamPlan
    from ..trace.split import definitions_only, split_blocks

    raw = synthetic.raw_trace(nprocs=6, iterations=40, late_sender=0.3, slow_rank=2, imbalance=0.3, seed=9)
    pag = build_pag(raw)
    parts, processes, assign = split_blocks(raw, 3)
    rt = LocalRuntime(len(parts), jobs=1)
    try:
        built = build(rt, parts, definitions_only(raw), processes, assign, BuildOptions(False, True, False))
        roles, regions = vertex_roles(pag)
        names = pag.vertex_table["name"].astype(str).to_numpy()
        sp = StreamPlan(rt, part_refs(built, names, ReplaySettings(), roles=roles, regions=regions), chunk_points=64)
        nv, window = pag.n_vertices, pag.trace.span
        rates = Rates.uniform(np.ones(nv), 1.0)
        run_plan(sp, rates, window)
        run_many(sp, [rates, Rates.uniform(np.full(nv, 0.5), 0.5)], window)
        sp.vertex_time_streamed(np.zeros(nv, dtype=np.int64), 1, window)
    finally:
        rt.close()


def build(dest: Path, source: Path | None = None) -> dict[str, Any]:
    """Compile perflow's kernels on a small workload into the shipped cache ``dest``; return its manifest."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    t0, c0 = time.perf_counter(), _cpu_seconds()
    with tempfile.TemporaryDirectory(prefix="perflow-aot-") as tmp:
        os.environ[_aot.ENV_BUILD] = str(dest)
        os.environ["PERFLOW_JIT"] = "compile"
        os.environ["PERFLOW_CACHE_DIR"] = str(Path(tmp) / "cache")  # nothing else is written anywhere
        os.environ.pop("NUMBA_CACHE_DIR", None)
        commands = _workload(Path(tmp), source)
        failed = []
        for argv in commands:
            with contextlib.redirect_stdout(io.StringIO()):  # the reports: only the kernels they compiled matter
                rc = cli.main(argv)
            if rc not in (0, None):
                failed.append(" ".join(argv))
        try:
            _streamed_replay()
        except Exception as exc:  # noqa: BLE001 - a kernel left to compile on first use, never a failed build
            log.warning("streamed replay kernels not compiled ahead of time: %s", exc)
            failed.append(f"streamed replay: {exc}")
    import numba

    compiled = [k for k in _jit._KERNELS if k._dispatcher is not None and k._dispatcher.signatures]
    manifest = {
        "numba": numba.__version__,
        "python": f"{sys.version_info[0]}.{sys.version_info[1]}",
        "cpu": list(_aot._cpu()),
        "kernels": len(compiled),
        "signatures": sum(len(k._dispatcher.signatures) for k in compiled),
        "seconds": round(time.perf_counter() - t0, 1),
        "cpu_seconds": round(_cpu_seconds() - c0, 1),
        "failed": failed,
    }
    (dest / _aot.MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def _cpu_seconds() -> float:
    import resource

    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def main(argv: list[str] | None = None) -> int:
    """``python -m perflow.cli.aot DEST [SOURCE]``: build the shipped cache (what the build hook runs)."""
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print(main.__doc__, file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING)
    manifest = build(Path(args[0]), Path(args[1]) if len(args) > 1 else None)
    print(
        f"perflow: {manifest['kernels']} kernels ({manifest['signatures']} signatures) compiled ahead of time "
        f"in {manifest['seconds']} s ({manifest['cpu_seconds']} s CPU) into {args[0]}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
