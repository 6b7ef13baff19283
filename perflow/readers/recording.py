"""The folder that ``perflow record -o DIR`` writes.

It holds ``run.pag`` (the saved PAG), ``trace/traces.otf2`` (the OTF2
trace), ``rawtrace.npz`` (the assembled raw trace) and ``raw/`` (what the
ranks wrote). Reading it gives the saved PAG; without one (it was not
written, or reader options ask for a fresh build) the PAG is built from the
raw trace, else from the OTF2 trace.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ..errors import FormatError, TraceError
from ..trace.store import load_raw
from ._common import build_trace
from .otf2 import read as read_otf2
from .saved import read as read_saved

log = logging.getLogger(__name__)

FORMAT = "recording"
DESCRIPTION = "a folder written by perflow record (run.pag, trace/traces.otf2, rawtrace.npz)"

__all__ = ["FORMAT", "DESCRIPTION", "detect", "read", "parts"]


def parts(path: Path) -> dict[str, Path]:
    """The recording's files that exist: ``"pag"``, ``"raw"``, ``"otf2"``."""
    path = Path(path)
    cand = {"pag": path / "run.pag", "raw": path / "rawtrace.npz", "otf2": path / "trace" / "traces.otf2"}
    return {k: p for k, p in cand.items() if p.exists()}


def detect(path: Path) -> bool:
    """A directory with a saved PAG (``run.pag``), a raw trace or an OTF2 trace written by ``perflow record``."""
    path = Path(path)
    if not path.is_dir():
        return False
    found = parts(path)
    return bool(found) and ("pag" in found or "raw" in found or (path / "raw").is_dir())


def read(path: Path, **options: Any) -> Any:
    """Read a recording folder into a PAG.

    Parameters
    ----------
    path : pathlib.Path
    **options
        With none, the saved PAG is loaded; otherwise (or without a saved
        PAG) the PAG is built again from ``rawtrace.npz`` with these
        options passed to :func:`perflow.trace.build.build_pag`, or read
        from the OTF2 trace with them.

    Raises
    ------
    FormatError
        When the folder holds none of those files.
    """
    pag = _read(Path(path), **options)
    for note in [pag.attrs.get("stopped"), *str(pag.attrs.get("incomplete") or "").splitlines()]:
        if note:  # an interrupted or crashed run: every flow reading it says what is missing
            log.warning("%s: incomplete recording: %s", path, note)
    return pag


def _read(path: Path, **options: Any) -> Any:
    found = parts(path)
    if "pag" in found and not options:
        return read_saved(found["pag"])
    if "raw" in found:
        raw = load_raw(found["raw"])
        try:
            pag = build_trace(raw, found["raw"], mpi_inside_calls=True, **options)
        except TraceError as exc:
            raise FormatError(found["raw"], f"inconsistent events: {exc}") from exc
        pag.attrs.setdefault("source", str(path))
        return pag
    if "otf2" in found:
        return read_otf2(found["otf2"], **options)
    raise FormatError(path, "not a perflow recording: no run.pag, rawtrace.npz or trace/traces.otf2 in it")
