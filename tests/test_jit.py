"""perflow._jit: compiled kernels cached per user, small inputs interpreted with the same results."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import perflow
from perflow import _jit
from perflow.trace import match

REPO = Path(__file__).resolve().parents[1]
RING8 = REPO / "examples" / "data" / "ring8" / "traces.otf2"
CHROME = REPO / "tests" / "data" / "chrome" / "viztracer.json"


def _outputs(mode: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """The shipped trace flows' outputs on two traces, every kernel run in ``mode``."""
    monkeypatch.setenv("PERFLOW_JIT", mode)
    out: dict[str, object] = {}
    pags = {
        "ring8": perflow.read(RING8, decoder="bindings"),
        "synthetic": perflow.synthetic.trace(nprocs=6, iterations=12, slow_rank=2, late_sender=0.002, seed=3),
        "chrome": perflow.read(CHROME),
    }
    for pname, pag in pags.items():
        out[f"{pname}/vertices"] = pag.vertex_table
        out[f"{pname}/metrics"] = pag.metrics
        if pname == "chrome":
            continue
        for flow in ("wait_states", "critical_path", "root_cause"):
            res = perflow.run(flow, pag=pag, jobs=1)
            res.raise_for_status()
            for name, value in res.outputs.items():
                if isinstance(value, pd.DataFrame | str):
                    out[f"{pname}/{flow}/{name}"] = value
    return out


def test_interpreted_kernels_match_compiled(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = _outputs("compile", monkeypatch)
    interpreted = _outputs("python", monkeypatch)
    assert compiled.keys() == interpreted.keys() and len(compiled) > 10
    for key, value in compiled.items():
        other = interpreted[key]
        if isinstance(value, pd.DataFrame):
            pd.testing.assert_frame_equal(value, other, obj=key)
        else:
            assert value == other, key


def _rank_codes(codes, ncodes):  # noqa: ANN001, ANN202 - a kernel for the test below
    seen = np.zeros(ncodes, np.int64)
    out = np.empty(codes.shape[0], np.int64)
    for i in range(codes.shape[0]):
        out[i] = seen[codes[i]]
        seen[codes[i]] += 1
    return out


def test_auto_interprets_small_inputs_and_compiles_large(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFLOW_JIT", "auto")
    assert isinstance(match._rank_codes, _jit.Kernel)
    kernel = _jit.njit(_rank_codes)
    small = np.array([0, 1, 0, 0, 1, 2])
    assert kernel(small, 3).tolist() == [0, 0, 1, 2, 1, 0]
    assert kernel._dispatcher is None  # interpreted: numba not even asked
    big = np.tile(np.arange(7), _jit.SMALL // 7 + 1)
    np.testing.assert_array_equal(kernel(big, 7), np.repeat(np.arange(len(big) // 7), 7))
    assert kernel._dispatcher is not None and kernel._dispatcher.signatures  # compiled
    calls: list[int] = []
    monkeypatch.setattr(kernel, "py_func", lambda *a: calls.append(1))
    assert kernel(small, 3).tolist() == [0, 0, 1, 2, 1, 0]  # once compiled, small inputs take it too
    assert calls == []


def test_auto_compiles_a_kernel_called_often(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFLOW_JIT", "auto")
    kernel = _jit.njit(_rank_codes, small=100)
    codes = np.array([0, 1, 0, 2, 1, 0, 0, 1, 2, 2])
    for _ in range(10):  # 100 elements in all: still interpreted
        assert kernel(codes, 3).tolist() == [0, 0, 1, 0, 1, 2, 3, 2, 1, 2]
    assert kernel._dispatcher is None and kernel.interpreted == 100
    assert kernel(codes, 3).tolist() == [0, 0, 1, 0, 1, 2, 3, 2, 1, 2]  # the 11th call compiles it
    assert kernel._dispatcher is not None and kernel._dispatcher.signatures


def _first_above(a, x):  # noqa: ANN001, ANN202 - a helper kernel for the test below
    lo, hi = 0, a.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] <= x:
            lo = mid + 1
        else:
            hi = mid
    return lo


_first_above_kernel = _jit.njit(_first_above, small=100)


def _fresh_helper(monkeypatch: pytest.MonkeyPatch) -> _jit.Kernel:
    """A new, never compiled helper kernel in place of ``_first_above_kernel`` for one test."""
    helper = _jit.njit(_first_above, small=100)
    monkeypatch.setitem(globals(), "_first_above_kernel", helper)
    return helper


def _ranks_of(a, xs):  # noqa: ANN001, ANN202 - calls the helper kernel once per element, like a replay
    out = np.empty(xs.shape[0], np.int64)
    for i in range(xs.shape[0]):
        out[i] = _first_above_kernel(a, xs[i])
    return out


def test_a_kernel_called_by_an_interpreted_kernel_stays_interpreted(monkeypatch: pytest.MonkeyPatch) -> None:
    # The helper sees the caller's 60-element array at each of its 60 calls (3,600 elements, over its
    # small=100): counted alone it would start numba half way through a run judged small.
    monkeypatch.setenv("PERFLOW_JIT", "auto")
    helper = _fresh_helper(monkeypatch)
    outer = _jit.njit(_ranks_of)
    a = np.arange(60.0)
    xs = a[::-1] - 0.5
    assert outer(a, xs).tolist() == list(range(59, -1, -1))  # 58.5 lies below a[59], ...
    assert outer._dispatcher is None and outer.interpreted == 60
    assert helper._dispatcher is None and helper.interpreted == 0
    assert _jit._NESTED.depth == 0
    big = np.arange(200.0)
    assert helper(big, 10.0) == 11  # called on its own, it counts (and compiles) as before
    assert helper._dispatcher is not None and helper._dispatcher.signatures


def test_the_nesting_depth_is_restored_when_a_kernel_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFLOW_JIT", "auto")
    _fresh_helper(monkeypatch)
    outer = _jit.njit(_ranks_of)
    with pytest.raises(AttributeError, match="shape"):
        outer(None, np.zeros(2))  # the helper fails on its first call

    assert _jit._NESTED.depth == 0


def test_kernels_pickle_by_name() -> None:
    import pickle

    from perflow.trace import flat

    assert pickle.loads(pickle.dumps(flat.window_sums)) is flat.window_sums


def test_stand_ins_are_python_when_interpreted() -> None:
    assert _jit.Dict.empty(key_type=_jit.types.int64, value_type=_jit.types.int64) == {}
    assert "numba" in repr(_jit.types.int64)


def test_bad_mode_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFLOW_JIT", "fast")
    with pytest.raises(ValueError, match=r"PERFLOW_JIT='fast': expected one of auto, compile, python"):
        _jit.mode()


def _fresh_python(code: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in ("NUMBA_CACHE_DIR", "PERFLOW_CACHE_DIR", "PERFLOW_JIT", "PERFLOW_AOT", "PERFLOW_AOT_BUILD")
    }
    res = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env={**base, **env},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    return res


def test_cache_location_perflow_then_numba_variable(tmp_path: Path) -> None:
    code = """
        import os, perflow
        from perflow import _jit
        print(os.environ["NUMBA_CACHE_DIR"]); print(_jit.kernel_cache_dir())
    """
    mine = tmp_path / "mine"
    out = _fresh_python(code, tmp_path, PERFLOW_CACHE_DIR=str(mine)).stdout.split()
    assert out == [str(mine / "numba")] * 2
    theirs = tmp_path / "theirs"
    out = _fresh_python(code, tmp_path, PERFLOW_CACHE_DIR=str(mine), NUMBA_CACHE_DIR=str(theirs)).stdout.split()
    assert out == [str(theirs)] * 2  # the user's numba setting wins
    xdg = tmp_path / "xdg"
    out = _fresh_python(code, tmp_path, XDG_CACHE_HOME=str(xdg)).stdout.split()
    assert out == [str(xdg / "perflow" / "numba")] * 2


def test_first_compile_notice_once_then_cached(tmp_path: Path) -> None:
    (tmp_path / "kern.py").write_text(
        textwrap.dedent(
            """
            import numpy as np
            from perflow._jit import njit

            @njit
            def total(a):
                s = 0.0
                for i in range(a.shape[0]):
                    s += a[i]
                return s

            @njit
            def twice(a):
                return total(a) * 2
            """
        )
    )
    code = """
        import io, sys
        sys.path.insert(0, ".")
        import numpy as np
        from perflow import progress
        import kern
        stream = io.StringIO()
        progress.enable(stream, bars=True)
        print(kern.twice(np.ones(4)), kern.total(np.ones(3)))
        sys.stderr.write(stream.getvalue())
    """
    env = {"PERFLOW_CACHE_DIR": str(tmp_path / "cache"), "PERFLOW_JIT": "compile"}
    first = _fresh_python(code, tmp_path, **env)
    assert first.stdout.split() == ["8.0", "3.0"]
    assert first.stderr.count("perflow: compiling analysis kernels (first run only, ~") == 1
    assert list((tmp_path / "cache" / "numba").rglob("kern.twice-*.nbi"))
    second = _fresh_python(code, tmp_path, **env)
    assert second.stdout.split() == ["8.0", "3.0"] and "compiling" not in second.stderr


def test_interpreted_otf2_writer_matches_compiled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from perflow.readers.otf2 import decode
    from perflow.writers.otf2 import write_otf2

    raw = decode(RING8, decoder="bindings")
    tables = {}
    for mode in ("compile", "python"):
        monkeypatch.setenv("PERFLOW_JIT", mode)
        anchor = write_otf2(raw, tmp_path / mode)
        tables[mode] = decode(anchor, decoder="bindings")
    a, b = tables["compile"], tables["python"]
    for name in ("region_events", "p2p_events", "coll_events"):
        ta, tb = getattr(a, name), getattr(b, name)
        assert ta.keys() == tb.keys()
        for col in ta:
            np.testing.assert_array_equal(ta[col], tb[col], err_msg=f"{name}.{col}")
    assert len(a.region_events["time"]) == len(raw.region_events["time"])


def test_kernels_compiled_ahead_of_time_are_read_and_stale_ones_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """perflow._aot: a shipped cache is read first (nothing compiled, nothing written into it); an entry of an
    edited source file or of another CPU is ignored: the kernel is compiled and cached per user instead."""
    import pickle

    calls = """
        import numpy as np
        from perflow.trace.critical import _bsearch_left
        from perflow.trace.delaykernels import _find_i64
        from perflow.trace.replayplan import _positions
        a = np.array([1, 3, 5, 7], np.int64)
        res = [_bsearch_left(a, 0, 4, 4), _find_i64(a, 0, 4, 6), int(_positions(np.array([0, 1, 0]), 2)[0][2])]
        hits = [getattr(k.dispatcher._cache, "hits", None) for k in (_bsearch_left, _find_i64, _positions)]
        print(res, hits)
    """
    ship = tmp_path / "ship"
    build = _fresh_python(
        calls, tmp_path, PERFLOW_AOT_BUILD=str(ship), PERFLOW_CACHE_DIR=str(tmp_path / "c0"), PERFLOW_JIT="compile"
    )
    assert build.stdout.split("]")[0] == "[2, 3, 1"
    (ship / "manifest.json").write_text("{}")
    assert not list((tmp_path / "c0").rglob("*.nbi"))  # building writes the shipped cache only

    def tamper(pattern: str, how: str) -> None:
        (index,) = ship.rglob(pattern)
        with open(index, "rb") as f:
            version = pickle.load(f)
            stamp, overloads = pickle.loads(f.read())
        if how == "source":  # the source file changed since (an editable install)
            stamp = "0" * 64
        else:  # compiled for another CPU
            overloads = {(sig, (magic[0], "foreign-cpu", ""), code): v for (sig, magic, code), v in overloads.items()}
        with open(index, "wb") as f:
            pickle.dump(version, f, protocol=-1)
            f.write(pickle.dumps((stamp, overloads), protocol=-1))

    tamper("delaykernels._find_i64-*.nbi", "source")
    tamper("replayplan._positions-*.nbi", "cpu")
    before = {p: p.stat().st_mtime_ns for p in ship.rglob("*")}
    run = _fresh_python(
        calls, tmp_path, PERFLOW_AOT=str(ship), PERFLOW_CACHE_DIR=str(tmp_path / "c1"), PERFLOW_JIT="compile"
    )
    assert run.stdout.strip() == "[2, 3, 1] [1, 0, 0]"
    user = sorted(p.name.split("-")[0] for p in (tmp_path / "c1").rglob("*.nbi"))
    assert user == ["delaykernels._find_i64", "replayplan._positions"]  # compiled and cached per user, not shipped
    assert {p: p.stat().st_mtime_ns for p in ship.rglob("*")} == before
    from perflow import _aot

    monkeypatch.delenv("PERFLOW_AOT_BUILD", raising=False)
    monkeypatch.setenv("PERFLOW_AOT", str(ship))
    assert _aot.shipped_root() == ship
    monkeypatch.setenv("PERFLOW_AOT", "0")  # off: the per-user cache only
    assert _aot.shipped_root() is None
