"""The SDK for readers: what a reader module of another package needs to turn a file into a PAG.

A reader module defines ``FORMAT``, ``DESCRIPTION``, ``detect(path)`` and
``read(path, **options)`` (see :mod:`perflow.readers`) and registers under the
``perflow.readers`` entry-point group. For a **profile**, intern call paths
with :class:`TreeBuilder`, collect metric cells with :class:`MetricRows` and
make the PAG with :func:`build_profile` (it fills in whichever of
``time_inc``/``time_exc`` the source lacks), or call :meth:`PAG.from_frames`
with tables of your own. For a **trace**, fill a :class:`RawTrace` (or a
:class:`TraceBuilder` for small ones) and call :func:`build_pag`. Wrap the
decoding in :func:`reader_errors` so that any decoder exception becomes one
:class:`FormatError` naming the file; :func:`head_bytes` reads the few bytes
a ``detect`` looks at, :func:`load_json` parses JSON with errors naming the
file, :func:`clean_text` makes names printable, :data:`TIME_UNITS` converts
time units to seconds, :func:`classify_region` gives a region name its
:class:`VertexKind`.

>>> from perflow.sdk.readers import MetricRows, TreeBuilder, build_profile
>>> tree, rows = TreeBuilder(), MetricRows()
>>> v = tree.path(["main", "solve"])
>>> rows.add(v, 0, 0, "time_exc", 1.5)
>>> build_profile(tree, rows, attrs={"format": "mine"}).aggregate("time_inc").tolist()
[1.5, 1.5]
"""

from __future__ import annotations

from ..errors import FormatError
from ..kinds import VertexKind, classify_region
from ..pag.pag import PAG, MetricInfo
from ..readers._common import (
    TIME_UNITS,
    MetricRows,
    TreeBuilder,
    build_profile,
    clean_text,
    head_bytes,
    load_json,
    reader_errors,
)
from ..trace.build import build_pag
from ..trace.builder import TraceBuilder
from ..trace.raw import RawTrace

__all__ = [
    "PAG",
    "MetricInfo",
    "VertexKind",
    "classify_region",
    "FormatError",
    "TreeBuilder",
    "MetricRows",
    "build_profile",
    "reader_errors",
    "head_bytes",
    "load_json",
    "clean_text",
    "TIME_UNITS",
    "RawTrace",
    "TraceBuilder",
    "build_pag",
]
