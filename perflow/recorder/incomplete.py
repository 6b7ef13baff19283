"""What an interrupted or incomplete recording is missing: which ranks, from when.

A rank's text file ends with ``end`` when the process exited normally. The
crash handlers of the recorder (``csrc/pfrec_crash.c``) write ``died <signal>
<time>`` or ``abort <code> <time>`` before they flush; a rank killed with
SIGKILL writes neither (what it recorded up to its last periodic flush, at
most half a second before, is kept). :func:`missing` says, per rank, what
happened and until when the data reach, and which ranks of the world left no
data at all; :func:`perflow.recorder.assemble.assemble` stores the notes in
``attrs["incomplete"]`` (one per line), which ``perflow info`` prints and the
recording reader logs.
"""

from __future__ import annotations

import signal
from collections.abc import Sequence

import numpy as np

from .decode import ProcessData

__all__ = ["missing"]


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def _time(meta_value: str) -> float | None:
    parts = meta_value.split()
    try:
        return float(parts[1]) if len(parts) > 1 else None
    except ValueError:
        return None


def missing(procs: Sequence[ProcessData], offsets: np.ndarray, t0: float) -> list[str]:
    """One note per rank that did not finish normally, and one for the ranks that left no data."""
    notes = []
    for p, o in zip(procs, offsets):
        if "end" in p.meta:
            continue
        last = float(p.events["t"].max()) + o - t0 if len(p.events) else 0.0
        if "died" in p.meta:
            sig = int(p.meta["died"].split()[0])
            when = _time(p.meta["died"])
            at = f" at {when + o - t0:.6g} s" if when is not None else ""
            notes.append(f"rank {p.rank}: the process died of {_signal_name(sig)}{at}; recorded until {last:.6g} s")
        elif "abort" in p.meta:
            code = p.meta["abort"].split()[0]
            when = _time(p.meta["abort"])
            at = f" at {when + o - t0:.6g} s" if when is not None else ""
            notes.append(f"rank {p.rank}: called MPI_Abort (error code {code}){at}; recorded until {last:.6g} s")
        else:
            notes.append(
                f"rank {p.rank}: the process was killed without a chance to flush (SIGKILL?); recorded until "
                f"{last:.6g} s (up to half a second before it was killed may be lost)"
            )
    size = max((int(p.meta.get("size", 0) or 0) for p in procs), default=0)
    have = {p.rank for p in procs}
    absent = [r for r in range(size) if r not in have]
    if absent:
        shown = ", ".join(map(str, absent[:20])) + (", ..." if len(absent) > 20 else "")
        notes.append(f"ranks {shown}: no data at all ({len(absent)} of {size} ranks)")
    return notes
