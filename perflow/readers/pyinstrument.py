"""pyinstrument profiles: the JSON renderer's output and saved sessions (``.pyisession``).

* ``pyinstrument -r json -o out.json prog.py`` (``JSONRenderer``): run
  metadata (``start_time``, ``duration``, ``sample_count``, ``cpu_time``,
  ``target_description`` or ``program``) and ``root_frame``, a tree of frames
  ``{"function", "file_path", "line_no", "time", "await_time", "children"}``.
  ``time`` is the frame's inclusive time in seconds (the renderer has already
  applied pyinstrument's processors: pyinstrument's own frames, frames under
  1% and library internals may have been removed or grouped). A ``[self]``
  child is the time the frame spent in itself: it is not a vertex, its time
  is the frame's ``time_exc`` (exclusive = inclusive - children's inclusive).
* ``pyinstrument -r pyisession -o out.pyisession prog.py`` (``Session.save``):
  the raw samples, ``frame_records`` = ``[[frame identifiers root first],
  seconds]`` with identifiers ``function\\0file\\0line`` (plus ``\\1``-separated
  attributes). Every sample adds its time to the ``time_exc`` of the frame it
  ended in and one to its ``samples``; the frames of ``start_call_stack``
  (the code that started the profiler) are left out, so the roots are the
  profiled code (and the thread frame is not a vertex).

pyinstrument is a sampling profiler: there are no call counts (no
``visits``). One thread, one process.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import FormatError
from ..kinds import VertexKind
from ..pag.pag import PAG, MetricInfo
from ._common import MetricRows, TreeBuilder, build_profile, head_bytes, load_json, reader_errors

FORMAT = "pyinstrument"
DESCRIPTION = "pyinstrument profiles (-r json output, or a saved .pyisession)"

_META = ("start_time", "duration", "sample_count", "cpu_time", "target_description", "program", "min_interval")


def detect(path: Path) -> bool:
    """A JSON object with ``root_frame`` (the renderer) or ``frame_records`` (a session)."""
    if not path.is_file():
        return False
    head = head_bytes(path, 4096)
    if head.lstrip()[:1] != b"{":
        return False
    if b'"root_frame"' in head or b'"frame_records"' in head:
        return True
    return path.suffix == ".pyisession" or (b'"sample_count"' in head and b'"start_time"' in head)


def _kind(function: str, file: str) -> str:
    if file in ("<built-in>", "") or function.startswith("<built-in"):
        return VertexKind.FUNCTION.value
    return VertexKind.PYTHON.value


def _render_tree(doc: Mapping[str, Any], path: Path, tree: TreeBuilder, rows: MetricRows) -> None:
    root = doc.get("root_frame")
    if root is None:
        raise FormatError(path, "a pyinstrument JSON profile without 'root_frame' (the program ran too briefly?)")
    stack: list[tuple[Any, int, str]] = [(root, -1, "root_frame")]
    while stack:
        fr, parent, where = stack.pop()
        if not isinstance(fr, Mapping):
            raise FormatError(path, f"{where} is a {type(fr).__name__}, not a frame object")
        function = fr.get("function")
        t = fr.get("time")
        if not isinstance(function, str) or not isinstance(t, int | float) or isinstance(t, bool):
            raise FormatError(path, f"{where}: a frame needs 'function' (text) and 'time' (a number)")
        if function == "[self]" and parent >= 0:
            continue  # the parent's own time: its time_exc, derived from time_inc below
        file = str(fr.get("file_path") or "")
        line = fr.get("line_no", -1)
        line = int(line) if isinstance(line, int) and not isinstance(line, bool) else -1
        v = tree.add(parent, (function, file, line), function, file=file, line=line, kind=_kind(function, file))
        rows.add(v, 0, 0, "time_inc", float(t))
        aw = fr.get("await_time")
        if isinstance(aw, int | float) and not isinstance(aw, bool) and aw:
            rows.add(v, 0, 0, "await_time", float(aw))
        children = fr.get("children") or []
        if not isinstance(children, list):
            raise FormatError(path, f"{where}: 'children' is not a list")
        for i, c in reversed(list(enumerate(children))):
            stack.append((c, v, f"{where}.children[{i}]"))


def _frame(ident: str) -> tuple[str, str, int]:
    base = ident.split("\x01", 1)[0]
    parts = base.split("\x00")
    function = parts[0]
    file = parts[1] if len(parts) > 1 else ""
    line = int(parts[2]) if len(parts) > 2 and parts[2].lstrip("-").isdigit() else -1
    return function, file, line


def _session_tree(doc: Mapping[str, Any], path: Path, tree: TreeBuilder, rows: MetricRows) -> None:
    records = doc.get("frame_records")
    if not isinstance(records, list):
        raise FormatError(path, "a pyinstrument session without a 'frame_records' list")
    start = doc.get("start_call_stack") or []
    start_bases = [str(x).split("\x01", 1)[0] for x in start] if isinstance(start, list) else []
    cache: dict[tuple[int, str], int] = {}
    for i, rec in enumerate(records):
        if not (isinstance(rec, list | tuple) and len(rec) == 2 and isinstance(rec[0], list)):
            raise FormatError(path, "a frame record is not [stack, time]", where=f"frame_records[{i}]")
        stack, t = rec
        if not isinstance(t, int | float) or isinstance(t, bool):
            raise FormatError(path, "a frame record's time is not a number", where=f"frame_records[{i}]")
        skip = 1  # the thread frame, at least
        while (
            skip < len(start_bases) and skip < len(stack) and str(stack[skip]).split("\x01", 1)[0] == start_bases[skip]
        ):
            skip += 1
        frames = stack[skip:]
        v = -1
        for ident in frames:
            if not isinstance(ident, str):
                raise FormatError(path, "a frame identifier is not text", where=f"frame_records[{i}]")
            key = (v, ident)
            nv = cache.get(key)
            if nv is None:
                function, file, line = _frame(ident)
                nv = tree.add(v, (function, file, line), function, file=file, line=line, kind=_kind(function, file))
                cache[key] = nv
            v = nv
        if v >= 0:
            rows.add(v, 0, 0, "time_exc", float(t))
            rows.add(v, 0, 0, "samples", 1.0)


def read(path: Path | str, **options: Any) -> PAG:
    """Read a pyinstrument JSON profile or saved session.

    Parameters
    ----------
    path : path-like
        ``-r json`` output or a ``.pyisession`` file.

    Returns
    -------
    PAG
        ``time_inc``/``time_exc`` in seconds (``samples`` for sessions,
        ``await_time`` when async code awaited); ``attrs["metadata"]`` holds
        the run's metadata.
    """
    if options:
        raise TypeError(f"the pyinstrument reader takes no options (got {', '.join(options)})")
    path = Path(path)
    with reader_errors(path, "pyinstrument"):
        doc = load_json(path, path.read_bytes())
        if not isinstance(doc, Mapping):
            raise FormatError(path, f"a pyinstrument profile is a JSON object, not a {type(doc).__name__}")
        tree, rows = TreeBuilder(), MetricRows()
        session = "frame_records" in doc
        (_session_tree if session else _render_tree)(doc, path, tree, rows)
        if not len(tree):
            raise FormatError(path, "the profile holds no frames")
        meta = {k: doc[k] for k in _META if k in doc and isinstance(doc[k], str | int | float)}
        info = {
            "await_time": MetricInfo("await_time", "s", "inclusive", "time the frame awaited (async code)"),
            "samples": MetricInfo("samples", "count", "exclusive", "samples that ended in the frame"),
        }
        attrs = {"nprocs": 1, "metadata": meta, "pyinstrument_form": "session" if session else "json"}
        return build_profile(tree, rows, info=info, attrs=attrs, source=path)
