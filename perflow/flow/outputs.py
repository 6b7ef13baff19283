"""Writing flow outputs to files and showing them as text.

Each value goes to the format that fits it:

=====================================  =====================
value                                  file
=====================================  =====================
PAG                                    ``NAME.pag/`` (saved PAG)
DataFrame, Series                      ``NAME.csv``
vertex / edge set (``to_frame()``)     ``NAME.csv``
matplotlib Figure (``savefig``)        ``NAME.png``
str: an HTML document                  ``NAME.html``
str: Markdown (a ``# title`` first)    ``NAME.md``
other str                              ``NAME.txt``
dict, list, number, bool, None         ``NAME.json``
other objects with ``_repr_html_``     ``NAME.html``
anything else                          ``NAME.txt`` (its repr)
=====================================  =====================

:func:`write_outputs` writes every output of a run and ``index.html``, one
self-contained page with the reports, tables, figures, call tree and (for a
trace) the interactive timeline. :func:`run_page` is the one place that page
is assembled (``FlowResult.to_html``, ``perflow run --output`` and
``perflow view`` use it): the run's values and its input PAG (any
:class:`~perflow.PAG`, an engine's included) handed to the ``page`` hook of
the pass library (:func:`perflow.flow.registry.library_hook`: this layer
names no pass and imports none).

:func:`as_text` fits tables to the terminal: columns that do not fit are left
out, and a note names them.
"""

from __future__ import annotations

import html
import json
import logging
import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import progress
from .._atomic import all_or_nothing, atomic_path, write_text
from .._json import json_default
from ..errors import FlowError
from ..pag.pag import PAG
from ..units import column_labels
from .registry import library_hook

__all__ = [
    "write_value",
    "write_outputs",
    "write_index",
    "run_page",
    "result_page",
    "input_pag",
    "html_fragment",
    "as_text",
    "text_suffix",
    "fit_width",
    "SMALL_TABLE_ROWS",
]

log = logging.getLogger(__name__)

#: Tables with at most this many rows are printed by ``perflow run``.
SMALL_TABLE_ROWS = 50


def _frame(value: Any) -> pd.DataFrame | pd.Series | None:
    if isinstance(value, pd.DataFrame | pd.Series):
        return value
    if hasattr(value, "to_frame") and hasattr(value, "_ids"):
        return value.to_frame()
    return None


def text_suffix(text: str) -> str:
    """``.html`` for an HTML document, ``.md`` for Markdown (a first line ``# title``), else ``.txt``."""
    head = text.lstrip()[:15].lower()
    if head.startswith(("<!doctype html", "<html")):
        return ".html"
    first = text.lstrip("\n").split("\n", 1)[0]
    return ".md" if re.match(r"#{1,6} \S", first) else ".txt"


def write_value(value: Any, directory: str | os.PathLike[str], name: str) -> Path:
    """Write ``value`` to ``directory`` as ``name`` plus the fitting extension; return the path.

    Every file is written atomically (:mod:`perflow._atomic`): a run killed
    while writing leaves the previous file (or none), never a truncated one.
    """
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    safe = name.replace("/", "_").replace("\\", "_").lstrip(".") or "output"
    if isinstance(value, PAG):
        return Path(value.save(d / f"{safe}.pag"))
    frame = _frame(value)
    if frame is not None:
        p = d / f"{safe}.csv"
        out = frame.copy(deep=False)
        if not isinstance(frame.columns, pd.MultiIndex):  # headers say the unit and how a column aggregates
            out.columns = column_labels(frame, with_unit=True)
        with atomic_path(p) as tmp:
            out.to_csv(tmp, index=not isinstance(frame.index, pd.RangeIndex))
        return p
    if hasattr(value, "savefig"):
        p = d / f"{safe}.png"
        with progress.task(f"rendering {p.name}"), atomic_path(p) as tmp:
            value.savefig(tmp, dpi=150, bbox_inches="tight")
        return p
    if isinstance(value, str):
        return write_text(d / f"{safe}{text_suffix(value)}", value if value.endswith("\n") else value + "\n")
    if value is None or isinstance(value, dict | list | tuple | bool | int | float | np.integer | np.floating):
        return write_text(d / f"{safe}.json", json.dumps(value, indent=2, default=json_default) + "\n")
    if hasattr(value, "_repr_html_"):
        return write_text(d / f"{safe}.html", value._repr_html_())
    return write_text(d / f"{safe}.txt", repr(value) + "\n")


def run_page(
    values: Mapping[str, Any],
    pag: PAG | None = None,
    steps: pd.DataFrame | None = None,
    *,
    title: str = "perflow report",
    subtitle: str = "",
) -> str:
    """The self-contained HTML page of a run: its values, the call tree and timeline of ``pag``, its steps.

    Assembled by the ``page`` hook of the pass library (see the module docstring).

    Raises
    ------
    FlowError
        When no pass library provides a page (a broken install).
    """
    page = library_hook("page")
    if page is None:
        raise FlowError("no pass library provides a report page (is perflow installed? see `perflow passes`)")
    return str(page(dict(values), pag, steps, title=title, subtitle=subtitle))


def input_pag(result: Any) -> PAG | None:
    """The first PAG among a run's inputs (shown as the page's call tree and timeline), if any."""
    return next((v for v in getattr(result, "inputs", {}).values() if isinstance(v, PAG)), None)


def result_page(result: Any) -> str:
    """The page of a :class:`~perflow.flow.result.FlowResult` (what its ``index.html`` holds)."""
    return run_page(
        result.outputs,
        input_pag(result),
        result.steps,
        title=f"perflow: {result.flow.name}",
        subtitle=result.summary(),
    )


def write_index(result: Any, directory: str | os.PathLike[str]) -> Path:
    """Write ``directory/index.html``: the page of a run (:func:`result_page`)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    p = write_text(d / "index.html", result_page(result))
    log.info("wrote %s", p)
    return p


def write_outputs(result: Any, directory: str | os.PathLike[str], *, index: bool = True) -> dict[str, Path]:
    """Write every computed output of a :class:`~perflow.flow.result.FlowResult`, and ``index.html``.

    All or nothing (:func:`perflow._atomic.all_or_nothing`): when one cannot
    be written (a full disk), none replaces the previous outputs.
    """

    with all_or_nothing():
        return _write_all(result, directory, index=index)


def _write_all(result: Any, directory: str | os.PathLike[str], *, index: bool) -> dict[str, Path]:
    paths = {name: write_value(v, directory, name) for name, v in result.outputs.items()}
    if index:
        paths["index"] = write_index(result, directory)
    return paths


def html_fragment(value: Any, name: str = "", *, max_rows: int = 20) -> str:
    """One value as an HTML fragment for a notebook (the pass library's ``fragment`` hook; else its repr)."""
    fragment = library_hook("fragment")
    if fragment is None:
        return f"<pre>{html.escape(repr(value)[:2000])}</pre>"
    return str(fragment(value, name=name, max_rows=max_rows))


_CELL_SPLIT = re.compile(r"(?<!\\)\|")


def _terminal_width() -> int:
    return shutil.get_terminal_size((120, 40)).columns


def fit_width(text: str, width: int | None = None) -> str:
    """Markdown or aligned-text tables in ``text`` cut to ``width`` columns, with a note naming the left-out ones.

    Markdown tables (lines starting with ``|``) lose their last columns until
    they fit; other lines are kept as they are.
    """
    width = width or _terminal_width()
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        if not lines[i].startswith("|"):
            out.append(lines[i])
            i += 1
            continue
        j = i
        while j < len(lines) and lines[j].startswith("|"):
            j += 1
        block = lines[i:j]
        i = j
        if max(len(b) for b in block) <= width:
            out.extend(block)
            continue
        rows = [[c.strip() for c in _CELL_SPLIT.split(b.strip())[1:-1]] for b in block]
        ncol = min(len(r) for r in rows)
        widths = [max(len(r[k]) for r in rows) for k in range(ncol)]
        keep = ncol
        while keep > 1 and 1 + sum(w + 3 for w in widths[:keep]) + len(" ...|") > width:
            keep -= 1
        for r in rows:
            cells = [r[k].ljust(widths[k]) for k in range(keep)]
            out.append("| " + " | ".join(cells) + " | ... |")
        out.append(f"(columns not shown to fit {width} characters: {', '.join(rows[0][keep:ncol])})")
    return "\n".join(out)


def _frame_text(frame: pd.DataFrame | pd.Series, width: int) -> str:
    if isinstance(frame, pd.Series):
        frame = frame.to_frame()
    with pd.option_context("display.width", 10**6, "display.max_columns", None):
        text = frame.to_string()
        if max(len(ln) for ln in text.split("\n")) <= width:
            return text
        cols = list(frame.columns)
        for keep in range(len(cols) - 1, 0, -1):
            text = frame[cols[:keep]].to_string()
            if max(len(ln) for ln in text.split("\n")) <= width:
                left = ", ".join(map(str, cols[keep:]))
                return f"{text}\n(columns not shown to fit {width} characters: {left})"
        return text


def as_text(value: Any, *, max_rows: int = SMALL_TABLE_ROWS, width: int | None = None) -> str | None:
    """The value as text for a terminal, or ``None`` when it is not a report (PAG, figure, big table).

    Tables (and Markdown tables in reports) are cut to ``width`` columns (default: the terminal's).
    """
    width = width or _terminal_width()
    if isinstance(value, str):
        return fit_width(value.rstrip("\n"), width)
    frame = _frame(value)
    if frame is not None:
        if len(frame) > max_rows:
            return None
        return _frame_text(frame, width)
    if value is None or isinstance(value, dict | list | tuple | bool | int | float | np.integer | np.floating):
        text = json.dumps(value, indent=2, default=json_default)
        return text if len(text) <= 4000 else None
    return None
