"""Saved PAGs (perflow's own format, see :mod:`perflow.pag.persist`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..pag.pag import PAG
from ..pag.persist import is_saved_pag, load

FORMAT = "pag"
DESCRIPTION = "a PAG saved by perflow (directory with manifest.json and Parquet tables)"


def detect(path: Path) -> bool:
    """A directory holding a perflow manifest."""
    return is_saved_pag(path)


def read(path: Path, **options: Any) -> PAG:
    """Load a saved PAG (no options)."""
    if options:
        raise TypeError(f"saved PAGs take no reader options (got {', '.join(options)})")
    return load(path)
