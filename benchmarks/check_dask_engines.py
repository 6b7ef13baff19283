"""Every OTF2 trace of the sample data on the Dask engine against the local engine.

For each archive (``traces.otf2`` under the shared sample data and
``examples/data``, or the paths given): read it locally (``perflow.read``),
load it on a 2-worker Dask engine (each worker decodes its own locations),
run the ``wait_states`` and ``critical_path`` flows on both and compare every
output (tables to a relative 1e-9, text exactly). Prints one line per trace:
OK with the events, the clock-condition violations and the seconds of each
engine, or FAIL with the first line of the error.

    PYTHONPATH=$PWD python benchmarks/check_dask_engines.py [ANCHOR ...]
"""

from __future__ import annotations

import argparse
import glob
import logging
import sys
import time
from pathlib import Path

import perflow
from perflow.dask import Engine

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from tests.dask.test_flows_equal import _same as same  # noqa: E402 - the tests' comparison of flow outputs

FLOWS = ("wait_states", "critical_path")


def archives() -> list[str]:
    """The OTF2 anchors of the shared sample data and of examples/data."""
    roots = [Path("/work/shared/data"), REPO.parent / "shared" / "data", REPO / "examples" / "data"]
    found = {
        str(Path(p).resolve()) for r in roots if r.is_dir() for p in glob.glob(f"{r}/**/traces.otf2", recursive=True)
    }
    return sorted(found)


def check(engine: Engine, anchor: str) -> str:
    """One line: OK or FAIL for one archive."""
    try:
        t0 = time.perf_counter()
        local = perflow.read(anchor)
        t1 = time.perf_counter()
        dt = engine.load(anchor)
        dist = dt.pag()
        t2 = time.perf_counter()
        for flow in FLOWS:
            exp, got = perflow.run(flow, pag=local, jobs=1), perflow.run(flow, pag=dist, jobs=1)
            assert exp.ok and got.ok, (flow, exp.errors, got.errors)
            assert got.outputs.keys() == exp.outputs.keys(), flow
            for name, value in exp.outputs.items():
                same(got.outputs[name], value, f"{flow}/{name}")
    except Exception as e:  # noqa: BLE001 - reported per trace
        return f"FAIL  {anchor}: {type(e).__name__}: {str(e).splitlines()[0][:300]}"
    viol = sum(dt.clock_violations.values())
    return (f"OK    {anchor}: {dt.n_events:,} events, {viol} clock violations; read {t1 - t0:.2f} s here, "
            f"{t2 - t1:.2f} s on Dask; {', '.join(FLOWS)} equal")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("anchors", nargs="*", help="OTF2 anchor files (default: every sample trace)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    paths = args.anchors or archives()
    bad = 0
    with Engine(n_workers=2, processes=False) as engine:
        for anchor in paths:
            line = check(engine, anchor)
            bad += line.startswith("FAIL")
            print(line, flush=True)
    print(f"{len(paths) - bad} of {len(paths)} traces give the same results on both engines")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
