"""Calling contexts and samples of an OTF2 trace -> the raw trace's ``stacks``, samples and region stacks.

* A ``CallingContextSample`` names a calling context (a path of regions from
  a root) and an unwind distance: the number of innermost contexts that were
  unwound rather than entered by Enter events. The sample's stack in the raw
  trace (frames below the region instance it fell in) is that innermost part;
  its weight is the period of its interrupt generator (time mode).
* A calling context carrying the property ``perflow::region_stack`` (written
  by perflow's OTF2 writer) ends the call stack of its region: the region
  gets the path above it as its ``stack``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

__all__ = ["read_contexts", "resolve_samples", "REGION_STACK"]

REGION_STACK = "perflow::region_stack"


def _ref(x: Any) -> int:
    return int(x._ref) if hasattr(x, "_ref") else int(x)


def read_contexts(d: Any, rmap: np.ndarray) -> dict[str, Any]:
    """The calling-context tree and sampling period from the bindings' definitions ``d``.

    Returns a dict with ``cc_region`` (dense region id per context ref, -1
    when undefined), ``cc_parent`` (parent ref, -1 for roots),
    ``cc_region_stack`` (bool: ends a region's call stack) and
    ``sample_period`` (seconds, or None without a time-mode interrupt
    generator).
    """
    ccs = list(getattr(d, "calling_contexts", []) or [])
    n = max((_ref(c) for c in ccs), default=-1) + 1
    region = np.full(n, -1, dtype=np.int64)
    parent = np.full(n, -1, dtype=np.int64)
    for c in ccs:
        k = _ref(c)
        r = _ref(c.region) if c.region is not None else -1
        region[k] = int(rmap[r]) if 0 <= r < len(rmap) else -1
        parent[k] = _ref(c.parent) if c.parent is not None else -1
    parent[(parent < 0) | (parent >= n)] = -1
    marked = np.zeros(n, dtype=bool)
    for prop in getattr(d, "calling_context_properties", []) or []:
        if getattr(prop, "name", None) == REGION_STACK and prop.calling_context is not None:
            marked[_ref(prop.calling_context)] = True
    period = None
    for g in getattr(d, "interrupt_generators", []) or []:
        if int(getattr(g.interrupt_generator_mode, "value", g.interrupt_generator_mode)) == 0:  # TIME
            base = 10.0 if int(getattr(g.base, "value", g.base)) == 1 else 2.0
            period = float(g.period) * base ** float(g.exponent)
            break
    return {"cc_region": region, "cc_parent": parent, "cc_region_stack": marked, "sample_period": period}


def _paths(region: np.ndarray, parent: np.ndarray) -> list[tuple[int, ...]]:
    """Region path (root first) of every context."""
    out: list[tuple[int, ...] | None] = [None] * len(region)
    for k in range(len(region)):
        chain = []
        c = k
        while c >= 0 and out[c] is None and len(chain) <= len(region):
            chain.append(c)
            c = int(parent[c])
        base: tuple[int, ...] = out[c] if c >= 0 and out[c] is not None else ()  # type: ignore[assignment]
        for q in reversed(chain):
            base = base + (int(region[q]),)
            out[q] = base
    return out  # type: ignore[return-value]


def _merge_repeats(smp: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """One sample per run of identical consecutive samples (same location, time, stack, position).

    A writer stands for a sample worth k timer periods with k identical
    events (perflow's writer does); their weights add up again here.
    """
    n = len(smp["time"])
    if n < 2:
        return smp
    same = np.ones(n - 1, dtype=bool)
    for c in ("location", "time", "stack", "pos"):
        if c in smp:
            same &= smp[c][1:] == smp[c][:-1]
    if not same.any():
        return smp
    first = np.r_[True, ~same]
    starts = np.flatnonzero(first)
    out = {c: a[starts] for c, a in smp.items()}
    out["weight"] = np.add.reduceat(smp["weight"], starts)
    return out


def resolve_samples(ctx: dict[str, Any] | None, samples: dict[str, np.ndarray], n_regions: int) -> tuple:
    """Turn decoded samples (``stack`` = context ref, ``weight`` = unwind distance) into stacks.

    Returns ``(samples, stacks frame, region stack ids)``: the sample table
    with real stack ids and weights, the ``stacks`` table, and per region its
    stack id (-1 when none), or None when no context marks a region stack.
    """
    empty = pd.DataFrame(
        {"stack": np.zeros(0, np.int32), "depth": np.zeros(0, np.int32), "region": np.zeros(0, np.int32)}
    )
    if ctx is None or not len(ctx["cc_region"]):
        return samples, empty, None
    paths = _paths(ctx["cc_region"], ctx["cc_parent"])
    ids: dict[tuple[int, ...], int] = {}

    def sid(frames: tuple[int, ...]) -> int:
        if frames not in ids:
            ids[frames] = len(ids)
        return ids[frames]

    reg_stack = None
    marked = np.flatnonzero(ctx["cc_region_stack"])
    if len(marked):
        reg_stack = np.full(n_regions, -1, dtype=np.int64)
        for k in marked.tolist():
            r = int(ctx["cc_region"][k])
            if 0 <= r < n_regions:
                reg_stack[r] = sid(paths[k][:-1])
    ref = samples["stack"].astype(np.int64)
    unwind = samples["weight"].astype(np.int64)
    out = dict(samples)
    if len(ref):
        pairs, inv = np.unique(np.stack([ref, unwind], axis=1), axis=0, return_inverse=True)
        stack_of = np.array(
            [sid(paths[c][len(paths[c]) - u :] if 0 < u <= len(paths[c]) else ()) if 0 <= c < len(paths) else sid(())
             for c, u in pairs.tolist()],
            dtype=np.int32,
        )  # fmt: skip
        out["stack"] = stack_of[np.asarray(inv).ravel()]
        out["weight"] = np.full(len(ref), float(ctx["sample_period"] or 0.0))
        out = _merge_repeats(out)
    rows = [(s, d, r) for st, s in ids.items() for d, r in enumerate(st)]
    arr = np.array(rows, dtype=np.int64).reshape(-1, 3)
    stacks = pd.DataFrame(
        {"stack": arr[:, 0].astype(np.int32), "depth": arr[:, 1].astype(np.int32), "region": arr[:, 2].astype(np.int32)}
    )
    return out, stacks, reg_stack
