"""Fuzz campaign over every reader: outcome counts per format.

Runs the harness of ``tests/fuzz`` (seeded mutations of real and generated
samples, each read by ``perflow.read`` in a forked child with a capped address
space and a time limit) for ``--cases`` cases per row of the fuzz table and
prints the counts per row and outcome. Failures (unexpected exception, hang,
memory blow-up, crash, silent corruption) are listed with their mutation.

    python benchmarks/fuzz_readers.py                 # 200 cases per format
    python benchmarks/fuzz_readers.py --cases 50 --only caliper-cali,tau
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fuzz.harness import FAILURES, OUTCOMES, Case, campaign  # noqa: E402
from tests.fuzz.targets import targets  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=200, help="cases per row (default 200)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds before a case counts as a hang")
    ap.add_argument("--only", default="", help="comma-separated row names")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every case")
    args = ap.parse_args()
    rows = [t for t in targets() if not args.only or t.name in args.only.split(",")]
    failures: list[Case] = []

    def on_case(c: Case) -> None:
        if c.failed:
            failures.append(c)
        if args.verbose or c.failed:
            print(f"  {c.target} seed {c.seed}: {c.outcome} ({c.seconds:.1f} s) {c.mutation} -> {c.detail[:300]}")

    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as d:
        counts = campaign(rows, args.cases, Path(d), seed=args.seed, timeout=args.timeout, on_case=on_case)
    total: Counter = Counter()
    print(f"\n{'format':24s}" + "".join(f"{o:>14s}" for o in OUTCOMES))
    for name, c in counts.items():
        total.update(c)
        print(f"{name:24s}" + "".join(f"{c.get(o, 0):14d}" for o in OUTCOMES))
    print(f"{'total':24s}" + "".join(f"{total.get(o, 0):14d}" for o in OUTCOMES))
    n_fail = sum(total[o] for o in FAILURES)
    print(f"\n{sum(total.values())} cases in {time.monotonic() - t0:.0f} s, {n_fail} failures")
    return 1 if n_fail else 0


if __name__ == "__main__":
    sys.exit(main())
