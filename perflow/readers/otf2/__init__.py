"""OTF2 traces (Score-P and other OTF2 writers) -> :class:`~perflow.trace.raw.RawTrace`.

>>> from perflow.readers.otf2 import decode
>>> raw = decode("scorep-run/traces.otf2")            # doctest: +SKIP
>>> raw = decode("scorep-run", decoder="bindings")     # the slow reference decoder  # doctest: +SKIP

See ``docs/formats.md`` ("OTF2 traces") for what is read and how it maps.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ... import progress
from .._common import build_trace
from ._decode import decode, fast_available
from ._paths import is_otf2

__all__ = ["FORMAT", "DESCRIPTION", "decode", "detect", "is_otf2", "fast_available", "read"]

FORMAT = "otf2"
DESCRIPTION = "OTF2 traces (Score-P and other OTF2 writers): anchor file traces.otf2 or its directory"


def detect(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is an OTF2 anchor file or a directory holding one (reader-registry hook)."""
    return is_otf2(Path(path))


def read(path: str | os.PathLike[str], *, decoder: str = "auto", jobs: int | None = None, **build: Any) -> Any:
    """Read an OTF2 trace into a trace-backed PAG: :func:`decode` then :func:`perflow.trace.build.build_pag`.

    Parameters
    ----------
    path : str or os.PathLike
        The anchor file (``traces.otf2``) or its directory.
    decoder, jobs
        See :func:`decode`.
    **build
        Passed to :func:`~perflow.trace.build.build_pag` (e.g. ``close_open=True``).

    Returns
    -------
    PAG
    """

    with progress.task(f"decoding {Path(path).name}"):
        raw = decode(path, decoder=decoder, jobs=jobs)
    with progress.task("building the PAG"):
        # the build drops the events as it consumes them (the peak memory); a clock correction reads them again
        build.setdefault("reread", lambda: decode(path, decoder=decoder, jobs=jobs))
        return build_trace(raw, path, mpi_inside_calls=True, **build)
