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
