"""Folders that no reader claims as one run: the runs they hold.

``perflow.read(folder)`` comes here when no reader's ``detect`` recognises
the folder itself (a Score-P experiment, an HPCToolkit database, an OTF2
archive, a TAU profile directory, a saved PAG ... are read by their readers).
Each entry of the folder (hidden ones and those no reader recognises are
skipped) is asked for its format:

* one run (e.g. a folder holding one Caliper file): it is read as that run;
* several runs: :func:`read_folder` raises a :class:`~perflow.errors.FormatError`
  that lists them and says how to read them together. This is the one place
  that decides; it can return an ensemble instead.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ..errors import FormatError
from . import detect_format, formats, read
from .runs import natural_key, read_ensemble

__all__ = ["runs_in", "read_folder", "MAX_ENTRIES"]

log = logging.getLogger(__name__)

#: Entries of a folder looked at (a folder with more is not searched further).
MAX_ENTRIES = 1000


def runs_in(folder: Path) -> list[tuple[Path, str]]:
    """The runs in ``folder``: ``(entry, format)`` for each entry a reader recognises, in name order."""

    out: list[tuple[Path, str]] = []
    try:
        entries = sorted(e for e in folder.iterdir() if not e.name.startswith((".", "_")))
    except OSError as exc:
        raise FormatError(folder, f"cannot list the folder: {exc}") from None
    if len(entries) > MAX_ENTRIES:
        log.warning("%s: %d entries; only the first %d are looked at", folder, len(entries), MAX_ENTRIES)
        entries = entries[:MAX_ENTRIES]
    for e in entries:
        try:
            out.append((e, detect_format(e)))
        except (FormatError, OSError):
            continue
    return out


def read_folder(folder: Path, *, engine: Any = None, **options: Any) -> Any:
    """Read the runs a folder holds: one run as a PAG, several as an :class:`~perflow.Ensemble`.

    Parameters
    ----------
    folder : Path
        A directory no reader recognises as one run.
    engine, **options
        Passed to :func:`perflow.readers.read` for the run.

    Returns
    -------
    PAG or Ensemble
        The run, or (several runs) the ensemble of them in natural name order.
    """

    runs = runs_in(folder)
    if not runs:
        raise FormatError(
            folder,
            "cannot tell the format, and no file or folder in it is a run perflow reads; name the format "
            f"explicitly (format= or --format), one of {', '.join(formats())}",
        )
    if len(runs) == 1:
        entry, fmt = runs[0]
        log.debug("%s holds one run: reading %s (%s)", folder, entry.name, fmt)
        pag = read(entry, format=fmt, engine=engine, **options)
        pag.attrs.setdefault("folder", str(folder))
        return pag

    log.debug("%s holds %d runs: reading them as an ensemble", folder, len(runs))
    ens = read_ensemble(sorted((e for e, _ in runs), key=natural_key), engine=engine, **options)
    return ens
