"""One identity per analysis: the registry refuses a second analysis under a used name."""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

import pytest

import perflow
from perflow.errors import PerflowError
from perflow.pag.analysis import Analysis, analysis_named, register, registered
from perflow.pag.stats import VERTEX_STATS


def _count(pag, s):
    return pag.n_vertices


def test_a_second_analysis_under_a_used_name_is_refused() -> None:
    first = Analysis("test_registry.count", compute=_count)
    with pytest.raises(PerflowError) as err:
        Analysis("test_registry.count", compute=lambda pag, s: 0)
    msg = str(err.value)
    # both definitions are named, with file and line
    assert "analysis 'test_registry.count' is defined twice" in msg
    assert f"{Path(__file__)}:{first.defined_at[0].rsplit(':', 1)[1]}" in msg
    assert msg.count(str(Path(__file__))) == 2
    assert analysis_named("test_registry.count") is first
    # a built-in name is protected too
    with pytest.raises(PerflowError, match="'pag.vertex_stats' is defined twice: at .*perflow/pag/stats.py"):
        Analysis("pag.vertex_stats", compute=_count)
    assert analysis_named("pag.vertex_stats") is VERTEX_STATS


def test_the_same_object_registered_twice_is_fine() -> None:
    a = Analysis("test_registry.twice", compute=_count)
    assert register(a) is a and register(a) is a
    assert registered()["test_registry.twice"] is a


def test_unknown_name_suggests_the_closest() -> None:
    with pytest.raises(PerflowError, match="no analysis named 'pag.vertex_stat'; did you mean 'pag.vertex_stats'"):
        analysis_named("pag.vertex_stat")


def test_a_reloaded_module_defines_its_analyses_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = textwrap.dedent(
        """
        from perflow.pag.analysis import Analysis

        def _n(pag, s):
            return pag.n_vertices

        N = Analysis("test_registry_mod.n", compute=_n)
        """
    )
    (tmp_path / "registry_probe_a.py").write_text(src)
    (tmp_path / "registry_probe_b.py").write_text(src)  # another module, same name: refused
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        mod = importlib.import_module("registry_probe_a")
        old = mod.N
        mod = importlib.reload(mod)
        assert mod.N is not old and analysis_named("test_registry_mod.n") is mod.N
        with pytest.raises(PerflowError, match=r"registry_probe_a.py:7 and at .*registry_probe_b.py:7"):
            importlib.import_module("registry_probe_b")
    finally:
        sys.modules.pop("registry_probe_a", None)
        sys.modules.pop("registry_probe_b", None)


def test_distinct_analyses_never_share_a_cache_entry() -> None:
    a = Analysis("test_registry.a", compute=lambda pag, s: "a")
    b = Analysis("test_registry.b", compute=lambda pag, s: "b")
    pag = perflow.PAG.from_literal([{"name": "main", "metrics": {"time": 1.0}}])
    assert (pag.analyses.get(a), pag.analyses.get(b)) == ("a", "b")
