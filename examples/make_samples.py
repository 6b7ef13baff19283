"""Regenerate the sample data shipped in examples/data (deterministic).

    python examples/make_samples.py

* ``ring8/traces.otf2``: an OTF2 trace (written by perflow's OTF2 writer) of a
  synthetic 8-rank ring halo exchange with a slow rank (3), 30% linear load
  imbalance and occasional late senders: what the README's first command
  analyses;
* ``ring8.pag``: the same run as a saved PAG (loads without decoding).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import perflow

HERE = Path(__file__).resolve().parent / "data"

SPEC = dict(nprocs=8, iterations=40, slow_rank=3, slow_factor=1.8, imbalance=0.3, late_sender=0.05, seed=2022)


def main() -> None:
    from perflow.writers.otf2 import write_otf2

    HERE.mkdir(exist_ok=True)
    raw = perflow.synthetic.raw_trace(**SPEC)
    trace_dir = HERE / "ring8"
    if trace_dir.exists():
        shutil.rmtree(trace_dir)
    write_otf2(raw, trace_dir / "traces.otf2")
    print(f"wrote {trace_dir / 'traces.otf2'}: {raw.n_events} events")
    pag = perflow.build_pag(raw)
    pag.attrs["source"] = "examples/data/ring8 (perflow.synthetic)"
    pag.save(HERE / "ring8.pag")
    print(f"wrote {HERE / 'ring8.pag'}: {pag}")


if __name__ == "__main__":
    main()
