"""JSON for perflow's manifests and outputs: numpy scalars and arrays, paths, anything else as text."""

from __future__ import annotations

import os
from typing import Any

__all__ = ["json_default"]


def json_default(o: Any) -> Any:
    """A ``default=`` for :func:`json.dumps`: numpy integers, floats and arrays as Python values, paths as text."""
    import numpy as np

    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, os.PathLike):
        return os.fspath(o)
    return str(o)
