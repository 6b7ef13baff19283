"""Process similarity: hierarchical clustering of processes by their per-vertex profiles.

Each process ``p`` is described by the vector ``x_p`` of a metric over all
vertices (threads summed; a vertex the process never ran counts 0). The
distance between two processes is the L1 distance relative to the mean
total::

    d(p, q) = sum_v |x_p[v] - x_q[v]|  /  mean_r sum_v |x_r[v]|

i.e. the fraction of a typical process's time that is spent differently.
Processes are clustered by agglomerative hierarchical clustering
(``scipy.cluster.hierarchy.linkage``, average linkage by default) and the
dendrogram is cut at distance ``threshold`` (default 0.1: processes whose
profiles differ by more than 10% end up in different groups), or into
``n_clusters`` groups. Groups are numbered by size, largest first (ties by
lowest process). The largest group is the *main* behaviour; processes in
groups of at most ``outlier_size`` processes (when the main group is larger)
are outliers.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from perflow.sdk import PAG, PassError, pass_
from perflow.sdk.profile import as_pag, grouped, names_of, resolve_metric

__all__ = ["process_similarity", "ranges", "LINKAGES"]

LINKAGES = ("single", "complete", "average", "weighted", "centroid", "median", "ward")


def ranges(values: np.ndarray) -> str:
    """Compact text for sorted integers: ``[0, 1, 2, 5, 7, 8]`` -> ``"0-2,5,7-8"``."""
    v = np.unique(np.asarray(values, dtype=np.int64))
    if not len(v):
        return ""
    breaks = np.flatnonzero(np.diff(v) != 1)
    lo = np.r_[v[0], v[breaks + 1]]
    hi = np.r_[v[breaks], v[-1]]
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in zip(lo.tolist(), hi.tolist()))


@pass_(version="1", tags=("profile", "similarity"), outputs={"processes": pd.DataFrame, "groups": pd.DataFrame})
def process_similarity(
    pag: PAG,
    *,
    metric: str = "time_exc",
    threshold: float = 0.1,
    n_clusters: int | None = None,
    method: str = "average",
    outlier_size: int = 1,
) -> dict[str, pd.DataFrame]:
    """Group processes with similar profiles and report the outliers.

    See the module docstring for the distance and the clustering.

    Parameters
    ----------
    pag : PAG
    metric : str
        Metric forming each process's vector (default exclusive time).
    threshold : float
        Cut the dendrogram at this relative distance (ignored with ``n_clusters``).
    n_clusters : int, optional
        Cut into at most this many groups instead.
    method : str
        Linkage: single, complete, average, weighted, centroid, median or ward.
    outlier_size : int
        Groups of at most this many processes are outliers (if the main group is larger).

    Returns
    -------
    dict
        ``processes``: one row per process (``process``, ``cluster``,
        ``cluster_size``, ``outlier``, ``total`` (the metric summed over
        vertices), ``distance`` (relative L1 distance to the mean vector of the
        main group)); ``groups``: one row per group (``cluster``, ``size``,
        ``processes`` as ranges ``"0-3,6"``, ``outlier``, ``mean_total``,
        ``distance`` (of its mean vector to the main group's), ``vertex``,
        ``name``, ``call_path`` and ``difference`` for the vertex whose group
        mean differs most from the main group's mean, signed).
    """
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import pdist

    pag = as_pag(pag)
    col = resolve_metric(pag, metric)
    if method not in LINKAGES:
        raise PassError(f"method must be one of {', '.join(LINKAGES)}, not {method!r}")
    if n_clusters is not None and n_clusters < 1:
        raise PassError(f"n_clusters must be >= 1, not {n_clusters}")
    g = grouped(pag, col, "process")
    X = g.dense().T  # (processes, vertices)
    P = X.shape[0] if g.n_groups else 0
    if P == 0:
        raise PassError("the PAG has no processes with data")
    scale = float(np.abs(X).sum(axis=1).mean()) or 1.0
    if P == 1:
        labels = np.ones(1, dtype=np.int64)
    else:
        if method in ("centroid", "median", "ward"):
            Z = linkage(X / scale, method=method, metric="euclidean")
        else:
            Z = linkage(pdist(X, "cityblock") / scale, method=method)
        if n_clusters is not None:
            labels = fcluster(Z, t=n_clusters, criterion="maxclust")
        else:
            labels = fcluster(Z, t=threshold, criterion="distance")
    # renumber: largest group first, ties by the lowest process
    uniq, inv = np.unique(labels, return_inverse=True)
    size = np.bincount(inv)
    first = np.full(len(uniq), P)
    np.minimum.at(first, inv, np.arange(P))
    rank = np.empty(len(uniq), dtype=np.int64)
    rank[np.lexsort((first, -size))] = np.arange(len(uniq))
    cl = rank[inv]
    csize = np.bincount(cl)
    nc = len(csize)
    cent = np.zeros((nc, X.shape[1]))
    np.add.at(cent, cl, X)
    cent /= csize[:, None]
    main = cent[0]
    outlier_cl = (csize <= outlier_size) & (csize[0] > outlier_size)
    procs = pd.DataFrame(
        {
            "process": g.process,
            "cluster": cl,
            "cluster_size": csize[cl],
            "outlier": outlier_cl[cl],
            "total": X.sum(axis=1),
            "distance": np.abs(X - main).sum(axis=1) / scale,
        }
    )
    diff = cent - main
    top = np.argmax(np.abs(diff), axis=1)
    paths = pag.call_paths().to_numpy()
    names = names_of(pag)
    groups = pd.DataFrame(
        {
            "cluster": np.arange(nc),
            "size": csize,
            "processes": [ranges(g.process[cl == c]) for c in range(nc)],
            "outlier": outlier_cl,
            "mean_total": np.bincount(cl, weights=X.sum(axis=1)) / csize,
            "distance": np.abs(diff).sum(axis=1) / scale,
            "vertex": np.where(np.arange(nc) > 0, top, -1),
            "name": np.where(np.arange(nc) > 0, names[top], ""),
            "call_path": np.where(np.arange(nc) > 0, paths[top], ""),
            "difference": np.where(np.arange(nc) > 0, diff[np.arange(nc), top], 0.0),
        }
    )
    groups.attrs.update({"metric": col, "threshold": threshold, "method": method})
    return {"processes": procs, "groups": groups}
