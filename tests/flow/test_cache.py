"""The cross-run cache and fingerprints: a change always recomputes, no change never does."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pandas as pd

import perflow
from perflow import Flow
from perflow.flow.cache import Cache
from perflow.flow.fingerprint import fingerprint

from . import helpers
from .helpers import CALLS


def chain() -> Flow:
    f = Flow("chain")
    x = f.input("x", int)
    a = f.step("a", "t_inc", x, by=1)
    b = f.step("b", "t_versioned", a)
    c = f.step("c", "t_frame", b, n=4)
    f.output("table", c)
    f.output("b", b)
    return f


def statuses(r) -> dict[str, str]:
    return dict(r.steps["status"])


def test_unchanged_rerun_loads_outputs_and_skips_intermediates(tmp_path):
    CALLS.clear()
    cold = perflow.run(chain(), x=1, cache=tmp_path)
    assert statuses(cold) == {"a": "done", "b": "done", "c": "done"}
    assert len(Cache(tmp_path)) == 3
    CALLS.clear()
    warm = perflow.run(chain(), x=1, cache=tmp_path)
    assert sum(CALLS.values()) == 0
    assert statuses(warm) == {"a": "unneeded", "b": "cached", "c": "cached"}
    pd.testing.assert_frame_equal(warm["table"], cold["table"])
    assert warm["b"] == 4


def test_a_changed_setting_recomputes_it_and_everything_downstream(tmp_path):
    perflow.run(chain(), x=1, cache=tmp_path)
    CALLS.clear()
    r = perflow.run(chain(), x=1, cache=tmp_path, settings={"a.by": 2})
    assert statuses(r) == {"a": "done", "b": "done", "c": "done"}
    assert r["b"] == 6 and r["table"]["v"].tolist() == [0, 6, 12, 18]
    CALLS.clear()
    r = perflow.run(chain(), x=1, cache=tmp_path, settings={"c.n": 2})
    assert statuses(r) == {"a": "unneeded", "b": "cached", "c": "done"} and CALLS == {"t_frame": 1}
    assert len(r["table"]) == 2
    # back to the first settings: all cached again
    assert statuses(perflow.run(chain(), x=1, cache=tmp_path)) == {"a": "unneeded", "b": "cached", "c": "cached"}


def test_a_changed_default_counts_like_a_changed_setting(tmp_path):
    perflow.run(chain(), x=1, cache=tmp_path)
    r = perflow.run(chain(), x=1, cache=tmp_path, settings={"a.by": 1})  # the default, given explicitly
    assert statuses(r)["b"] == "cached"


def test_a_changed_input_recomputes(tmp_path):
    perflow.run(chain(), x=1, cache=tmp_path)
    CALLS.clear()
    r = perflow.run(chain(), x=2, cache=tmp_path)
    assert statuses(r) == {"a": "done", "b": "done", "c": "done"} and r["b"] == 6


def test_a_bumped_pass_version_recomputes(tmp_path):
    try:
        perflow.run(chain(), x=1, cache=tmp_path)
        helpers.versioned("2")
        CALLS.clear()
        r = perflow.run(chain(), x=1, cache=tmp_path)
        assert statuses(r) == {"a": "cached", "b": "done", "c": "done"}
        assert CALLS == {"t_versioned": 1, "t_frame": 1}
    finally:
        helpers.versioned("1")


def test_pag_inputs_are_keyed_by_content(tmp_path):
    f = Flow("hot")
    f.output("hot", f.step("hot", "t_hotspot", f.input("pag", perflow.PAG), k=3))
    pag = perflow.synthetic.trace(nprocs=2, iterations=3, seed=1)
    same = perflow.synthetic.trace(nprocs=2, iterations=3, seed=1)
    other = perflow.synthetic.trace(nprocs=2, iterations=3, seed=2)
    CALLS.clear()
    perflow.run(f, pag=pag, cache=tmp_path)
    assert statuses(perflow.run(f, pag=same, cache=tmp_path)) == {"hot": "cached"}
    assert statuses(perflow.run(f, pag=other, cache=tmp_path)) == {"hot": "done"}
    assert CALLS["t_hotspot"] == 2


def test_side_effect_passes_always_run_and_key_downstream_by_value(tmp_path):
    f = Flow("side")
    x = f.input("x", int)
    f.output("y", f.step("inc", "t_inc", f.step("side", "t_side", x)))
    perflow.run(f, x=1, cache=tmp_path)
    CALLS.clear()
    r = perflow.run(f, x=1, cache=tmp_path)
    assert statuses(r) == {"side": "done", "inc": "cached"} and CALLS == {"t_side": 1}


def test_corrupt_entries_are_recomputed(tmp_path):
    f = Flow("one")
    f.output("t", f.step("t", "t_frame", f.input("x", int)))
    perflow.run(f, x=1, cache=tmp_path)
    for root, _, files in os.walk(tmp_path):
        for name in files:
            if name.endswith(".pkl"):
                with open(os.path.join(root, name), "wb") as fh:
                    fh.write(b"not a pickle")
    # a damaged entry is found when the run is planned (its digest), dropped and recomputed
    r = perflow.run(f, x=1, cache=tmp_path)
    assert r.ok and statuses(r) == {"t": "done"}
    assert statuses(perflow.run(f, x=1, cache=tmp_path)) == {"t": "cached"}


def test_unfingerprintable_inputs_run_uncached(tmp_path):
    f = Flow("lam")
    f.output("y", f.step("y", helpers.plain, f.input("x")))

    class Local:  # a local class cannot be pickled, so it has no fingerprint
        def __mul__(self, k: int) -> int:
            return k

    r = perflow.run(f, x=Local(), cache=tmp_path)
    assert r["y"] == 2 and statuses(r) == {"y": "done"}
    assert len(Cache(tmp_path)) == 0


def test_unpicklable_results_are_not_cached_but_the_run_succeeds(tmp_path, caplog):
    import threading

    @perflow.pass_(name="t_lock")
    def lock(x: int) -> object:
        return threading.Lock()

    f = Flow()
    f.output("l", f.step("l", lock, f.input("x", int)))
    r = perflow.run(f, x=1, cache=tmp_path)
    assert r.ok and "cannot cache the result of l" in caplog.text and len(Cache(tmp_path)) == 0


def test_cache_object_and_clear(tmp_path):
    c = Cache(tmp_path / "c")
    perflow.run(chain(), x=1, cache=c)
    assert len(c) == 3
    c.clear()
    assert len(c) == 0
    shutil.rmtree(tmp_path / "c")


# ---------------------------------------------------------------------- fingerprints
def test_fingerprints_of_plain_values():
    assert fingerprint(1) != fingerprint(1.0) != fingerprint("1") != fingerprint(True)
    assert fingerprint([1, 2]) != fingerprint((1, 2)) != fingerprint([2, 1])
    assert fingerprint({"a": 1, "b": 2}) == fingerprint({"b": 2, "a": 1})
    assert fingerprint({1, 2, 3}) == fingerprint({3, 2, 1})
    assert fingerprint(np.arange(3)) != fingerprint(np.arange(3).astype(np.int32))
    assert fingerprint(np.float64(1.5)) == fingerprint(np.float64(1.5))


def test_fingerprints_of_frames_see_every_cell_name_and_dtype():
    df = pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"]})
    fp = fingerprint(df)
    assert fingerprint(df.copy()) == fp
    changed = df.copy()
    changed.loc[2, "b"] = "w"
    assert fingerprint(changed) != fp
    assert fingerprint(df.rename(columns={"a": "c"})) != fp
    assert fingerprint(df.astype({"a": "int32"})) != fp
    assert fingerprint(df.set_axis([5, 6, 7])) != fp
    assert fingerprint(pd.DataFrame({"a": [[1], [2]]})) != fingerprint(pd.DataFrame({"a": [[1], [3]]}))


def test_pag_fingerprints_follow_content_and_attrs():
    a = perflow.synthetic.trace(nprocs=2, iterations=3, seed=1)
    b = perflow.synthetic.trace(nprocs=2, iterations=3, seed=1)
    assert fingerprint(a) == fingerprint(b)
    assert fingerprint(a.with_metrics(time_exc=a.metrics["time_exc"].to_numpy() * 2)) != fingerprint(a)
    b.attrs["note"] = "changed"
    assert fingerprint(a) != fingerprint(b)
    assert fingerprint(a.vertices.top(2)) != fingerprint(a.vertices.top(3))


def test_path_fingerprints_follow_content(tmp_path):
    p = tmp_path / "data.txt"
    p.write_text("one")
    first = fingerprint(p)
    assert fingerprint(p) == first
    p.write_text("three")
    assert fingerprint(p) != first
    d = tmp_path / "dir"
    d.mkdir()
    (d / "f").write_text("x")
    fd = fingerprint(d)
    os.utime(d / "f", ns=(1, 1))
    assert fingerprint(d) == fd  # touched, not changed
    (d / "f").write_text("y")
    os.utime(d / "f", ns=(1, 1))
    assert fingerprint(d) != fd  # changed, size and mtime as before
    assert fingerprint(tmp_path / "missing") != fingerprint(tmp_path / "missing2")
