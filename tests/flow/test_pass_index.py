"""The pass index: listing passes and running a flow import only the pass modules in use."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from perflow.errors import PassError
from perflow.flow import passindex, registry

REPO = Path(__file__).resolve().parents[2]


def _py(code: str, cwd: Path | None = None) -> list[str]:
    res = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300, cwd=cwd
    )
    assert res.returncode == 0, res.stderr
    return res.stdout.splitlines()


def test_index_is_current() -> None:
    path = passindex.builtin_index_path()
    assert path.read_text(encoding="utf-8") == passindex.builtin_text(), (
        f"{path} is out of date: run `python -m perflow.flow.passindex --write` and commit it"
    )


def test_index_describes_each_pass_like_its_spec() -> None:
    index = json.loads(passindex.builtin_index_path().read_text(encoding="utf-8"))
    spec = registry.get_pass("hotspot")
    info = passindex.from_record("hotspot", index["hotspot"])
    assert info == passindex.info_of(spec)
    assert info.module == "perflow.passes.hotspot" and info.summary == spec.summary
    assert ("k", "int", "10", spec.setting("k").doc) in info.settings
    assert info.outputs == (("result", "DataFrame"),)


def test_listing_imports_no_pass_module() -> None:
    out = _py(
        """
        import sys
        from perflow.flow.registry import pass_infos
        infos = pass_infos()
        print(len(infos), infos["plot_breakdown"].tags, infos["wait_states"].module)
        from perflow.flow.plugins import entry_points
        # a third-party pass library without a pass index is imported to be listed (it may import pandas)
        others = [e for e in entry_points("perflow.passes") if not e.value.startswith("perflow.")]
        heavy = () if others else ("matplotlib", "pandas")
        print(sorted(m for m in sys.modules if m.startswith("perflow.passes.") or m in heavy))
        """
    )
    n, rest = out[0].split(" ", 1)
    assert int(n) >= 60 and rest == "('plot',) perflow.passes.waitstates"
    assert out[1] == "[]"


def test_a_flow_imports_only_the_modules_it_uses() -> None:
    out = _py(
        """
        import sys
        import perflow
        pag = perflow.load("examples/data/ring8.pag")
        res = perflow.run("hotspot", pag=pag)
        res.raise_for_status()
        print(sorted(m for m in sys.modules if m.startswith("perflow.passes.") and not m.startswith("perflow.passes._")))
        print("matplotlib" in sys.modules)
        """,
        cwd=REPO,
    )
    used = eval(out[0])  # noqa: S307 - a list of module names printed above
    assert "perflow.passes.hotspot" in used and "perflow.passes.timeline" not in used
    assert len(used) < 8, used


def test_third_party_library_is_indexed_lazily(tmp_path: Path) -> None:
    lib = tmp_path / "mylib"
    lib.mkdir()
    (lib / "__init__.py").write_text(
        textwrap.dedent(
            """
            def pass_index():
                return {"double": {"module": "mylib.impl", "function": "double", "doc": "Twice x.",
                                   "inputs": [["x", "int", True, None]], "outputs": [["result", "int"]]}}

            def load_all():
                import mylib.impl  # noqa: F401
            """
        )
    )
    (lib / "impl.py").write_text(
        textwrap.dedent(
            """
            from perflow.flow.registry import pass_

            @pass_
            def double(x: int, *, by: int = 2) -> int:
                '''Twice x.'''
                return x * by
            """
        )
    )
    out = _py(
        """
        import sys
        sys.path.insert(0, ".")
        import mylib, perflow.passes
        from perflow.flow import plugins, registry
        plugins._LOADED["perflow.passes"] = {"builtin": perflow.passes, "mylib": mylib}
        print(registry.pass_infos()["double"].summary, "mylib.impl" in sys.modules)
        print(registry.get_pass("double")(4), "mylib.impl" in sys.modules)
        print("double" in registry.all_passes(), "hotspot" in registry.all_passes())
        """,
        cwd=tmp_path,
    )
    assert out == ["Twice x. False", "8 True", "True True"]


def test_a_pass_missing_from_a_stale_index_is_still_found() -> None:
    out = _py(
        """
        import perflow.passes as lib
        from perflow.flow import registry
        full = lib.pass_index()
        lib.pass_index = lambda: {k: v for k, v in full.items() if k != "late_sender"}  # an index made before it
        print("late_sender" in registry.pass_infos(), registry.get_pass("late_sender").module)
        """
    )
    assert out == ["False perflow.passes.waitstates"]


def test_unknown_pass_still_suggests() -> None:
    with pytest.raises(PassError, match=r"unknown pass 'hotspott'; did you mean 'hotspot'\?"):
        registry.get_pass("hotspott")


def test_passindex_command_checks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    assert passindex.main([]) == 0
    assert "is current" in capsys.readouterr().out
    stale = tmp_path / "_index.json"
    stale.write_text("{}\n")
    monkeypatch.setattr(passindex, "builtin_index_path", lambda: stale)
    assert passindex.main([]) == 1
    assert "out of date: run python -m perflow.flow.passindex --write" in capsys.readouterr().err
    assert passindex.main(["--write"]) == 0
    assert stale.read_text() == passindex.builtin_text()
