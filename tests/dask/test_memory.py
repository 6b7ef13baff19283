"""What the Dask engine tells Dask about memory: partition sizes and the number of partitions (no cluster)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("dask", reason="the Dask engine needs the perflow[dask] extra (dask, distributed)")

from dask.sizeof import sizeof  # noqa: E402

from perflow.dask.memory import deep_nbytes, partitions_for, register_sizeof  # noqa: E402
from perflow.trace.parttrace import SenderState  # noqa: E402


def test_partitions_for_a_trace_larger_than_its_workers_hold() -> None:
    # 200 M events, 2 workers, 4 M per partition: 50, already a multiple of 2
    assert partitions_for(200e6, 2, 64, 4e6) == 50
    # 21 M events on 2 workers: ceil(21/4) = 6 partitions (a multiple of the workers)
    assert partitions_for(21e6, 2, 64, 4e6) == 6
    assert partitions_for(18e6, 4, 64, 4e6) == 8  # 5 rounded up to a multiple of 4 workers
    # small traces keep one partition per worker; never more partitions than processes
    assert partitions_for(1e6, 2, 64, 4e6) == 2
    assert partitions_for(200e6, 2, 8, 4e6) == 8
    assert partitions_for(200e6, 3, 2, None) == 2


def test_partition_objects_weigh_their_arrays_each_once() -> None:
    a = np.zeros(1000, dtype=np.int64)  # 8,000 bytes
    sent = pd.DataFrame({"x": np.zeros(500)})  # 4,000 bytes of data
    own = np.zeros(100, dtype=np.int64)  # 800 bytes
    st = SenderState(own, sent, a, a[10:], np.ones(250, dtype=np.int32))  # a view of `a` is not counted again
    n = deep_nbytes(st)
    # the object, `own`, `a` once, the frame as Dask weighs it, the counts (and an empty msg_id)
    assert n == 64 + 800 + 8000 + sizeof(sent) + 1000
    assert sizeof(sent) >= 4000
    register_sizeof()
    assert sizeof(st) == n  # what Dask's memory manager sees (not ~100 bytes of sys.getsizeof)
    assert sizeof({"a": st, "b": [st]}) >= n
