"""benchmarks/scale_results.py: bench_scale's results saved as Parquet and compared column by column."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest

from tests.conftest import REPO

pytest.importorskip("pyarrow")


@pytest.fixture(scope="module")
def bench():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import bench_scale
        import scale_results
        from make_otf2_trace import make_trace
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    return bench_scale, scale_results, make_trace


@pytest.fixture(scope="module")
def results(bench, tmp_path_factory):  # type: ignore[no-untyped-def]
    import perflow

    bench_scale, _, make_trace = bench
    path = tmp_path_factory.mktemp("scale") / "t"
    make_trace(str(path), 6000, 4)
    pag = perflow.read(path)
    return {name: f(pag) for name, f in bench_scale._passes().items()}


def test_saved_results_compare_equal(bench, results, tmp_path) -> None:  # type: ignore[no-untyped-def]
    _, sr, _ = bench
    rows = sr.save(results, tmp_path / "a")
    assert rows["waits"] == len(results["wait_states"]) > 0 and rows["pop"] > 0
    # the other engine's rows in another order, its categories in another order: still equal
    other = dict(results)
    w = results["wait_states"].iloc[::-1].copy()
    w["name"] = w["name"].cat.reorder_categories(list(w["name"].cat.categories[::-1]))
    other["wait_states"] = w
    sr.save(other, tmp_path / "b")
    lines, diff = sr.compare(tmp_path / "a", tmp_path / "b")
    assert diff == [], diff
    assert any(line.startswith("waits (") and "exact: " in line for line in lines), lines


def test_compare_reports_floats_past_the_tolerance(bench, results, tmp_path) -> None:  # type: ignore[no-untyped-def]
    _, sr, _ = bench
    sr.save(results, tmp_path / "a")
    other = dict(results)
    pop = results["pop_metrics"].copy()
    pop.loc[0, "value"] *= 1 + 1e-12  # within the tolerance: equal, not exact
    other["pop_metrics"] = pop
    w = results["wait_states"].copy()
    w["amount"] = w["amount"].to_numpy() * np.where(np.arange(len(w)) == 0, 1.001, 1.0)
    w.loc[w.index[-1], "process"] = 999
    other["wait_states"] = w
    sr.save(other, tmp_path / "b")
    lines, diff = sr.compare(tmp_path / "a", tmp_path / "b")
    assert any("pop" in line and "max relative difference" in line for line in lines), lines
    assert not any(d.startswith("pop") for d in diff)
    assert any(d.startswith("waits.amount: max relative difference 1.0e-03") for d in diff), diff
    assert any(d.startswith("waits.process") for d in diff), diff


def test_compare_column_kinds(bench) -> None:  # type: ignore[no-untyped-def]
    _, sr, _ = bench
    nan = np.array([1.0, np.nan])
    assert sr._column(pd.Series(nan), pd.Series(nan.copy())) == (True, "exact")
    assert not sr._column(pd.Series(nan), pd.Series([1.0, 2.0]))[0]
    assert sr._column(pd.Series(["a", "b"]), pd.Series(["a", "b"]))[0]
    assert not sr._column(pd.Series(["a", "b"], dtype="category"), pd.Series(["a", "c"], dtype="category"))[0]


def test_tree_monitor_keeps_every_process(bench) -> None:  # type: ignore[no-untyped-def]
    """Each process of the tree has its RSS and PSS, now and at the peak; an ended one keeps its last figures."""
    import subprocess
    import time

    bench_scale = bench[0]
    child = subprocess.Popen([sys.executable, "-c", "import time; b = bytearray(64 << 20); time.sleep(30)"])
    mon = bench_scale.TreeRSS(every=0.05, pss_every=0.05)
    try:
        key = f"worker {child.pid}"  # a child of the client is a worker (a LocalCluster's nannies are in-process)
        for _ in range(100):
            time.sleep(0.05)
            if mon.procs.get(key, [0, 0, 0, 0])[3] > 60e6:
                break
        child.kill()
        child.wait()
        time.sleep(0.3)
    finally:
        mon.stop()
    got = mon.procs_gb()
    assert got[key]["alive"] is False
    assert 0.06 < got[key]["peak_rss"] and 0.06 < got[key]["peak_pss"] <= got[key]["peak_rss"]
    assert got[key]["rss"] > 0.06  # the last figures sampled while it ran
    me = next(k for k in got if k.startswith("client+scheduler "))
    assert got[me]["alive"] and got[me]["pss"] > 0
    line = mon.procs_line()
    assert f"{key} (gone) " in line and me in line  # a worker, not folded into the ended decoders
