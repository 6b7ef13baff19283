"""The reader recipe: a text profile, one ``RANK CALL;PATH SECONDS`` cell a line (exclusive time)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perflow.sdk.readers import PAG, FormatError, MetricRows, TreeBuilder, build_profile

FORMAT = "pfdemo"
DESCRIPTION = "pfdemo text profile (rank, call path, exclusive seconds per line)"


def detect(path: Path) -> bool:
    """A ``.pfdemo`` file."""
    return Path(path).suffix == ".pfdemo"


def read(path: Path, **options: Any) -> PAG:
    """Read a pfdemo profile; a malformed line is a FormatError naming it."""
    p = Path(path)
    tree, cells = TreeBuilder(), MetricRows()
    for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
        parts = line.split()
        if len(parts) != 3:
            raise FormatError(p, f"line {n}: expected 'RANK CALL;PATH SECONDS', got {line!r}")
        rank, frames, seconds = parts
        cells.add(tree.path(frames.split(";")), int(rank), 0, "time_exc", float(seconds))
    return build_profile(tree, cells, attrs={"source": str(p), "format": FORMAT})
