"""The partitioned wait-state program (the Dask engine's) run on a local runtime, for tests comparing it with ``pag.analyses``."""

from __future__ import annotations

import pandas as pd

from perflow.pag.pag import PAG
from perflow.trace.raw import RawTrace


def partitioned_wait_instances(raw: RawTrace, pag: PAG, n_parts: int) -> pd.DataFrame:
    """Wait instances of ``raw`` computed over ``n_parts`` process blocks (``pag`` is ``raw`` built locally)."""
    from perflow.pag.partitioned import LocalRuntime
    from perflow.trace.analyses import vertex_roles
    from perflow.trace.pipeline import BuildOptions, build
    from perflow.trace.split import definitions_only, split_blocks
    from perflow.trace.waitparts import program
    from perflow.trace.waits import WaitSettings

    parts, processes, assign = split_blocks(raw, n_parts)
    assert len(parts) == n_parts
    rt = LocalRuntime(n_parts, jobs=1)
    try:
        built = build(rt, parts, definitions_only(raw), processes, assign, BuildOptions(False, True, False))
        roles, regions = vertex_roles(pag)
        names = pag.vertex_table["name"].astype(str).to_numpy()
        s = WaitSettings()  # the defaults, as pag.analyses.get(WAIT_INSTANCES) takes them
        return program(built, names, window=s.wrong_order_window, late_receiver=s.late_receiver,
                       early_reduce=s.early_reduce, roles=roles, regions=regions)  # fmt: skip
    finally:
        rt.close()
