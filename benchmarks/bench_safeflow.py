"""Costs of the safety features of issue 18: content fingerprints, signed cache entries, atomic writes.

1. **Content hashing of a large input** (an OTF2-like folder of ``--files``
   files, ``--size`` bytes in all): the old stat-only fingerprint (size and
   mtime of every file), the content fingerprint the first time (every byte
   read and hashed: BLAKE2b, in threads beyond 64 MB), again in the same
   process (the in-process memo), and in a new process (the cache's signed
   hash store, nothing read). The first content fingerprint reads from the
   page cache here (the files were just written): it measures hashing, a
   cold disk adds its read time.
2. **A cached step**: ``perflow.run`` of a one-step flow on a ``path`` input,
   cold (computed and stored), warm (loaded: the entry's MAC and file hash
   checked, then unpickled).
3. With ``--otf2 TRACE``: reading that trace (``perflow.read``) against
   content-hashing its files, the price of a cache that cannot go stale
   relative to the work it saves.
4. **Atomic writes**: ``write_value`` of a CSV and of small JSON outputs,
   against a plain in-place write (the atomic one adds a temporary file, an
   fsync and a rename).

Usage::

    python benchmarks/bench_safeflow.py                  # 1 GiB in 64 files
    python benchmarks/bench_safeflow.py --size 256e6 --files 16
    python benchmarks/make_otf2_trace.py --events 5e6 --out /tmp/otf2-5M
    python benchmarks/bench_safeflow.py --otf2 /tmp/otf2-5M/traces.otf2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def stat_only(d: Path) -> str:
    """The fingerprint perflow used before issue 18: names, sizes and mtimes (no content)."""
    from perflow.flow.fingerprint import digest_of

    parts = ["path", str(d)]
    for root, dirs, files in os.walk(d):
        dirs.sort()
        for f in sorted(files):
            st = os.stat(os.path.join(root, f))
            parts.append(f"{f}:{st.st_size}:{st.st_mtime_ns}")
    return digest_of(*parts)


def timed(fn, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def make_input(d: Path, size: int, files: int) -> None:
    d.mkdir(parents=True, exist_ok=True)
    chunk = os.urandom(1 << 20)
    per = size // files
    for i in range(files):
        with open(d / f"{i}.evt", "wb") as fh:
            left = per
            while left > 0:
                fh.write(chunk[: min(left, len(chunk))])
                left -= len(chunk)
    (d / "anchor.otf2").write_text("anchor")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=float, default=float(1 << 30), help="bytes of input (default 1 GiB)")
    ap.add_argument("--files", type=int, default=64, help="files in the input folder")
    ap.add_argument("--otf2", help="an OTF2 anchor file: compare reading it with hashing its archive")
    args = ap.parse_args()

    import numpy as np
    import pandas as pd

    import perflow
    from perflow.flow import fingerprint as fpmod
    from perflow.flow.cache import Cache
    from perflow.flow.outputs import write_value

    with tempfile.TemporaryDirectory(prefix="perflow-bench-") as tmp:
        root = Path(tmp)
        d = root / "trace"
        make_input(d, int(args.size), args.files)
        total = sum(f.stat().st_size for f in d.iterdir())
        print(f"input: {total / 1e6:,.0f} MB in {args.files + 1} files")

        # 1. fingerprints
        old = timed(lambda: stat_only(d))
        cache = Cache(root / "cache")
        fpmod._MEMO.clear()
        t = time.perf_counter()
        fpmod.fingerprint(d, store=cache.file_hashes)
        first = time.perf_counter() - t
        memo = timed(lambda: fpmod.fingerprint(d, store=cache.file_hashes))

        def new_process() -> None:
            fpmod._MEMO.clear()
            fpmod.fingerprint(d, store=cache.file_hashes)

        stored = timed(new_process)
        print("fingerprint of the input folder:")
        print(f"  stat only (before)        {old * 1e3:9.2f} ms  (stale after an edit that keeps size and mtime)")
        print(f"  content, first time       {first * 1e3:9.2f} ms  ({total / first / 1e9:.2f} GB/s)")
        print(f"  content, same process     {memo * 1e3:9.2f} ms  (in-process memo)")
        print(f"  content, new process      {stored * 1e3:9.2f} ms  (signed hash store in the cache)")
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        code = (
            "import sys, time; from perflow.flow.cache import Cache; from perflow.flow.fingerprint import fingerprint;"
            "from pathlib import Path; c = Cache(sys.argv[1]); t = time.perf_counter();"
            "fingerprint(Path(sys.argv[2]), store=c.file_hashes); print(time.perf_counter() - t)"
        )
        out = subprocess.run(
            [sys.executable, "-c", code, str(root / "cache"), str(d)], env=env, capture_output=True, text=True
        )
        print(f"  content, a real new process {float(out.stdout) * 1e3:7.2f} ms")

        # 2. a cached step
        @perflow.pass_(name="bench_listing")
        def listing(p: Path) -> pd.DataFrame:
            return pd.DataFrame({"name": sorted(os.listdir(p))})

        f = perflow.Flow("bench")
        f.output("t", f.step("t", "bench_listing", f.input("p", Path)))
        c2 = root / "cache2"
        fpmod._MEMO.clear()
        t = time.perf_counter()
        perflow.run(f, p=d, cache=c2).raise_for_status()
        cold = time.perf_counter() - t
        warm = timed(lambda: perflow.run(f, p=d, cache=c2).raise_for_status(), 5)
        print("one-step flow on the folder, with --cache:")
        print(f"  cold (hash input, compute, sign and store) {cold * 1e3:8.2f} ms")
        print(f"  warm (verify MAC and hash, load)           {warm * 1e3:8.2f} ms")

        # 3. a real trace: reading against hashing
        if args.otf2:
            anchor = Path(args.otf2)
            archive = anchor.parent
            size = sum(f.stat().st_size for f in archive.rglob("*") if f.is_file())
            read = timed(lambda: perflow.read(anchor), 2)  # the best of two: the first compiles kernels

            def hash_archive() -> None:
                fpmod._MEMO.clear()
                fpmod.path_digest(archive)

            hashed = timed(hash_archive)
            print(f"OTF2 trace {anchor} ({size / 1e6:,.0f} MB):")
            print(f"  perflow.read {read:8.2f} s; content hash {hashed:8.3f} s ({hashed / read:.1%} of the read)")

        # 4. atomic writes
        n = 1_000_000
        df = pd.DataFrame({"a": np.arange(n), "b": np.arange(n) * 0.5})
        out = root / "out"
        out.mkdir()
        plain = timed(lambda: df.to_csv(out / "plain.csv", index=False))
        atomic = timed(lambda: write_value(df, out, "atomic"))
        small = {"k": list(range(10))}
        plain_json = timed(lambda: (out / "p.json").write_text(json.dumps(small)), 20)
        atomic_json = timed(lambda: write_value(small, out, "small"), 20)
        print("writing outputs (best of runs):")
        print(f"  CSV {n:,} rows: in place {plain * 1e3:8.1f} ms, atomic {atomic * 1e3:8.1f} ms")
        print(f"  small JSON:           in place {plain_json * 1e3:8.3f} ms, atomic {atomic_json * 1e3:8.3f} ms")


if __name__ == "__main__":
    main()
