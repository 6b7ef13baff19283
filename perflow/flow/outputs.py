"""Writing flow outputs to files and showing them as text.

Each value goes to the format that fits it:

=====================================  =====================
value                                  file
=====================================  =====================
PAG                                    ``NAME.pag/`` (saved PAG)
DataFrame, Series                      ``NAME.csv``
vertex / edge set (``to_frame()``)     ``NAME.csv``
matplotlib Figure (``savefig``)        ``NAME.png``
a file object (``write_file(stem)``)   ``NAME`` + its suffix (e.g. a CUBE4 file, ``NAME.cubex``)
str: an HTML document                  ``NAME.html``
str: Markdown (a ``# title`` first)    ``NAME.md``
other str                              ``NAME.txt``
dict, list, number, bool, None         ``NAME.json``
other objects with ``_repr_html_``     ``NAME.html``
anything else                          ``NAME.txt`` (its repr)
=====================================  =====================

:func:`write_outputs` writes every output of a run and ``index.html``, one
self-contained page with the reports, tables, figures, call tree and (for a
trace) the interactive timeline, made by the pass library's pass for the
``page`` role (:mod:`perflow.flow.roles`: this layer never names a pass).

:func:`as_text` fits tables to the terminal (:mod:`perflow.flow.terminal`): no
column is left out; long call paths are shortened in the middle and a table still
too wide is wrapped into parts.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from perflow.units import column_labels, column_units, format_column

from .. import progress
from .._atomic import all_or_nothing, atomic_path, write_bytes, write_text
from .._json import json_default
from ..pag.pag import PAG
from .csvtext import write_csv
from .registry import role_pass
from .terminal import fit_table, fit_text

__all__ = [
    "write_value",
    "write_outputs",
    "write_index",
    "run_page",
    "input_pag",
    "as_text",
    "text_suffix",
    "fit_width",
    "SMALL_TABLE_ROWS",
]

log = logging.getLogger(__name__)

#: Tables with at most this many rows are printed by ``perflow run``.
SMALL_TABLE_ROWS = 50
#: Resolution of the PNG files of figures (and of the figures in the run's page).
FIGURE_DPI = 150


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
            write_csv(out, tmp, index=not isinstance(frame.index, pd.RangeIndex))  # to_csv's text, faster
        return p
    if callable(getattr(value, "write_file", None)):  # an object that writes itself (atomically), e.g. a .cubex
        return Path(value.write_file(d / safe))
    if hasattr(value, "savefig"):
        p = d / f"{safe}.png"
        with progress.task(f"rendering {p.name}"), atomic_path(p) as tmp:
            value.savefig(tmp, dpi=FIGURE_DPI, bbox_inches="tight")
        return p
    if isinstance(value, str):
        suffix = text_suffix(value)
        if suffix == ".md":
            value = _figures_to_files(value, d, f"{safe}_files")
        return write_text(d / f"{safe}{suffix}", value if value.endswith("\n") else value + "\n")
    if value is None or isinstance(value, dict | list | tuple | bool | int | float | np.integer | np.floating):
        return write_text(d / f"{safe}.json", json.dumps(value, indent=2, default=json_default) + "\n")
    if hasattr(value, "_repr_html_"):
        return write_text(d / f"{safe}.html", value._repr_html_())
    return write_text(d / f"{safe}.txt", repr(value) + "\n")


_DATA_PNG = re.compile(r"!\[([^\]]*)\]\(data:image/png;base64,([A-Za-z0-9+/=\s]+)\)")


def _figure_name(i: int, alt: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", alt).strip("-").lower()[:60] or "figure"
    return f"fig-{i}-{slug}.png"


def _figures_to_files(text: str, directory: Path, folder: str) -> str:
    """A Markdown report's inline PNGs (data URIs) written to ``directory/folder/fig-N-*.png`` and linked."""
    import base64

    count = 0

    def save(m: re.Match[str]) -> str:
        nonlocal count
        count += 1
        name = _figure_name(count, m.group(1))
        (directory / folder).mkdir(parents=True, exist_ok=True)

        write_bytes(directory / folder / name, base64.b64decode(m.group(2)))
        return f"![{m.group(1)}]({folder}/{name})"

    return _DATA_PNG.sub(save, text)


def _figures_as_names(text: str, files: list[Path] | None) -> str:
    """Inline PNGs of a report shown as ``[figure: alt -> file]`` (never as base64 on a terminal)."""
    files = list(files or [])

    def name(m: re.Match[str]) -> str:
        f = files.pop(0) if files else None
        return (
            f"[figure: {m.group(1) or 'figure'} -> {f}]"
            if f
            else f"[figure: {m.group(1) or 'figure'}; --output DIR writes it]"
        )

    return _DATA_PNG.sub(name, text)


def input_pag(result: Any) -> Any:
    """The first PAG among a run's inputs (shown as the page's call tree and timeline), if any."""
    return next((v for v in getattr(result, "inputs", {}).values() if isinstance(v, PAG)), None)


def run_page(
    values: dict[str, Any],
    pag: Any = None,
    steps: pd.DataFrame | None = None,
    *,
    title: str = "perflow report",
    subtitle: str = "",
    findings: pd.DataFrame | None = None,
    folder: str | None = None,
) -> str:
    """The self-contained HTML page of a run, the one assembly every engine and command uses.

    Made by the pass library's pass for the ``page`` role (:mod:`perflow.flow.roles`).
    """
    page = role_pass("page")(dict(values), pag, steps, findings, title=title, subtitle=subtitle, folder=folder)
    return str(page)


def write_index(
    values: dict[str, Any],
    directory: str | os.PathLike[str],
    *,
    title: str = "perflow report",
    subtitle: str = "",
    steps: pd.DataFrame | None = None,
    pag: Any = None,
    findings: pd.DataFrame | None = None,
) -> Path:
    """Write ``directory/index.html``: the self-contained page of a run (:func:`run_page`)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    p = d / "index.html"
    write_text(p, run_page(values, pag, steps, title=title, subtitle=subtitle, findings=findings, folder=str(d)))
    log.debug("wrote %s", p)
    return p


def write_outputs(
    result: Any, directory: str | os.PathLike[str], *, index: bool = True, findings: pd.DataFrame | None = None
) -> dict[str, Path]:
    """Write every computed output of a :class:`~perflow.flow.result.FlowResult`, and ``index.html``.

    All or nothing (:func:`perflow._atomic.all_or_nothing`): when one cannot
    be written (a full disk), none replaces the previous outputs. ``findings``
    (the run's findings, from the pass for the ``findings`` role, computed here when not given) is written as
    ``findings.csv`` (unless an output has that name) and opens the page.
    """

    with all_or_nothing():
        return _write_all(result, directory, index=index, findings=findings)


def _write_all(
    result: Any, directory: str | os.PathLike[str], *, index: bool, findings: pd.DataFrame | None
) -> dict[str, Path]:
    paths = {name: write_value(v, directory, name) for name, v in result.outputs.items()}
    if index:
        pag = input_pag(result)
        if findings is None:
            findings = role_pass("findings")(result.outputs, pag)
        if "findings" not in result.outputs and findings is not None and len(findings):
            paths["findings"] = write_value(findings, directory, "findings")
        paths["index"] = write_index(
            result.outputs,
            directory,
            title=f"perflow: {result.flow.name}",
            subtitle=result.summary(),
            steps=result.steps,
            pag=pag,
            findings=findings,
        )
    return paths


def terminal_width() -> int:
    """The terminal's width in characters (``COLUMNS``, else the terminal's, else 120)."""
    return shutil.get_terminal_size((120, 40)).columns


def fit_width(text: str, width: int | None = None) -> str:
    """The tables in ``text`` (Markdown and aligned text) fitted to ``width`` columns, none left out.

    See :mod:`perflow.flow.terminal`: long call paths are shortened in the middle, then a table
    still too wide is wrapped into parts that repeat the columns naming each row.
    """

    return fit_text(text, width or terminal_width())


def _frame_text(frame: pd.DataFrame | pd.Series, width: int) -> str:
    """A table as aligned text: numbers formatted with their units, fitted to ``width`` (no column lost)."""

    if isinstance(frame, pd.Series):
        frame = frame.to_frame()
    if not isinstance(frame.index, pd.RangeIndex) or frame.index.name is not None:
        frame = frame.reset_index()
    if isinstance(frame.columns, pd.MultiIndex):
        frame = frame.copy(deep=False)
        frame.columns = [" ".join(str(x) for x in c if str(x)) for c in frame.columns]
    units = column_units(frame, None)
    header = column_labels(frame)
    cells = [format_column(frame[c], units[c]) for c in frame.columns]
    right = [
        pd.api.types.is_numeric_dtype(frame[c].dtype) and not pd.api.types.is_bool_dtype(frame[c].dtype)
        for c in frame.columns
    ]
    rows = [list(r) for r in zip(*cells)] if cells else []
    lines = fit_table(header, rows, right, width, style="text")
    note = str(frame.attrs.get("note", "") or "")
    return "\n".join(lines + ([note] if note else []))


def as_text(
    value: Any, *, max_rows: int = SMALL_TABLE_ROWS, width: int | None = None, figures: list[Path] | None = None
) -> str | None:
    """The value as text for a terminal, or ``None`` when it is not a report (PAG, figure, big table).

    Tables (and Markdown tables in reports) are fitted to ``width`` columns (default: the terminal's)
    without losing a column. A report's inline figures are named, with the files ``figures`` they
    were written to, never printed as base64.
    """
    width = width or terminal_width()
    if isinstance(value, str):
        return fit_width(_figures_as_names(value.rstrip("\n"), figures), width)
    frame = _frame(value)
    if frame is not None:
        if len(frame) > max_rows:
            return None
        return _frame_text(frame, width)
    if value is None or isinstance(value, dict | list | tuple | bool | int | float | np.integer | np.floating):
        text = json.dumps(value, indent=2, default=json_default)
        return text if len(text) <= 4000 else None
    return None
