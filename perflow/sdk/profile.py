"""The SDK for profile analyses: groupings, categories, metric names, vertex columns (nothing here is registered).

The central helper is :func:`grouped`: one metric per (vertex, group), where a
group is a process (threads summed) or a (process, thread) location, built
from the integer codes of the metrics index without any per-row Python work.
Per-vertex statistics across groups (:meth:`Grouped.stats`, or the cached
:data:`perflow.sdk.VERTEX_STATS`) use *dense* semantics, as
:meth:`perflow.PAG.aggregate` does: a group without a row for a vertex counts
as 0.

Also here, from the PAG layer: :func:`location_key`, :data:`AGGREGATIONS`
(the aggregations of :meth:`perflow.PAG.aggregate`), :func:`align` (two PAGs
by call path), :func:`imbalance_measures` and :data:`IMBALANCE_CRITERIA`,
:class:`Ensemble` and :data:`DEFAULT_PERCENTILES`, the tree masks
(:func:`ancestors_mask`, :func:`descendants_mask`, :func:`tree_index`), call
sites (:func:`call_site_paths`, :func:`source_labels`), the parallel
view's :data:`EDGE_KINDS`, how a metric combines (:func:`metric_combine`),
and the top-down tree as text (:func:`tree_view` selects the vertices shown
into a :class:`TreeView`, :func:`tree_lines` draws it, :class:`TreeText`
holds it; :func:`metric_values`, :func:`format_tree_value`,
:func:`repeated_siblings`, the heat levels :data:`LEVELS` and
:func:`level_of`: what ``pag.tree()`` and the ``tree_*`` passes share).
"""

from __future__ import annotations

import re
import weakref
from typing import Any

import numpy as np
import pandas as pd

from ..errors import PassError
from ..kinds import IDLE_REGIONS, MPIClass, VertexKind, is_gpu_api, is_library_module, mpi_class
from ..pag.align import align
from ..pag.base import metric_combine, off_cpu_flags
from ..pag.ensemble import DEFAULT_PERCENTILES, Ensemble
from ..pag.frames import AGGREGATIONS
from ..pag.imbalance import IMBALANCE_CRITERIA, imbalance_measures
from ..pag.pag import PAG
from ..pag.parallel import EDGE_KINDS, ParallelVertexSet
from ..pag.selection import Selection
from ..pag.sets import VertexSet
from ..pag.sites import call_site_paths, source_labels
from ..pag.stats import Grouped, grouped, location_key
from ..pag.tree import ancestors_mask, descendants_mask, tree_index
from ..pag.treeview import (
    LEVELS,
    TreeText,
    TreeView,
    format_tree_value,
    level_of,
    metric_values,
    repeated_siblings,
    tree_lines,
    tree_view,
)

__all__ = [
    "Grouped",
    "grouped",
    "location_key",
    "AGGREGATIONS",
    "align",
    "imbalance_measures",
    "IMBALANCE_CRITERIA",
    "Ensemble",
    "DEFAULT_PERCENTILES",
    "ancestors_mask",
    "descendants_mask",
    "tree_index",
    "call_site_paths",
    "source_labels",
    "EDGE_KINDS",
    "metric_combine",
    "TreeView",
    "tree_view",
    "tree_lines",
    "TreeText",
    "metric_values",
    "format_tree_value",
    "repeated_siblings",
    "LEVELS",
    "level_of",
    "as_pag",
    "selected_vertices",
    "resolve_metric",
    "vertex_columns",
    "categories",
    "CATEGORIES",
    "device_categories",
    "off_cpu_mask",
    "code_vertices",
    "run_scale",
    "names_of",
    "kinds_of",
    "edge_mask",
    "edge_kinds",
]


def as_pag(data: PAG | Selection) -> PAG:
    """The PAG of a PAG or of a vertex/edge selection."""
    if isinstance(data, PAG):
        return data
    if isinstance(data, Selection):
        return data.pag
    raise PassError(f"expected a PAG or a vertex set, got {type(data).__name__}")


def selected_vertices(data: PAG | Selection) -> np.ndarray | None:
    """Top-down vertex ids a selection restricts to (``None`` for a whole PAG)."""
    if isinstance(data, VertexSet):
        return data.ids
    if isinstance(data, ParallelVertexSet):
        return data.vertices().ids
    return None


def resolve_metric(pag: PAG, metric: str, mode: str | None = None) -> str:
    """The metric column for ``metric`` and ``mode``.

    ``metric`` is a column (``"time_exc"``) or a base name (``"time"``). With
    ``mode=None`` a column is used as named and a base name means its
    exclusive variant; ``mode="exclusive"``/``"inclusive"`` picks the
    ``*_exc``/``*_inc`` variant of either.
    """
    if mode not in (None, "exclusive", "inclusive"):
        raise PassError(f"mode must be 'exclusive' or 'inclusive', not {mode!r}")
    names = pag.metric_names
    if mode is None:
        if metric in names:
            return metric
        if metric + "_exc" in names:
            return metric + "_exc"
        pag.check_metric(metric)
    suffix = "_exc" if mode == "exclusive" else "_inc"
    base = metric.removesuffix("_exc").removesuffix("_inc")
    if base + suffix in names:
        return base + suffix
    if metric in names:
        info_mode = pag.metric_info[metric].mode
        if info_mode == mode or (mode == "exclusive" and info_mode != "inclusive"):
            return metric
        raise PassError(f"metric {metric!r} has no {mode} variant in this PAG (metrics: {', '.join(names)})")
    pag.check_metric(base + suffix)
    return base + suffix


def _from_categorical(col: pd.Series) -> np.ndarray:
    cats = np.append(np.asarray(col.cat.categories.astype(str), dtype=object), "")
    return cats[col.cat.codes.to_numpy()]  # code -1 (missing) picks the trailing ""


def names_of(pag: PAG) -> np.ndarray:
    """Vertex names as an object array (one string conversion per distinct name)."""
    return _from_categorical(pag.vertex_table["name"])


def kinds_of(pag: PAG) -> np.ndarray:
    """Vertex kinds (their string values) as an object array."""
    return _from_categorical(pag.vertex_table["kind"])


def edge_mask(et: pd.DataFrame, kinds: Any) -> np.ndarray:
    """Rows of an edge table whose ``kind`` is one of ``kinds`` (compares categorical codes)."""
    col = et["kind"]
    want = [kinds] if isinstance(kinds, str) else list(kinds)
    if isinstance(col.dtype, pd.CategoricalDtype):
        cats = [str(c) for c in col.cat.categories]
        codes = [cats.index(k) for k in want if k in cats]
        return np.isin(col.cat.codes.to_numpy(), codes)
    return np.isin(col.to_numpy().astype(str), want)


def edge_kinds(et: pd.DataFrame) -> np.ndarray:
    """The ``kind`` column of an edge table as an object array of strings."""
    col = et["kind"]
    return _from_categorical(col) if isinstance(col.dtype, pd.CategoricalDtype) else col.to_numpy().astype(object)


def vertex_columns(pag: PAG, ids: np.ndarray, *, categorical: bool = False) -> pd.DataFrame:
    """``vertex``, ``name``, ``kind``, ``call_path`` columns for vertex ids.

    Two call sites with one call path are told apart by their ``file:line``
    (:func:`perflow.pag.sites.call_site_paths`).

    With ``categorical=True`` the text columns are pandas categoricals (cheap
    for tables with one row per (vertex, process), where ids repeat).
    """
    ids = np.asarray(ids, dtype=np.int64)
    cols: dict[str, Any] = {"vertex": ids}
    if categorical:
        vt = pag.vertex_table
        for c in ("name", "kind"):
            cols[c] = pd.Categorical.from_codes(vt[c].cat.codes.to_numpy()[ids], vt[c].cat.categories.astype(str))
        codes, uniq = pd.factorize(call_site_paths(pag))
        cols["call_path"] = pd.Categorical.from_codes(codes[ids], pd.Index(uniq).astype(str))
    else:
        cols["name"] = names_of(pag)[ids]
        cols["kind"] = kinds_of(pag)[ids]
        cols["call_path"] = call_site_paths(pag)[ids]
    return pd.DataFrame(cols)


#: Breakdown categories, in display order.
CATEGORIES = ("computation", "p2p", "collective", "sync", "wait", "io", "mpi", "gpu", "idle", "off_cpu")
_MPI_CATEGORY = {
    MPIClass.P2P: "p2p",
    MPIClass.WAIT: "p2p",
    MPIClass.COLLECTIVE: "collective",
    MPIClass.SYNC: "sync",
    MPIClass.IO: "io",
    MPIClass.RMA: "mpi",
    MPIClass.SETUP: "mpi",
    MPIClass.OTHER: "mpi",
}
_SYNC_NAMES = ("MPI_Init", "MPI_Init_thread", "MPI_Finalize")
#: region roles (OTF2's, kept in the vertex table's ``role``) of thread synchronisation constructs
#: thread synchronisation by region role; not critical_sblock (the protected code); the parallel region's own time
#: is the team's fork and join (OpenMP management)
_SYNC_ROLES = ("barrier", "implicit_barrier", "critical", "lock", "unlock", "parallel")
#: thread-library lock calls (OpenMP, POSIX threads): synchronisation like the constructs
_LOCK_CALL = re.compile(r"^(omp_(set|unset|test)(_nest)?_lock|pthread_mutex_(lock|unlock|trylock|timedlock))$")
_IDENT = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)")
_CATEGORY_CACHE: weakref.WeakKeyDictionary[PAG, np.ndarray] = weakref.WeakKeyDictionary()


def categories(pag: PAG) -> np.ndarray:
    """The breakdown category of every vertex (an array of strings from :data:`CATEGORIES`).

    MPI vertices are classified by :func:`perflow.kinds.mpi_class` of their
    name (its leading identifier, so TAU's ``MPI_Bcast()`` counts as ``MPI_Bcast``): point-to-point calls and request completion (Wait/Test) are
    ``p2p``, data collectives ``collective``, barriers and MPI_Init/Finalize
    (world barriers) ``sync``, and so are thread synchronisation constructs
    (OpenMP barriers, critical sections, their lock calls and POSIX mutex
    calls, by region role or name), MPI-IO ``io``, the rest ``mpi`` (the
    name decides, whatever kind the source gave the vertex). Other vertices
    of kind ``io`` are ``io``; work a GPU did (kernels, copies: see
    :func:`device_categories`) is ``gpu``, an explicit idle region (a GPU
    stream's, a Charm++ PE's) ``idle``, time a recorded thread spent off the
    CPU outside MPI (:data:`perflow.kinds.OFF_CPU`, see :func:`off_cpu_mask`)
    ``off_cpu``; everything else is ``computation``.
    The work is one classification per distinct name.
    """
    cached = _CATEGORY_CACHE.get(pag)
    if cached is not None:
        return cached
    vt = pag.vertex_table
    names = vt["name"]
    cats = names.cat.categories.astype(str)
    code = names.cat.codes.to_numpy()
    kind = kinds_of(pag)
    per_name = np.empty(len(cats) + 1, dtype=object)
    for i, full in enumerate(cats):
        m = _IDENT.match(full)  # "MPI_Bcast()" (TAU), "MPI_Send [THROTTLED]" -> the function name
        nm = m.group(1) if m else full
        c = mpi_class(nm)
        if nm in _SYNC_NAMES or _LOCK_CALL.match(nm):
            per_name[i] = "sync"
        else:
            per_name[i] = _MPI_CATEGORY[c] if c is not None else "computation"
    per_name[-1] = "computation"
    out = per_name[code]
    out[(kind == VertexKind.IO.value) & (out == "computation")] = "io"
    if "role" in vt.columns:
        role = vt["role"].astype(str).to_numpy()
        out[np.isin(role, _SYNC_ROLES) & (out == "computation")] = "sync"
    dev = device_categories(vt["name"], kind)
    out = np.where((dev != "") & (out == "computation"), dev, out)
    out = np.where(off_cpu_mask(pag), "off_cpu", out)
    out = out.astype(str)
    out.flags.writeable = False
    _CATEGORY_CACHE[pag] = out
    return out


def off_cpu_mask(pag: PAG) -> np.ndarray:
    """Per vertex: whether it is time off the CPU (the recorder's artificial region :data:`perflow.kinds.OFF_CPU`).

    Such time is no code's: breakdowns show it as its own category, and the
    passes that blame code (root causes, critical-path imbalance, hotspots)
    leave it out.
    """
    vt = pag.vertex_table
    if not len(vt):
        return np.zeros(0, dtype=bool)
    return off_cpu_flags(vt["name"].astype(str), vt["role"].astype(str) if "role" in vt.columns else None)


#: Kinds of vertex that are part of the function around them (their module is the function's).
_IN_FUNCTION = (VertexKind.LOOP.value, VertexKind.STATEMENT.value, VertexKind.CALL_SITE.value)


def code_vertices(pag: PAG) -> np.ndarray:
    """Per vertex, the vertex that names its code where a finding says what to fix.

    A vertex in library code (its ``module`` is a system library, the kernel's
    ``[vdso]``, the MPI library or perflow's recorder: :func:`perflow.kinds.is_library_module`)
    is named by its innermost caller that is the user's code, as time in a
    library is the calling code's for where to fix it; a vertex with no such
    caller below the program's root (a stack all in libraries) names itself,
    as does every other vertex (an MPI call is the user's call, whatever
    module a profile gives it). The tree and the tables keep every vertex.
    In ``main/solve/__clock_gettime/[vdso]`` (``__clock_gettime`` in
    ``libc.so.6``), ``[vdso]`` and ``__clock_gettime`` are named by ``solve``.
    """
    vt = pag.vertex_table
    n = len(vt)
    own = np.arange(n, dtype=np.int64)
    if not n or "module" not in vt.columns:
        return own
    codes, uniq = pd.factorize(vt["module"].astype(str), sort=False)
    lib = np.array([is_library_module(m) for m in uniq], dtype=bool)[codes] if len(uniq) else np.zeros(n, bool)
    if not lib.any():
        return own
    kind = vt["kind"].astype(str).to_numpy() if "kind" in vt.columns else np.full(n, VertexKind.FUNCTION.value)
    parent = vt["parent"].to_numpy(dtype=np.int64)
    # a loop or a statement without a module of its own is in its function's (HPCToolkit's loops in libraries)
    inside = np.isin(kind, _IN_FUNCTION) & (uniq[codes] == "") & (parent >= 0)
    while True:
        more = lib | (inside & lib[np.maximum(parent, 0)])
        if np.array_equal(more, lib):
            break
        lib = more
    lib &= kind != VertexKind.MPI.value  # an MPI call is the user's call (a profile's MPI_Send in libmpi.so)
    up = np.where(lib & (parent >= 0), parent, own)  # a library vertex points at its caller
    while True:  # pointer jumping: each vertex to its innermost caller outside the libraries (or the topmost)
        nxt = up[up]
        if np.array_equal(nxt, up):
            break
        up = nxt
    user = ~lib[up] & (parent[up] >= 0) & ~np.isin(kind[up], (VertexKind.ROOT.value, VertexKind.MEASUREMENT.value))
    return np.where(lib & user, up, own)


def device_categories(names: pd.Series, kind: np.ndarray) -> np.ndarray:
    """Per vertex: ``"gpu"`` for work a GPU did, ``"idle"`` for an explicit idle region, else ``""``.

    Work a GPU did is a vertex of kind ``gpu`` that is not a host-side API
    call (:func:`perflow.kinds.is_gpu_api`: ``cudaLaunchKernel`` runs on the
    CPU); idle regions are :data:`perflow.kinds.IDLE_REGIONS` (a GPU
    stream's ``GPU idle``, Score-P's ``DEVICE IDLE``, a Charm++ PE's
    ``Idle``). One test per distinct name.
    """
    names = pd.Series(names)
    codes, uniq = pd.factorize(names.astype(str), sort=False)
    api = np.array([is_gpu_api(n) for n in uniq], dtype=bool)[codes] if len(uniq) else np.zeros(len(names), bool)
    idle = np.array([n in IDLE_REGIONS for n in uniq], dtype=bool)[codes] if len(uniq) else np.zeros(len(names), bool)
    kind = np.asarray(kind).astype(str)
    out = np.where((kind == VertexKind.GPU.value) & ~api, "gpu", "")
    return np.where(idle, "idle", out).astype(object)


_SCALE_KEYS = ("nprocs", "mpi.world.size", "jobsize", "num_ranks", "ranks", "np")


def run_scale(pag: PAG, key: str | None = None) -> float:
    """The process count of a run: ``attrs[key]``, else ``attrs["nprocs"]`` (or a common alias), else processes with data."""
    keys = (key,) if key else _SCALE_KEYS
    for k in keys:
        val: Any = pag.attrs.get(k)
        if val is not None:
            try:
                f = float(val)
            except (TypeError, ValueError):
                raise PassError(f"run attribute {k!r} is {val!r}, not a number") from None
            if f > 0:
                return f
    if key:
        raise PassError(f"run has no attribute {key!r} (attributes: {', '.join(map(str, pag.attrs)) or 'none'})")
    return float(len(pag.processes))
