"""Helpers shared by the profile and trace readers.

* :class:`TreeBuilder` interns call paths into a vertex table.
* :class:`MetricRows` collects long-format metric cells.
* :func:`build_profile` turns both into a PAG and fills in whichever of
  ``time_inc``/``time_exc`` the source lacks.
* :func:`reader_errors` converts decoder exceptions into one
  :class:`~perflow.errors.FormatError` naming the file.
"""

from __future__ import annotations

import json
import struct
import tarfile
import zlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import FormatError, PerflowError
from ..kinds import VertexKind, classify_region
from ..pag.literal import complete_time_metrics
from ..pag.pag import PAG, MetricInfo
from ..trace.build import build_pag
from ._values import check_profile, check_trace, clamp_rounding

__all__ = [
    "TreeBuilder",
    "MetricRows",
    "build_profile",
    "build_trace",
    "checked_profile",
    "reader_errors",
    "head_bytes",
    "clean_text",
    "load_json",
    "TIME_UNITS",
]

#: Seconds per unit for time units found in tool output.
TIME_UNITS: dict[str, float] = {
    "s": 1.0,
    "sec": 1.0,
    "second": 1.0,
    "seconds": 1.0,
    "ms": 1e-3,
    "msec": 1e-3,
    "us": 1e-6,
    "usec": 1e-6,
    "microseconds": 1e-6,
    "ns": 1e-9,
    "nsec": 1e-9,
    "nanoseconds": 1e-9,
}

_DECODE_ERRORS = (
    struct.error,
    UnicodeDecodeError,
    KeyError,
    IndexError,
    ValueError,
    TypeError,
    EOFError,
    OverflowError,
    tarfile.TarError,
    zlib.error,
    json.JSONDecodeError,
    AttributeError,
    MemoryError,
    RecursionError,
)


@contextmanager
def reader_errors(path: Path | str, what: str = "") -> Iterator[None]:
    """Re-raise decoder exceptions inside the block as one FormatError naming ``path``."""
    try:
        yield
    except PerflowError:
        raise
    except _DECODE_ERRORS as exc:
        msg = f"{what}: " if what else ""
        raise FormatError(path, f"{msg}corrupt or truncated data ({type(exc).__name__}: {exc})") from exc


def load_json(path: Path | str, raw: bytes) -> Any:
    """Parse UTF-8 JSON; bad text, bad JSON and too deep nesting are FormatErrors with the position."""
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise FormatError(path, f"not UTF-8 text ({exc.reason})", where=f"byte {exc.start}") from None
    except json.JSONDecodeError as exc:
        raise FormatError(path, f"invalid JSON ({exc.msg})", where=f"line {exc.lineno}, column {exc.colno}") from None
    except RecursionError:
        raise FormatError(path, "JSON nested deeper than the parser's limit") from None


def clean_text(s: str) -> str:
    """``s`` with lone surrogates (from JSON escapes or undecodable bytes) as backslash escapes: printable, savable."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return s.encode("utf-8", "backslashreplace").decode("utf-8")
    return s


def head_bytes(path: Path, n: int = 512) -> bytes:
    """The first ``n`` bytes of a file (empty for a directory or an unreadable file)."""
    try:
        if not path.is_file():
            return b""
        with open(path, "rb") as f:
            return f.read(n)
    except OSError:
        return b""


class TreeBuilder:
    """Interns (parent, key) pairs into a vertex table.

    ``key`` identifies a child among its siblings (e.g. a name, or (name,
    file, line)); attributes given with the first :meth:`add` of a key are kept.
    """

    def __init__(self) -> None:
        self._index: dict[tuple[int, Any], int] = {}
        self.rows: list[dict[str, Any]] = []

    def add(self, parent: int, key: Any, name: str, **attrs: Any) -> int:
        """Id of the child ``key`` of ``parent`` (-1 for a root), created when new."""
        k = (parent, key)
        vid = self._index.get(k)
        if vid is None:
            vid = len(self.rows)
            self._index[k] = vid
            attrs = {a: clean_text(v) if isinstance(v, str) else v for a, v in attrs.items()}
            self.rows.append({"name": clean_text(str(name)), "parent": parent, **attrs})
        return vid

    def path(self, names: list[str] | tuple[str, ...], **attrs: Any) -> int:
        """Id of the vertex at the end of a call path of names, creating the missing ones."""
        v = -1
        for n in names:
            v = self.add(v, n, n, **attrs)
        return v

    def __len__(self) -> int:
        return len(self.rows)

    def frame(self) -> pd.DataFrame:
        """The vertex table, with ``kind`` guessed from names where not given."""
        df = pd.DataFrame(self.rows)
        if df.empty:
            return pd.DataFrame({"name": [], "parent": []})
        if "kind" not in df.columns:
            df["kind"] = [classify_region(str(n)).value for n in df["name"]]
        else:
            df["kind"] = [
                (k.value if isinstance(k, VertexKind) else k)
                if isinstance(k, str | VertexKind) and k
                else classify_region(str(n)).value
                for n, k in zip(df["name"], df["kind"])
            ]
        return df


class MetricRows:
    """Long-format metric cells: (vertex, process, thread, metric, value)."""

    def __init__(self) -> None:
        self._cells: dict[str, tuple[list[int], list[int], list[int], list[float]]] = {}

    def add(self, vertex: int, process: int, thread: int, metric: str, value: float) -> None:
        """Add one cell (repeated cells are summed)."""
        c = self._cells.get(metric)
        if c is None:
            c = self._cells[metric] = ([], [], [], [])
        c[0].append(vertex)
        c[1].append(process)
        c[2].append(thread)
        c[3].append(float(value))

    def add_arrays(self, metric: str, vertex: Any, process: Any, thread: Any, values: Any) -> None:
        """Add many cells at once."""
        c = self._cells.get(metric)
        if c is None:
            c = self._cells[metric] = ([], [], [], [])
        n = len(values)
        c[0].extend(np.broadcast_to(np.asarray(vertex, dtype=np.int64), (n,)).tolist())
        c[1].extend(np.broadcast_to(np.asarray(process, dtype=np.int64), (n,)).tolist())
        c[2].extend(np.broadcast_to(np.asarray(thread, dtype=np.int64), (n,)).tolist())
        c[3].extend(np.asarray(values, dtype=np.float64).tolist())

    @property
    def names(self) -> list[str]:
        """Metric names seen so far."""
        return list(self._cells)

    def frame(self) -> pd.DataFrame:
        """A wide table: one row per (vertex, process, thread), absent cells are 0."""
        frames = []
        for m, (v, p, t, x) in self._cells.items():
            keys = pd.MultiIndex.from_arrays(
                [np.asarray(v, np.int64), np.asarray(p, np.int64), np.asarray(t, np.int64)],
                names=["vertex", "process", "thread"],
            )
            codes, uniq = pd.factorize(keys)
            total = np.zeros(len(uniq))
            np.add.at(total, codes, np.asarray(x, np.float64))  # a NaN stays NaN (the value checks then see it)
            frames.append(pd.Series(total, index=pd.MultiIndex.from_tuples(uniq, names=keys.names), name=m))
        if not frames:
            return pd.DataFrame({"vertex": [], "process": [], "thread": []}, dtype=np.int64)
        union = frames[0].index
        for f in frames[1:]:
            union = union.union(f.index, sort=False)
        # absent cells are 0; a NaN read from the file stays NaN (and is refused by the value checks)
        return pd.concat([f.reindex(union, fill_value=0.0) for f in frames], axis=1).reset_index()


def build_profile(
    tree: TreeBuilder | pd.DataFrame,
    metrics: MetricRows | pd.DataFrame,
    *,
    info: Mapping[str, MetricInfo] | None = None,
    attrs: Mapping[str, Any] | None = None,
    complete: bool = True,
    source: Path | str | None = None,
) -> PAG:
    """Build a profile PAG; with ``complete``, derive the missing one of time_inc/time_exc.

    The values are then checked (:func:`perflow.readers._values.check_profile`): a negative,
    non-finite or inconsistent time, count or byte value is a FormatError naming ``source``
    (default ``attrs["source"]``), the call path, the location and the value.
    """
    vt = tree.frame() if isinstance(tree, TreeBuilder) else tree
    mt = metrics.frame() if isinstance(metrics, MetricRows) else metrics
    pag = PAG.from_frames(vt, mt, metric_info=info, attrs=attrs)
    return checked_profile(pag, source if source is not None else (attrs or {}).get("source"), complete=complete)


def checked_profile(pag: PAG, source: Path | str | None, *, complete: bool = True) -> PAG:
    """Check a profile's values (:func:`perflow.readers._values.check_profile`), then complete its times.

    With ``complete``, the missing one of time_inc/time_exc is derived; an
    exclusive time derived by subtraction is checked again (children whose
    inclusive time exceeds their parent's).
    """

    pag = clamp_rounding(pag)
    check_profile(pag, source)
    if complete:
        had = set(pag.metric_names)
        pag = complete_time_metrics(pag)
        if "time_inc" in had and "time_exc" not in had and "time_exc" in pag.metric_names:
            check_profile(pag, source, derived={"time_exc": True})
            pag = clamp_rounding(pag)
    return pag


def build_trace(
    raw: Any,
    source: Path | str | None = None,
    *,
    mpi_inside_calls: bool = False,
    placement: bool = True,
    damage: Any = None,
    **options: Any,
) -> PAG:
    """Check a decoded trace's values (:func:`perflow.readers._values.check_trace`) and build its PAG.

    ``options`` go to :func:`perflow.trace.build.build_pag`; ``damage`` (a
    :class:`~perflow.readers._values.Damage`) is reported in ``attrs["damage"]``.
    """

    if source is None:
        source = raw.attrs.get("source", "trace")
    check_trace(raw, source, mpi_inside_calls=mpi_inside_calls, placement=placement)
    options.setdefault("validate", False)  # check_trace validated the ordering contract
    pag = build_pag(raw, **options)
    if damage is not None:
        damage.attach(pag, source)
    return pag
