"""Cut an Nsight Systems SQLite export down to what the tests read (run once; see README.md).

    python cut_nsys.py IN.sqlite OUT.sqlite [--until-kernel N]

Every table and column stays (the schema is the exporter's); rows are removed
from tables perflow does not read (CPU samples, scheduling, process lists,
call chains, the recorded environment), strings no remaining row refers to
are dropped from StringIds, and with ``--until-kernel N`` the activity tables
keep only rows that end before the N-th kernel ends. Pages are 1 KiB.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3

#: tables whose rows are dropped (perflow reads none of them)
EMPTIED = (
    "SAMPLING_CALLCHAINS",
    "COMPOSITE_EVENTS",
    "SCHED_EVENTS",
    "PROCESSES",
    "OSRT_CALLCHAINS",
    "CUDA_CALLCHAINS",
    "PROFILER_OVERHEAD",
    "DIAGNOSTIC_EVENT",
    "META_DATA_CAPTURE",
    "TARGET_INFO_SYSTEM_ENV",
    "ProcessStreams",
)
#: activity tables cut at --until-kernel
TIMED = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    "NVTX_EVENTS",
    "OSRT_API",
)
#: columns holding StringIds ids
STRING_COLUMNS = ("nameId", "textId", "demangledName", "shortName", "mangledName", "domainId", "jsonTextId")


def cut(src: str, dst: str, until_kernel: int | None) -> None:
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    for t in EMPTIED:
        if t in tables:
            con.execute(f'DELETE FROM "{t}"')
    if until_kernel:
        (t_cut,) = con.execute(
            "SELECT end FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY end LIMIT 1 OFFSET ?", (until_kernel - 1,)
        ).fetchone()
        for t in TIMED:
            if t in tables:
                con.execute(f'DELETE FROM "{t}" WHERE end IS NULL AND start > ? OR end > ?', (t_cut, t_cut))
    used: set[int] = set()
    for t in tables - {"StringIds"}:
        cols = [r[1] for r in con.execute(f'PRAGMA table_info("{t}")')]
        for c in cols:
            if c in STRING_COLUMNS or (t == "ThreadNames" and c == "nameId"):
                used |= {r[0] for r in con.execute(f'SELECT DISTINCT "{c}" FROM "{t}" WHERE "{c}" IS NOT NULL')}
    con.execute("CREATE TEMP TABLE keep(id INTEGER PRIMARY KEY)")
    con.executemany("INSERT INTO keep VALUES (?)", [(int(i),) for i in used if isinstance(i, int)])
    con.execute("DELETE FROM StringIds WHERE id NOT IN (SELECT id FROM keep)")
    con.commit()
    con.execute("PRAGMA page_size = 1024")
    con.execute("VACUUM")
    con.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--until-kernel", type=int, default=None)
    a = ap.parse_args()
    cut(a.src, a.dst, a.until_kernel)
