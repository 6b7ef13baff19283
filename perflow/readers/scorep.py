"""Score-P experiment directories (``scorep-<date>_<time>_<id>/``).

Score-P writes a run's results into one directory: ``profile.cubex`` (CUBE4
profile, when profiling was on), ``traces.otf2`` with ``traces.def`` and
``traces/`` (OTF2 trace, when tracing was on), ``scorep.cfg`` (the
configuration variables of the run) and ``MANIFEST.md``.

* ``perflow.read(dir)`` reads the trace when there is one, else the profile;
  ``part="trace"|"profile"`` -- or ``perflow.read(dir, format="otf2"|"cube")``,
  ``perflow info dir --format cube`` -- chooses. The result is what the OTF2
  or CUBE reader gives for that file (``attrs["format"]`` is ``"otf2"`` or
  ``"cube"``); ``attrs["experiment"]`` is the directory and
  ``attrs["experiment_parts"]`` the parts it holds.
* ``scorep.cfg`` (``NAME=value`` lines, quotes removed) is merged into
  ``attrs["metadata"]`` (``SCOREP_ENABLE_TRACING``, ``SCOREP_TIMER``, ...),
  beside the metadata of the file read.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ..errors import FormatError
from ..pag.pag import PAG
from . import reader_module

FORMAT = "scorep"
DESCRIPTION = "Score-P experiment directories (profile.cubex and/or traces.otf2, scorep.cfg)"

log = logging.getLogger(__name__)

_PARTS = {"trace": "otf2", "profile": "cube", "otf2": "otf2", "cube": "cube"}


def parts(path: Path) -> dict[str, Path]:
    """The results in a Score-P experiment directory: ``{"otf2": anchor, "cube": profile}`` (those present)."""
    out: dict[str, Path] = {}
    if not path.is_dir():
        return out
    try:
        entries = sorted(path.iterdir())
    except OSError:
        return out
    anchors = [e for e in entries if e.suffix == ".otf2" and e.is_file()]
    cubes = [e for e in entries if e.suffix == ".cubex" and e.is_file()]
    if anchors:
        out["otf2"] = next((e for e in anchors if e.name == "traces.otf2"), anchors[0])
    if cubes:
        out["cube"] = next((e for e in cubes if e.name == "profile.cubex"), cubes[0])
    return out


def detect(path: Path) -> bool:
    """A directory with ``scorep.cfg`` (or named ``scorep-*``) holding a ``.cubex`` profile or an OTF2 anchor."""
    if not path.is_dir():
        return False
    if not ((path / "scorep.cfg").is_file() or path.name.startswith("scorep-")):
        return False
    return bool(parts(path))


def config(path: Path) -> dict[str, str]:
    """The variables of ``scorep.cfg`` in ``path`` (empty when there is none)."""
    f = path / "scorep.cfg"
    out: dict[str, str] = {}
    try:
        text = f.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return out
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        k, v = line.split("=", 1)
        v = v.strip()
        if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
            v = v[1:-1]
        out[k.strip()] = v
    return out


def read(path: Path | str, *, part: str | None = None, **options: Any) -> PAG:
    """Read a Score-P experiment directory.

    Parameters
    ----------
    path : path-like
        The experiment directory.
    part : {"trace", "profile", "otf2", "cube"}, optional
        Which result to read (default: the trace when there is one).
    **options
        Passed to the OTF2 or CUBE reader.

    Returns
    -------
    PAG
    """

    path = Path(path)
    found = parts(path)
    if not found:
        raise FormatError(path, "not a Score-P experiment directory: no profile.cubex and no traces.otf2 in it")
    if part is not None and part not in _PARTS:
        raise ValueError(f"part must be one of trace, profile (or otf2, cube), not {part!r}")
    fmt = _PARTS[part] if part else ("otf2" if "otf2" in found else "cube")
    if fmt not in found:
        what = "trace (traces.otf2)" if fmt == "otf2" else "profile (profile.cubex)"
        has = ", ".join(p.name for p in found.values())
        raise FormatError(path, f"this Score-P experiment has no {what}; it holds {has}")
    pag = reader_module(fmt).read(found[fmt], **options)
    meta = dict(pag.attrs.get("metadata") or {})
    meta.update(config(path))
    pag.attrs["metadata"] = meta
    pag.attrs["format"] = fmt
    pag.attrs["source"] = str(found[fmt])
    pag.attrs["experiment"] = str(path)
    pag.attrs["experiment_parts"] = sorted(found)
    return pag
