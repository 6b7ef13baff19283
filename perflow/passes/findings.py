"""Findings: what is wrong with a run, where in the code, on which ranks, what it costs, first.

Every report page and the terminal output of ``perflow run`` open with the findings of the run:
its top problems ranked by what they cost, one line each. They are read off the run's tables
(:mod:`perflow.passes._evidence`: root causes, wait states, critical-path and load imbalance,
POP efficiencies, scalability losses, slow processes, differences between runs), and off the
input PAG when no table says it (its load imbalance, its wait states for a trace, its hotspots).

The **cost** of a finding is the run time it takes per process: a time summed over processes
divided by their number (waiting time, the waiting a root cause makes others spend), or a time
that is per process already (load imbalance ``max - mean``, critical-path imbalance, a POP
efficiency's lost seconds). Findings about one call path are merged into one line (the costliest
first, the others after "also"); a wait state at an MPI call hides that call's own load
imbalance (the same time seen twice). Hotspots only say where the time goes: they come after
the problems.

**A cause comes before the waiting it explains.** A root cause (the ``root_cause`` table's
``causes`` column: the waiting it makes others spend, per wait-state kind) explains the wait
states of those kinds; the waiting of one kind is shared among its wait states in proportion to
their amounts, and a wait state is never explained beyond its own amount. The waiting a cause
explains is said on the cause's line ("explains 319 ms of Late Receiver waiting in MPI_Send on
rank 0") and counted in its cost, not again as a finding of its own: a wait state stays a finding
only for the part no cause explains, and only when that part is at least :data:`UNEXPLAINED` of
it (a wait state nobody explains stays whole). A table with a ``gain [s]`` column (the runtime the what-if replay predicts fixing
the row would save) gives its finding a gain.

**A finding names the user's code.** A call path in library code (a system library, the vDSO,
the MPI library, the recorder) is said of its innermost caller that is the user's code, with
the library code below it as context (:mod:`perflow.passes._evidence.fold`).

>>> findings(result.outputs, pag)                  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from perflow.sdk import PAG, pass_
from perflow.sdk.render import format_value, shorten_end
from perflow.sdk.trace import wait_label, waits_for

from ._evidence import GAIN, Candidate, candidates, rank_list
from ._evidence.fold import fold_library
from .hotspot import hotspot
from .imbalance import imbalance
from .waitstates import wait_state_summary

__all__ = ["findings", "findings_markdown", "finding_line", "FINDING_COLUMNS", "COST_NOTE", "UNEXPLAINED"]

log = logging.getLogger(__name__)

#: Columns of the findings table.
FINDING_COLUMNS = (
    "rank", "cost", GAIN, "where", "processes", "what", "kind", "vertex", "call_path", "source",
    "output", "row", "t0", "t1", "context",
)  # fmt: skip
#: What the cost column means (said under every rendering).
COST_NOTE = "cost: the run time a finding takes per process (a sum over processes divided by their number)"
#: A wait state that root causes explain stays a finding of its own when at least this share of it is
#: explained by none of them (the rest is said on the causes' lines).
UNEXPLAINED = 0.1


def _n_locations(pag: PAG | None) -> int:
    if pag is None:
        return 1
    try:
        return max(len(pag.locations), 1)
    except Exception:  # a PAG face without locations
        return 1


def _from_pag(pag: PAG, values: Mapping[str, Any], found: list[Candidate]) -> list[Candidate]:
    """Candidates computed from the PAG for the kinds no table gave: waits (traces), imbalance, hotspots."""
    kinds = {c.kind for c in found}
    extra: dict[str, Any] = {}
    if "wait state" not in kinds and getattr(pag, "trace", None) is not None:
        try:
            w = waits_for(pag, "findings")
            if len(w):
                extra["waits per call path"] = wait_state_summary(pag, w, by="vertex")
                extra["wait states"] = w
        except Exception as exc:  # a trace without what the wait analysis needs: no wait findings
            log.debug("findings: no wait states: %s", exc)
    if not kinds & {"load imbalance", "critical-path imbalance", "root cause"} and len(pag.processes) > 1:
        extra["load imbalance"] = imbalance(pag)
    if "hotspot" not in kinds and sum(not c.context for c in found) < 3:
        extra["hotspots"] = hotspot(pag, metric="time_exc", k=3)
    for c in (more := candidates({**extra, **{k: v for k, v in values.items() if k not in extra}}, _n_locations(pag))):
        if c.output in extra:
            c.output = ""  # not a table of the page: the evidence is the call tree
    return [c for c in more if c.kind not in kinds]


def _name(pag: PAG | None, c: Candidate) -> str:
    """The short name of a candidate's call path (``MPI_Send``)."""
    if isinstance(pag, PAG) and 0 <= c.vertex < pag.n_vertices:
        return str(pag.vertex_table["name"].iat[c.vertex])
    return c.call_path.rsplit("/", 1)[-1] if c.call_path else (c.label or "an unknown call path")


def _secs(x: float) -> str:
    return format_value(x, "s")


def _on(procs: list[int]) -> str:
    ranks = rank_list(procs, 3)
    return f" on rank{'s' if any(ch in ranks for ch in ',-') or ' and ' in ranks else ''} {ranks}" if ranks else ""


def _explain(found: list[Candidate], pag: PAG | None) -> None:
    """Link root causes to the wait states they explain (see the module docstring); changes ``found`` in place."""
    waits = [c for c in found if c.kind == "wait state" and c.wait_kind and c.amount > 0 and c.cost > 0]
    causes = [c for c in found if c.kind == "root cause" and c.explains]
    if not waits or not causes:
        return
    of_kind: dict[str, float] = {}
    for w in waits:
        of_kind[w.wait_kind] = of_kind.get(w.wait_kind, 0.0) + w.amount
    links: list[tuple[Candidate, Candidate, float]] = [  # (cause, wait, seconds), before the cap
        (c, w, a * w.amount / of_kind[w.wait_kind])
        for c in causes
        for k, a in c.explains.items()
        if of_kind.get(k, 0.0) > 0
        for w in waits
        if w.wait_kind == k
    ]
    claimed: dict[int, float] = {}
    for _, w, e in links:
        claimed[id(w)] = claimed.get(id(w), 0.0) + e
    capped = [(c, w, e * min(1.0, w.amount / claimed[id(w)])) for c, w, e in links]  # never beyond the wait
    for c in causes:
        mine = sorted(((w, e) for cc, w, e in capped if cc is c and e > 0), key=lambda we: -we[1])
        if not mine:
            continue
        said = [
            f"{_secs(e)} of {wait_label(w.wait_kind)} waiting in {_name(pag, w)}{_on(w.processes)}" for w, e in mine
        ]
        more = f" and {len(said) - 3} more" if len(said) > 3 else ""
        explains = f"explains {', '.join(said[:3])}{more}"
        c.what = f"{c.lead}delays others: {_secs(c.amount)} of waiting in total; {explains}{c.tail}"
    for w in waits:
        by = sorted(((c, e) for c, ww, e in capped if ww is w and e > 0), key=lambda ce: -ce[1])
        done = sum(e for _, e in by)
        if done <= 0:
            continue
        rest = max(w.amount - done, 0.0)
        if rest < UNEXPLAINED * w.amount:
            w.explained = True  # said on its causes' lines
            continue
        names = list(dict.fromkeys(_name(pag, c) for c, _ in by))
        w.cost *= rest / w.amount
        w.what += f"; {_secs(done)} of it explained by {', '.join(names[:3])}, {_secs(rest)} by no root cause"
        w.short = f"{wait_label(w.wait_kind)} {_secs(rest)} unexplained"


def _merge(cands: list[Candidate]) -> list[dict[str, Any]]:
    groups: dict[Any, list[Candidate]] = {}
    for i, c in enumerate(cands):
        key = ("v", c.vertex) if c.vertex >= 0 else (("p", c.call_path) if c.call_path else ("i", i))
        groups.setdefault(key, []).append(c)
    out = []
    for group in groups.values():
        if any(c.kind == "wait state" for c in group):  # an MPI call's imbalance is its waiting, seen again
            group = [c for c in group if c.kind not in ("load imbalance", "hotspot")]
        group = [c for c in group if not c.explained]  # said on the lines of the causes that explain it
        if not group:
            continue
        problems = sorted((c for c in group if not c.context), key=lambda c: -c.cost)
        ordered = problems or sorted(group, key=lambda c: -c.cost)
        first = ordered[0]
        also = [c.short or f"{c.kind} {_short(c)}" for c in ordered[1:3]]
        procs: list[int] = []
        for c in ordered:
            procs += [p for p in c.processes if p >= 0 and p not in procs]
        gains = [c.gain for c in ordered if math.isfinite(c.gain)]
        what = first.what + (f"; also {'; '.join(also)}" if also else "")
        out.append(
            {
                "cost": first.cost,
                GAIN: first.gain if math.isfinite(first.gain) else (max(gains) if gains else math.nan),
                "processes": procs,
                "what": what,
                "kind": first.kind,
                "vertex": first.vertex,
                "call_path": first.call_path,
                "output": first.output,
                "row": first.row,
                "window": first.window or next((c.window for c in ordered if c.window), None),
                "context": not problems,
                "label": first.label,
            }
        )
    out.sort(key=lambda f: (f["context"], -f["cost"]))
    return out


def _short(c: Candidate) -> str:

    return format_value(c.cost, "s")


def _where(pag: PAG | None, vertex: int, call_path: str) -> tuple[str, str, str]:
    """(name with file:line, call path, file:line) of a finding's vertex."""
    if pag is None or vertex < 0 or vertex >= pag.n_vertices:  # no file:line: the caller tells call sites apart
        name = "/".join(call_path.split("/")[-2:]) if call_path else ""
        return name, call_path, ""
    vt = pag.vertex_table
    f, ln = str(vt["file"].iat[vertex] or ""), int(vt["line"].iat[vertex])
    src = f"{f}:{ln}" if f and ln >= 0 else f
    name = str(vt["name"].iat[vertex])
    path = call_path or str(pag.call_paths().iat[vertex])
    return (f"{name} ({src})" if src else name), path, src


def _window(pag: PAG | None, vertex: int, processes: list[int]) -> tuple[float, float] | None:
    """The longest instance of ``vertex`` on the finding's first process (else on any), for the timeline."""
    tr = getattr(pag, "trace", None)
    if tr is None or vertex < 0:
        return None
    iv = tr.intervals
    m = iv["vertex"].to_numpy() == vertex
    if processes:
        on = m & (iv["process"].to_numpy() == processes[0])
        m = on if on.any() else m
    if not m.any():
        return None
    s, e = iv["enter"].to_numpy()[m], iv["leave"].to_numpy()[m]
    i = int(np.argmax(e - s))
    return float(s[i]), float(e[i])


@pass_(version="1", tags=("report",), role="findings")
def findings(outputs: dict[str, Any], pag: PAG | None = None, *, k: int = 8) -> pd.DataFrame:
    """The top findings of a run, ranked by what they cost (see the module docstring).

    Parameters
    ----------
    outputs : dict
        A run's values by name (tables are read, other values skipped).
    pag : PAG, optional
        The run's input: file:line of each call path, the time window of each finding on a
        trace, and the findings no table gave (its wait states, load imbalance, hotspots).
    k : int
        At most this many findings.

    Returns
    -------
    pandas.DataFrame
        One row per finding, costliest first: ``rank``, ``cost`` (s, the run time it takes per
        process), ``gain [s]`` (predicted by a what-if replay; NaN when no table says),
        ``where`` (name and file:line), ``processes`` (ranks, as ranges), ``what``, ``kind``,
        ``vertex`` (-1: none), ``call_path``, ``source`` (file:line), ``output`` and ``row``
        (the table and row it comes from; "" and -1 for the PAG's own findings), ``t0``, ``t1``
        (a time window to show on the timeline; NaN without), ``context`` (a hotspot, not a
        problem).
    """
    values = {str(n): v for n, v in (outputs or {}).items()}
    found = candidates(values, _n_locations(pag))
    if isinstance(pag, PAG):
        found += _from_pag(pag, values, found)
        found = fold_library(found, pag)  # a call path in library code: the user's code calling it
    _explain(found, pag if isinstance(pag, PAG) else None)
    merged = _merge(found)[: max(int(k), 0)]
    rows = []
    for i, f in enumerate(merged):
        where, path, src = _where(pag, f["vertex"], f["call_path"])
        where = where or f["label"]
        win = f["window"] or _window(pag, f["vertex"], f["processes"])
        rows.append(
            {
                "rank": i + 1,
                "cost": f["cost"],
                GAIN: f[GAIN],
                "where": where or "the whole run",
                "processes": rank_list(f["processes"]),
                "what": f["what"],
                "kind": f["kind"],
                "vertex": f["vertex"],
                "call_path": path,
                "source": src,
                "output": f["output"],
                "row": f["row"],
                "t0": win[0] if win else math.nan,
                "t1": win[1] if win else math.nan,
                "context": f["context"],
            }
        )
    df = pd.DataFrame(rows, columns=list(FINDING_COLUMNS))
    df.attrs["units"] = {"cost": "s", GAIN: "s", "t0": "s", "t1": "s"}
    df.attrs["note"] = COST_NOTE
    df.attrs["table"] = "findings"
    return df


def finding_line(row: Any) -> str:
    """One finding as a line: ``47.0 ms  compute (synthetic.c:50) on rank 3: what`` (with its gain)."""

    gain = f" (gain {format_value(row[GAIN], 's')})" if pd.notna(row[GAIN]) else ""
    ranks = str(row["processes"] or "")
    on = f" on rank{'s' if any(c in ranks for c in ',-') or ' and ' in ranks else ''} {ranks}" if ranks else ""
    return f"{format_value(row['cost'], 's')}{gain}  {row['where']}{on}: {row['what']}"


def findings_markdown(table: pd.DataFrame, *, k: int = 5, width: int | None = None) -> str:
    """The findings as a Markdown section for a terminal: ``## Findings`` and one numbered line each.

    With ``width``, each line is cut to that many characters (at a word, ending in ``…``).
    """
    if table is None or not len(table):
        return ""

    t = table.iloc[: max(int(k), 0)]
    lines = ["## Findings", ""]
    for _, r in t.iterrows():
        line = f"{int(r['rank'])}. {finding_line(r)}"
        lines.append(shorten_end(line, width) if width else line)
    more = len(table) - len(t)
    gain = "; gain: the runtime a what-if replay predicts fixing it saves" if t[GAIN].notna().any() else ""
    note = f"({COST_NOTE}{gain}{f'; {more} more in index.html' if more > 0 else ''})"
    if width:
        import textwrap

        lines += ["", *textwrap.wrap(note, width), ""]
    else:
        lines += ["", note, ""]
    return "\n".join(lines)
