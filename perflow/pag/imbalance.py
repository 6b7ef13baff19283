"""Load-imbalance measures from per-vertex statistics across processes.

One definition, used by the ``imbalance`` pass and by the distributed engine:

====================== ===================================== ===================
column                 formula                               t = [4, 6, 8, 10]
====================== ===================================== ===================
``max_over_mean``      max / mean                            1.4286
``imbalance``          (max - mean) / max                    0.30
``imbalance_time``     max - mean                            3
``percent_imbalance``  100 (max / mean - 1)                  42.86
``craypat_percent``    100 (max - mean) / max * N / (N - 1)  40.0
``normalized_std``     std / (max - min)                     0.3727
``load_balance``       mean / max                            0.70
====================== ===================================== ===================

Vertices with ``max == 0`` have no imbalance (1 for ratios of max to mean,
0 for the others).
"""

from __future__ import annotations

import numpy as np

__all__ = ["IMBALANCE_CRITERIA", "imbalance_measures"]

IMBALANCE_CRITERIA = (
    "max_over_mean",
    "imbalance",
    "imbalance_time",
    "percent_imbalance",
    "craypat_percent",
    "normalized_std",
    "load_balance",
)


def imbalance_measures(
    mean: np.ndarray, mx: np.ndarray, mn: np.ndarray, std: np.ndarray, n: np.ndarray
) -> dict[str, np.ndarray]:
    """The measures of the module docstring from per-vertex mean, max, min, std and group count."""
    pos = mx > 0
    safe_max = np.where(pos, mx, 1.0)
    safe_mean = np.where(mean > 0, mean, 1.0)
    imb = np.where(pos, (mx - mean) / safe_max, 0.0)
    nn = np.asarray(n).astype(np.float64)
    spread = mx - mn
    # a spread at the rounding level of the values is no spread (std is then rounding noise too); the
    # normalised values lie in [0, 1], so their standard deviation is at most 1/2
    flat = spread <= 1e-9 * np.maximum(np.abs(mx), np.abs(mn))
    return {
        "max_over_mean": np.where(mean > 0, mx / safe_mean, np.where(pos, np.inf, 1.0)),
        "imbalance": imb,
        "imbalance_time": mx - mean,
        "percent_imbalance": np.where(mean > 0, 100.0 * (mx / safe_mean - 1.0), 0.0),
        "craypat_percent": np.where(nn > 1, 100.0 * imb * nn / np.maximum(nn - 1, 1), 0.0),
        "load_balance": np.where(pos, mean / safe_max, 1.0),
        "normalized_std": np.where(flat, 0.0, np.minimum(std / np.where(flat, 1.0, spread), 0.5)),
    }
