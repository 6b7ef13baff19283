"""The pass SDK: a pass written against perflow.sdk alone runs locally, in a flow, and on partitions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import perflow
from perflow import sdk


def test_every_public_name_is_documented() -> None:
    for name in sdk.__all__:
        obj = getattr(sdk, name)
        doc = getattr(obj, "__doc__", None) if not isinstance(obj, sdk.Analysis) else obj.doc
        assert doc and doc.strip(), f"perflow.sdk.{name} has no documentation"


def test_metric_rows_are_read_only_and_not_copies() -> None:
    pag = perflow.synthetic.trace(nprocs=4, iterations=3)
    rows = pag.rows
    x = rows.column("time_exc")
    assert np.shares_memory(x, pag._metrics["time_exc"].to_numpy())  # a view of the table itself
    with pytest.raises(ValueError, match="read-only"):
        x[0] = 1.0
    with pytest.raises(ValueError, match="read-only"):
        rows.vertex[0] = 1
    assert len(rows) == len(pag.metrics)
    np.testing.assert_array_equal(rows.process(), pag.metrics.index.get_level_values("process"))
    with pytest.raises(perflow.MetricError, match="unknown metric 'time_ex'; did you mean 'time_exc'"):
        rows.column("time_ex")


def test_a_pass_from_the_sdk_alone() -> None:
    @sdk.pass_(name="sdk_test_busiest", version="1")
    def busiest(pag: sdk.PAG, *, metric: str = "time_exc", k: int = 3) -> pd.DataFrame:
        """The k vertices with the largest maximum over processes."""
        st = sdk.vertex_stats_of(pag, metric, owner="sdk_test_busiest")
        ids = np.argsort(-st["max"], kind="stable")[:k]
        df = sdk.vertex_columns(pag, ids)
        df["max"] = st["max"][ids]
        df["on"] = st["argmax_process"][ids]
        return df

    pag = perflow.synthetic.trace(nprocs=6, iterations=4, slow_rank=4, slow_factor=5.0, seed=1)
    direct = busiest(pag)
    assert direct["name"].iloc[0] == "compute" and direct["on"].iloc[0] == 4
    # the statistics come from the PAG's analysis manager: a second call computes nothing
    assert pag.analyses.cached(sdk.VERTEX_STATS, metric="time_exc", across="process")
    flow = perflow.Flow("t")
    top = flow.step("b", "sdk_test_busiest", flow.input("pag", sdk.PAG), k=3)
    flow.output("top", top)
    res = perflow.run(flow, pag=pag)
    pd.testing.assert_frame_equal(res.outputs["top"], direct)
    with pytest.raises(sdk.SettingsError, match="sdk_test_busiest: setting across='rank' is not one of"):
        sdk.vertex_stats_of(pag, "time_exc", "rank", owner="sdk_test_busiest")


def test_subgraph_is_public() -> None:
    pag = perflow.synthetic.trace(nprocs=3, iterations=2)
    v = pag.vertex("MPI_Waitall").id
    sub = pag.subgraph([v])
    assert list(sub.call_paths()) == [p for p in pag.call_paths() if "MPI_Waitall".startswith(p.split("/")[-1]) or
                                      "main/timestep/exchange/MPI_Waitall".startswith(p)]  # fmt: skip
    assert sub.vertex_table["orig_vertex"].iloc[-1] == v
