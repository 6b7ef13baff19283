"""Regenerate the sample data shipped in examples/data (deterministic).

    python examples/make_samples.py

* ``ring8.pag``: a saved PAG of a synthetic 8-rank ring halo exchange with a
  slow rank (3), 30% linear load imbalance and occasional late senders.
"""

from __future__ import annotations

from pathlib import Path

import perflow

HERE = Path(__file__).resolve().parent / "data"

SPEC = dict(nprocs=8, iterations=40, slow_rank=3, slow_factor=1.8, imbalance=0.3, late_sender=0.05, seed=2022)


def main() -> None:
    HERE.mkdir(exist_ok=True)
    pag = perflow.synthetic.trace(**SPEC)
    pag.attrs["source"] = "examples/data/ring8 (perflow.synthetic)"
    pag.save(HERE / "ring8.pag")
    print(f"wrote {HERE / 'ring8.pag'}: {pag}")


if __name__ == "__main__":
    main()
