"""Enter/leave matching and calling-context assignment in one linear pass.

:func:`scan_regions` walks the region events of every location once with a
stack, pairing each Leave with its Enter, recording the enclosing instance of
every instance, and giving each instance a call-path id (a vertex of the
calling-context tree) from a hash map keyed by (parent call path, region).
The compiled version (numba) runs at tens of millions of events per second;
:func:`scan_regions_py` is the pure-Python reference the tests compare it with.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._jit import Dict, njit, types

__all__ = ["ScanResult", "scan_regions", "scan_regions_py", "SCAN_ERRORS", "enclosing_instance"]

#: Error codes of the scan; the message is completed by the caller.
SCAN_ERRORS = {
    1: "a Leave without a matching Enter",
    2: "a Leave whose region differs from the innermost open region's",
    3: "Enter events without a Leave (the trace looks truncated)",
}


@dataclass
class ScanResult:
    """Output of the region scan.

    Attributes
    ----------
    enter, leave : numpy.ndarray
        Region-event index of each instance's Enter and Leave (instances are
        numbered in Enter order). ``leave`` is -1 for an instance closed
        artificially at the end of its location (``close_open=True``).
    parent : numpy.ndarray
        Enclosing instance of each instance, -1 at the top.
    callpath : numpy.ndarray
        Call-path id of each instance.
    cp_parent, cp_region : numpy.ndarray
        The calling-context tree: parent call path (-1 for roots) and region of
        each call-path id, in order of first appearance.
    open_after : numpy.ndarray
        For each region event, the innermost instance open just after it (-1
        when none).
    error, error_at : int
        An error code of :data:`SCAN_ERRORS` (0 when fine) and the region-event
        index (or location, for code 3) where it occurred.
    t_enter, t_leave, child_inc : numpy.ndarray, optional
        With ``time`` given: enter and leave time of each instance (leave 0
        when it was not closed) and the summed inclusive time of its closed
        children.
    """

    enter: np.ndarray
    leave: np.ndarray
    parent: np.ndarray
    callpath: np.ndarray
    cp_parent: np.ndarray
    cp_region: np.ndarray
    open_after: np.ndarray
    error: int = 0
    error_at: int = -1
    #: with event times: each instance's enter and leave time (leave 0 where ``leave`` is -1) and the
    #: inclusive time of its children (closed children only)
    t_enter: np.ndarray | None = None
    t_leave: np.ndarray | None = None
    child_inc: np.ndarray | None = None


def scan_regions_py(
    location: np.ndarray, kind: np.ndarray, region: np.ndarray, close_open: bool = False, time: np.ndarray | None = None
) -> ScanResult:
    """Pure-Python reference implementation of :func:`scan_regions`."""
    res = _scan_py(location, kind, region, close_open)
    if time is not None and not res.error:
        _times_py(res, np.asarray(time, dtype=np.float64))
    return res


def _times_py(res: ScanResult, time: np.ndarray) -> None:
    n = len(res.enter)
    res.t_enter = time[res.enter] if n else np.zeros(0)
    closed = res.leave >= 0
    res.t_leave = np.where(closed, time[np.maximum(res.leave, 0)], 0.0) if n else np.zeros(0)
    res.child_inc = np.zeros(n)
    for k in range(n):
        p = res.parent[k]
        if p >= 0 and closed[k]:
            res.child_inc[p] += res.t_leave[k] - res.t_enter[k]


def _scan_py(location: np.ndarray, kind: np.ndarray, region: np.ndarray, close_open: bool) -> ScanResult:
    n = len(location)
    enter: list[int] = []
    leave: list[int] = []
    parent: list[int] = []
    callpath: list[int] = []
    cp_parent: list[int] = []
    cp_region: list[int] = []
    cp_map: dict[tuple[int, int], int] = {}
    open_after = np.full(n, -1, dtype=np.int64)
    stack: list[int] = []
    error, error_at = 0, -1
    for i in range(n):
        if i > 0 and location[i] != location[i - 1] and stack:
            if not close_open:
                return _result(
                    enter, leave, parent, callpath, cp_parent, cp_region, open_after, 3, int(location[i - 1])
                )
            stack.clear()
        if kind[i] == 0:
            par = stack[-1] if stack else -1
            pcp = callpath[par] if par >= 0 else -1
            key = (pcp, int(region[i]))
            cp = cp_map.get(key)
            if cp is None:
                cp = len(cp_parent)
                cp_map[key] = cp
                cp_parent.append(pcp)
                cp_region.append(int(region[i]))
            k = len(enter)
            enter.append(i)
            leave.append(-1)
            parent.append(par)
            callpath.append(cp)
            stack.append(k)
        else:
            if not stack:
                return _result(enter, leave, parent, callpath, cp_parent, cp_region, open_after, 1, i)
            k = stack.pop()
            if region[enter[k]] != region[i]:
                return _result(enter, leave, parent, callpath, cp_parent, cp_region, open_after, 2, i)
            leave[k] = i
        open_after[i] = stack[-1] if stack else -1
    if stack and not close_open:
        error, error_at = 3, int(location[n - 1])
    return _result(enter, leave, parent, callpath, cp_parent, cp_region, open_after, error, error_at)


def _result(enter, leave, parent, callpath, cp_parent, cp_region, open_after, error, error_at) -> ScanResult:  # type: ignore[no-untyped-def]
    a = lambda x: np.asarray(x, dtype=np.int64)  # noqa: E731
    return ScanResult(
        a(enter), a(leave), a(parent), a(callpath), a(cp_parent), a(cp_region), open_after, error, error_at
    )


try:  # pragma: no cover - exercised whenever numba is installed

    @njit
    def _scan_kernel(  # type: ignore[no-untyped-def]
        location, kind, region, time, nreg, close_open, enter, leave, parent, callpath, cps, tin, tout, cinc,
        open_after, stack,
    ):  # fmt: skip
        # ``enter``, ``leave``, ``parent``, ``callpath``: one array each (finalisation frees them one by one);
        # ``cps`` rows: cp_parent, cp_region. Every buffer
        # is allocated by the caller at its final size (one row per Enter event), so the
        # loop never reallocates: arrays that may be replaced inside a loop cost numba
        # reference counting on every iteration (about four times slower). ``cinc`` (zeros) receives
        # each instance's closed children's inclusive time, added at each child's Leave: siblings
        # leave in Enter order, so the sums are those of a bincount over the instances, to the bit.
        cp_parent, cp_region = cps[0], cps[1]
        n = location.shape[0]
        cp_map = Dict.empty(key_type=types.int64, value_type=types.int64)
        sp = 0
        ni = 0
        ncp = 0
        err = 0  # an error stops the scan: its code and where (event index, or location for code 3)
        at = -1
        for i in range(n):
            if i > 0 and location[i] != location[i - 1] and sp > 0:
                if not close_open:
                    err, at = 3, location[i - 1]
                    break
                sp = 0
            if kind[i] == 0:
                par = stack[sp - 1] if sp > 0 else -1
                pcp = callpath[par] if par >= 0 else -1
                key = (pcp + 1) * nreg + region[i]
                cp = cp_map.get(key, -1)
                if cp < 0:
                    cp = ncp
                    cp_map[key] = cp
                    cp_parent[ncp] = pcp
                    cp_region[ncp] = region[i]
                    ncp += 1
                enter[ni] = i
                leave[ni] = -1
                tin[ni] = time[i]
                tout[ni] = 0.0
                parent[ni] = par
                callpath[ni] = cp
                stack[sp] = ni
                sp += 1
                ni += 1
            else:
                if sp == 0:
                    err, at = 1, i
                    break
                k = stack[sp - 1]
                if region[enter[k]] != region[i]:
                    err, at = 2, i
                    break
                sp -= 1
                leave[k] = i
                tout[k] = time[i]
                if parent[k] >= 0:
                    cinc[parent[k]] += time[i] - tin[k]
            open_after[i] = stack[sp - 1] if sp > 0 else -1
        if err == 0 and sp > 0 and not close_open:
            err, at = 3, location[n - 1]
        return ni, ncp, err, at

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover
    HAVE_NUMBA = False


def scan_regions(
    location: np.ndarray, kind: np.ndarray, region: np.ndarray, close_open: bool = False, time: np.ndarray | None = None
) -> ScanResult:
    """Pair Enter/Leave events and assign call paths (compiled when numba is available).

    Parameters
    ----------
    location, kind, region : numpy.ndarray
        Region events grouped by location in stream order (``kind`` 0 = Enter,
        1 = Leave). Any integer dtypes; they are not copied.
    close_open : bool
        Close instances still open at the end of a location instead of
        reporting error 3.
    time : numpy.ndarray, optional
        Event times: the result then also has each instance's enter and leave
        time and its children's inclusive time.
    """
    if not HAVE_NUMBA:
        return scan_regions_py(location, kind, region, close_open, time)
    loc = np.ascontiguousarray(location)
    kd = np.ascontiguousarray(kind)
    rg = np.ascontiguousarray(region)
    if loc.dtype.kind not in "iu" or rg.dtype.kind not in "iu":
        loc, rg = loc.astype(np.int64), rg.astype(np.int64)
    tm = np.ascontiguousarray(time, dtype=np.float64) if time is not None else np.zeros(len(loc))
    nreg = int(rg.max()) + 1 if len(rg) else 1
    n, n_enter = len(loc), int(np.count_nonzero(kd == 0))
    # four separate instance arrays, not rows of one buffer: each goes back to the system when dropped
    enter, leave, parent, callpath = (np.empty(n_enter, np.int64) for _ in range(4))
    cps = np.empty((2, n_enter), np.int64)
    tin, tout, cinc = np.empty(n_enter), np.empty(n_enter), np.zeros(n_enter)
    open_after, stack = np.empty(n, np.int64), np.empty(n_enter + 1, np.int64)
    ni, ncp, err, at = _scan_kernel(
        loc, kd, rg, tm, nreg, close_open, enter, leave, parent, callpath, cps, tin, tout, cinc, open_after, stack
    )
    cp_parent, cp_region = cps
    # views of the kernel's buffers (at most about half the events long: no copy worth making)
    res = ScanResult(
        enter[:ni],
        leave[:ni],
        parent[:ni],
        callpath[:ni],
        cp_parent[:ncp].copy(),
        cp_region[:ncp].copy(),
        open_after,
        int(err),
        int(at),
    )
    if time is not None:
        res.t_enter, res.t_leave = tin[:ni], tout[:ni]
        res.child_inc = cinc[:ni]
    return res


def enclosing_instance(open_after: np.ndarray, reg_loc: np.ndarray, loc: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Innermost region instance open at each non-region event (-1 when none).

    ``pos`` is the index of the next region event (the raw-trace contract), so
    the instance open at the event is the one open after region event
    ``pos - 1``, provided that event is on the same location.
    """
    out = np.empty(len(pos), dtype=np.int64)
    if len(pos):
        _enclosing_kernel(open_after, reg_loc, loc, pos, out)
    return out


@njit
def _enclosing_kernel(open_after, reg_loc, loc, pos, out):  # type: ignore[no-untyped-def]
    # one pass, no temporaries (a vectorised form makes seven arrays as long as ``pos``)
    for j in range(pos.shape[0]):
        p = pos[j] - 1
        out[j] = open_after[p] if p >= 0 and reg_loc[p] == loc[j] else -1
