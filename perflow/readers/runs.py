"""Reading several runs: a directory of runs, a glob, or a list of those (for ensembles and multi-run passes).

:func:`expand_runs` turns a specification into the runs it names, and
:func:`read_run_list` reads them with :func:`perflow.read`:

* a PAG is kept as it is;
* a file, or a directory that is one run (an OTF2 archive's directory, an
  HPCToolkit database, a TAU profile directory, a saved PAG, a recording),
  is one run;
* any other directory holds one run per entry matching ``pattern`` (hidden
  entries skipped), in natural name order (numbers as numbers: ``27_cores`` before ``125_cores``);
* a string with glob characters (``*``, ``?``, ``[``) is expanded (``**``
  recursively), matches in name order; a pattern matching nothing is an
  error naming it;
* a list mixes all of these, in the order given.

A run from Score-P (an OTF2 trace or a CUBE profile) with a ``scorep.cfg``
beside it gets that configuration in ``attrs["scorep_config"]`` (the
``SCOREP_*`` variables, quotes removed), for the ensemble's metadata table.

Importing this module installs :func:`read_run_list` as the reader of
:meth:`perflow.pag.ensemble.Ensemble.from_paths` (``perflow.Ensemble`` comes
from here).
"""

from __future__ import annotations

import glob
import os
import re
from pathlib import Path
from typing import Any

from ..errors import FormatError
from ..pag.ensemble import Ensemble, set_path_reader
from ..pag.pag import PAG
from . import detect_format, read, reader_module

__all__ = ["natural_key", "expand_runs", "read_run_list", "read_runs", "read_ensemble", "scorep_config", "Ensemble"]

_GLOB_CHARS = set("*?[")


def natural_key(p: Any) -> list[Any]:
    """Sort key of a path's name with numbers compared as numbers (``27_cores`` before ``125_cores``)."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", Path(p).name)]


def _is_run(p: Path, fmt: str | None) -> bool:

    try:
        return bool(reader_module(fmt).detect(p)) if fmt else bool(detect_format(p))
    except (FormatError, OSError):
        return False


def _expand_one(entry: Any, pattern: str, fmt: str | None) -> list[Any]:
    if isinstance(entry, PAG):
        return [entry]
    if not isinstance(entry, str | os.PathLike):
        raise FormatError(str(entry), f"a run must be a path or a PAG, not a {type(entry).__name__}")
    text = os.fspath(entry)
    if _GLOB_CHARS & set(text) and not Path(text).expanduser().exists():
        found = sorted(glob.glob(os.path.expanduser(text), recursive=True), key=natural_key)
        found = [f for f in found if not Path(f).name.startswith(".")]
        if not found:
            raise FormatError(text, "no runs match this pattern")
        return [Path(f) for f in found]
    p = Path(text).expanduser()
    if not p.exists():
        raise FormatError(p, "no such file or directory")
    if p.is_dir() and not _is_run(p, fmt):
        found = sorted((q for q in p.glob(pattern) if not q.name.startswith(".")), key=natural_key)
        if not found:
            raise FormatError(p, f"no runs matching {pattern!r} in this directory")
        return found
    return [p]


def expand_runs(spec: Any, *, pattern: str = "*", format: str | None = None) -> list[Any]:  # noqa: A002
    """The runs a specification names: PAGs and paths, in order (see the module docstring)."""
    entries = list(spec) if isinstance(spec, list | tuple) else [spec]
    if not entries:
        raise FormatError("runs", "no runs given")
    out: list[Any] = []
    for e in entries:
        out += _expand_one(e, pattern, format)
    return out


def scorep_config(path: Path) -> dict[str, str]:
    """The ``SCOREP_*`` variables of the ``scorep.cfg`` in a run's directory (or beside its file), if any."""
    p = Path(path)
    for d in (p, *p.parents[:2]) if p.is_dir() else p.parents[:2]:
        cfg = d / "scorep.cfg"
        if cfg.is_file():
            out = {}
            for line in cfg.read_text(encoding="utf-8", errors="replace").splitlines():
                key, eq, value = line.strip().partition("=")
                if eq and key.startswith("SCOREP_"):
                    out[key] = value.strip().strip("'\"")
            return out
    return {}


def read_run_list(spec: Any, *, format: str | None = None, pattern: str = "*", **options: Any) -> list[PAG]:  # noqa: A002
    """Read the runs a specification names (see the module docstring) into PAGs, in order.

    Parameters
    ----------
    spec : path, glob, PAG or list of those
        The runs.
    format : str, optional
        Force a format for every run instead of detecting it.
    pattern : str
        Glob selecting the runs inside a directory of runs.
    **options
        Passed to the reader of every run.
    """

    out: list[PAG] = []
    for item in expand_runs(spec, pattern=pattern, format=format):
        if isinstance(item, PAG):
            out.append(item)
            continue
        pag = read(item, format=format, **options)
        if pag.attrs.get("format") in ("otf2", "cube") and "scorep_config" not in pag.attrs:
            cfg = scorep_config(item)
            if cfg:
                pag.attrs["scorep_config"] = cfg
        out.append(pag)
    return out


#: ``perflow.read_runs``: the runs as a list of PAGs (``perflow.read_ensemble`` gives an Ensemble)
read_runs = read_run_list


def read_ensemble(spec: Any, *, format: str | None = None, pattern: str = "*", **options: Any) -> Ensemble:  # noqa: A002
    """An :class:`~perflow.pag.ensemble.Ensemble` of the runs a specification names (see :func:`read_run_list`)."""
    return Ensemble(read_run_list(spec, format=format, pattern=pattern, **options))


set_path_reader(read_run_list)
