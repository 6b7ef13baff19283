"""perflow's Caliper and CUBE readers agree with the reference Python readers on the shared data.

``caliper-reader`` (LLNL's reader of .cali files) and ``pycubexr`` (a reader of
CUBE4 .cubex files) are in the ``test`` extra: same call paths, same values.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import perflow
from tests.conftest import shared


def _perflow_by_path(pag: perflow.PAG, metric: str) -> pd.DataFrame:
    """``metric`` per (call path, process), summed over threads and over vertices sharing a call path."""
    m = pag.metrics[metric].groupby(level=["vertex", "process"]).sum().reset_index()
    m["call_path"] = pag.call_paths().to_numpy()[m["vertex"].to_numpy()]
    return m.groupby(["call_path", "process"])[metric].sum()


# ---------------------------------------------------------------------- Caliper
@pytest.mark.parametrize(
    ("parts", "column", "metric"),
    [
        (("caliper", "lulesh-cali", "lulesh-annotation-profile.cali"), "sum#time.duration", "time_exc"),
        (("caliper", "lulesh-cali", "lulesh-annotation-profile.cali"), "count", "count"),
        (("scaling", "lulesh-caliper", "27_cores.cali"), "avg#inclusive#sum#time.duration", "time_inc"),
        (("scaling", "lulesh-caliper", "343_cores.cali"), "max#inclusive#sum#time.duration", "time_inc_max"),
    ],
    ids=["lulesh-time", "lulesh-count", "scaling27-avg", "scaling343-max"],
)
def test_caliper_reader_agrees_with_caliperreader(parts: tuple[str, ...], column: str, metric: str) -> None:
    cr = pytest.importorskip("caliperreader")
    path = shared(*parts)
    records, _globals = cr.read_caliper_contents(str(path))
    ref: dict[str, float] = {}
    for r in records:
        if "path" not in r or column not in r:
            continue  # records outside every region: perflow keeps them out of the tree too
        p = r["path"] if isinstance(r["path"], list) else [r["path"]]
        key = "/".join(map(str, p))
        ref[key] = ref.get(key, 0.0) + float(r[column])
    pag = perflow.read(str(path))
    ours = pag.aggregate(metric, "sum")
    ours = pd.Series(ours.to_numpy(), index=pag.call_paths().to_numpy()).groupby(level=0).sum()
    ref_s = pd.Series(ref)
    assert set(ref_s.index) <= set(ours.index)  # every call path the reference reader has
    np.testing.assert_allclose(ours.reindex(ref_s.index).to_numpy(), ref_s.to_numpy(), rtol=1e-9, atol=1e-12)
    # every call path perflow has is one the reference reader has (or an ancestor it adds to complete the tree)
    extra = set(ours.index) - set(ref_s.index)
    assert all(any(r.startswith(e + "/") for r in ref_s.index) for e in extra), extra


# ---------------------------------------------------------------------- CUBE
def _cube_reference(path: str, metric: str, exclusive: bool) -> pd.Series:
    from pycubexr import CubexParser

    out: dict[tuple[str, int], float] = {}
    with CubexParser(path) as p:
        m = p.get_metric_by_name(metric)
        values = p.get_metric_values(m)
        # one thread per process in this run: pycubexr lists the locations in process order
        ranks = list(range(len(p.get_locations())))
        for c in p.all_cnodes():
            names = []
            node = c
            while node is not None:
                names.append(p.get_region(node).name)
                node = node.parent
            key = "/".join(reversed(names))
            conv = {"convert_to_exclusive": True} if exclusive else {"convert_to_inclusive": True}
            for rank, v in zip(ranks, values.cnode_values(c, **conv)):
                out[(key, rank)] = out.get((key, rank), 0.0) + float(v)
    s = pd.Series(out)
    s.index.names = ["call_path", "process"]
    return s


@pytest.mark.parametrize(
    ("metric", "cube_metric", "exclusive"),
    [("time_exc", "time", True), ("time_inc", "time", False), ("visits", "visits", True)],
)
def test_cube_reader_agrees_with_pycubexr(metric: str, cube_metric: str, exclusive: bool) -> None:
    pytest.importorskip("pycubexr")
    path = str(shared("cube", "scorep-cpi", "profile.cubex"))
    ref = _cube_reference(path, cube_metric, exclusive)
    ours = _perflow_by_path(perflow.read(path), metric)
    # the same call paths (perflow merges the two MPI_Bcast call sites of iteration, as the reference's sums do)
    assert set(ours.index.get_level_values(0)) == set(ref.index.get_level_values(0))
    joined = pd.concat([ours.rename("ours"), ref.rename("ref")], axis=1).fillna(0.0)
    np.testing.assert_allclose(joined["ours"].to_numpy(), joined["ref"].to_numpy(), rtol=1e-9, atol=1e-12)
    assert len(joined) == 10 * 4  # 10 call paths (11 cnodes) on 4 processes
