"""OTF2 traces (Score-P and other OTF2 writers) -> :class:`~perflow.trace.raw.RawTrace`.

>>> from perflow.readers.otf2 import decode
>>> raw = decode("scorep-run/traces.otf2")            # doctest: +SKIP
>>> raw = decode("scorep-run", engine="bindings")     # the slow reference decoder  # doctest: +SKIP

See ``docs/formats.md`` ("OTF2 traces") for what is read and how it maps.
"""

from __future__ import annotations

from typing import Any

from ._decode import decode, fast_available
from ._paths import is_otf2

__all__ = ["decode", "is_otf2", "fast_available", "write_otf2"]


def __getattr__(name: str) -> Any:
    if name == "write_otf2":  # lazy: the writer pulls in numba
        from ...writers.otf2 import write_otf2

        return write_otf2
    raise AttributeError(name)
