"""Statistics of each call path across the runs of an ensemble that have it (NaN: a run without the path)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["across_runs"]


def across_runs(mat: np.ndarray, percentiles: Sequence[float]) -> dict[str, np.ndarray]:
    """Per row of ``mat`` (vertex x run, NaN where absent): ``n_runs``, ``mean``, ``std``, ``min``, ``p<q>``, ``max``.

    ``std`` is the sample deviation (``ddof=1``; NaN for one run),
    percentiles interpolate linearly between the closest ranks (numpy's
    default); a row without any value is NaN throughout (``n_runs`` 0).
    """
    present = ~np.isnan(mat)
    n = present.sum(axis=1)
    has = n > 0
    mean = np.where(has, np.where(present, mat, 0.0).sum(axis=1) / np.maximum(n, 1), np.nan)
    dev = np.where(present, mat - mean[:, None], 0.0)
    out = {"n_runs": n, "mean": mean}
    out["std"] = np.where(n > 1, np.sqrt((dev**2).sum(axis=1) / np.maximum(n - 1, 1)), np.nan)
    out["min"] = np.where(has, np.where(present, mat, np.inf).min(axis=1, initial=np.inf), np.nan)
    # vectorised (np.nanpercentile goes row by row when NaN are present: 15x slower on 36,000 paths)
    srt = np.sort(mat, axis=1)  # NaN last: row u's values are srt[u, :n[u]]
    rows = np.arange(len(mat))
    for q in percentiles:
        pos = q / 100.0 * np.maximum(n - 1, 0)
        lo = np.floor(pos).astype(np.int64)
        hi = np.minimum(lo + 1, np.maximum(n - 1, 0))
        with np.errstate(invalid="ignore"):
            val = srt[rows, lo] + (srt[rows, hi] - srt[rows, lo]) * (pos - lo)
        out[f"p{q:g}"] = np.where(has, val, np.nan)
    out["max"] = np.where(has, np.where(present, mat, -np.inf).max(axis=1, initial=-np.inf), np.nan)
    return out
