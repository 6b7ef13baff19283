"""Run information of a PAG as one row of an ensemble's metadata table.

Every reader keeps what its format says about the run in ``pag.attrs``, each
in its own words. :func:`run_info` reads them into the **standard columns**
(the same for every format), followed by every scalar the tool recorded
under its own name:

============== =====================================================================================
column         taken from (first found)
============== =====================================================================================
``source``     ``attrs["source"]`` (the file or directory read)
``format``     ``attrs["format"]``
``tool``       Caliper: ``Caliper <cali.caliper.version>``; Score-P (OTF2, CUBE), HPCToolkit,
               ``perflow record``: ``attrs["creator"]``; else the format
``nprocs``     ``attrs["nprocs"]`` (Caliper: ``mpi.world.size``/``jobsize``; others: ranks read),
               else the processes with data
``nthreads``   the threads declared by the run (Adiak ``threads``/``omp_num_threads``, TAU
               ``OMP_NUM_THREADS``), else the most threads of a process with data
``command``    recorder ``command_line``; TAU ``Command Line``; Adiak ``cmdline``
``executable`` TAU ``Executable``; Adiak ``executablepath``/``executable``; recorder ``program``;
               Score-P ``SCOREP_EXECUTABLE``
``date``       start of the run, a UTC timestamp: recorder ``date`` (ISO 8601); Adiak
               ``launchdate`` (Unix seconds); TAU ``Starting Timestamp`` (microseconds)
``host``       recorder ``host``; Adiak ``hostname``; TAU ``Hostname``/``Node Name`` (Score-P's
               ``SCOREP_MACHINE_NAME`` names a system, not a host: it keeps its own column)
``user``       Adiak ``user``
============== =====================================================================================

Then, in this order and without overwriting a standard column: the scalar
globals of a Caliper file (Adiak's name/value pairs such as ``problem_size``,
``compiler``, ``elapsed_time``), the metadata of a TAU profile or a CUBE
file, the Score-P configuration found beside the run
(``attrs["scorep_config"]``: the ``SCOREP_*`` variables of ``scorep.cfg``),
and the PAG's other scalar attributes (e.g. the recorder's ``mpi``,
``ranks_requested``, ``exit_status``). A value the run does not record is
missing (``None``/``NaT``), never guessed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:  # pragma: no cover
    from .pag import PAG

__all__ = ["run_info", "STANDARD_COLUMNS"]

STANDARD_COLUMNS = ("source", "format", "tool", "nprocs", "nthreads", "command", "executable", "date", "host", "user")

#: attributes that describe how perflow read the run rather than the run itself
_SKIP = {"metadata", "scorep_config", "outside_regions", "pid_map", "tid_map"}


def _scalar(v: Any) -> bool:
    return isinstance(v, str | int | float | bool) or v is None


def _first(*candidates: tuple[Mapping[str, Any], str]) -> Any:
    for where, key in candidates:
        v = where.get(key)
        if v is not None and v != "" and _scalar(v):
            return v
    return None


def _timestamp(value: Any, unit: str | None) -> pd.Timestamp:
    try:
        if unit is None:
            ts = pd.Timestamp(str(value))
            return ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")
        return pd.Timestamp(int(float(value)), unit=unit, tz="UTC")
    except (ValueError, TypeError, OverflowError):
        return pd.NaT


def _date(a: Mapping[str, Any], meta: Mapping[str, Any]) -> pd.Timestamp:
    for where, key, unit in ((a, "date", None), (meta, "launchdate", "s"), (meta, "Starting Timestamp", "us")):
        v = where.get(key)
        if v is not None and v != "":
            ts = _timestamp(v, unit)
            if ts is not pd.NaT:
                return ts
    return pd.NaT


def _int(v: Any) -> int | None:
    try:
        return int(str(v).strip())
    except (TypeError, ValueError):
        return None


def _threads(pag: PAG, meta: Mapping[str, Any]) -> int:
    for key in ("threads", "omp_num_threads", "omp.num.threads", "OMP_NUM_THREADS"):
        n = _int(meta.get(key))
        if n is not None and n > 0:
            return n
    loc = pag.locations
    return int(loc.groupby("process").size().max()) if len(loc) else 0


def _tool(a: Mapping[str, Any], meta: Mapping[str, Any]) -> str:
    version = meta.get("cali.caliper.version") or a.get("cali.caliper.version")
    if version:
        return f"Caliper {version}"
    if a.get("creator"):
        return str(a["creator"])
    if a.get("format") == "tau":
        return "TAU"
    return str(a.get("format", ""))


def run_info(pag: PAG) -> dict[str, Any]:
    """The metadata row of one run (see the module docstring for where each column comes from)."""
    a = pag.attrs
    meta = a.get("metadata") if isinstance(a.get("metadata"), Mapping) else {}
    cfg = a.get("scorep_config") if isinstance(a.get("scorep_config"), Mapping) else {}
    out: dict[str, Any] = {
        "source": a.get("source"),
        "format": a.get("format"),
        "tool": _tool(a, meta),
        "nprocs": int(pag.n_processes),
        "nthreads": _threads(pag, meta),
        "command": _first((a, "command_line"), (meta, "Command Line"), (meta, "cmdline"), (a, "cmdline")),
        "executable": _first(
            (meta, "Executable"),
            (meta, "executablepath"),
            (meta, "executable"),
            (a, "program"),
            (cfg, "SCOREP_EXECUTABLE"),
        ),
        "date": _date(a, meta),
        "host": _first((a, "host"), (meta, "hostname"), (meta, "Hostname"), (meta, "Node Name")),
        "user": _first((meta, "user"), (a, "user")),
    }
    for source in (meta, cfg, a):
        for k, v in source.items():
            if k not in out and k not in _SKIP and _scalar(v):
                out[str(k)] = v
    return out
