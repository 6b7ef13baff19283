"""The flow layer never names a pass: it asks the registry for a role (perflow/flow/roles.py).

A static check of ``perflow/flow`` (no pass looked up by a literal name: not through
``get_pass``, the registry's tables or any other call taking the name first), and the role
protocol itself: perflow's library fills every role, a third-party pass replaces the built-in
one, two third-party passes for one role are an error, and a pass whose signature does not fit
its role is refused when it registers.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from perflow.errors import PassError
from perflow.flow import registry
from perflow.flow.roles import ROLES

ROOT = Path(__file__).resolve().parents[2] / "perflow"
#: every built-in pass name (the pass index of perflow's library)
PASS_NAMES = frozenset(json.loads((ROOT / "passes" / "_index.json").read_text(encoding="utf-8")))
#: the registry's tables: subscripting them with a literal names a pass
TABLES = ("_REGISTRY", "_LAZY", "all_passes", "pass_infos")


def pass_names_in(source: str) -> list[tuple[int, str]]:
    """Lines of ``source`` that look a pass up by a literal name (``role_pass`` and ``Role`` take a role)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and node.args:
            callee = ast.unparse(node.func)
            first = node.args[0]
            if callee.endswith(("role_pass", "Role")):
                continue
            if isinstance(first, ast.Constant) and first.value in PASS_NAMES:
                found.append((node.lineno, f"{callee}({first.value!r})"))
        elif isinstance(node, ast.Subscript) and any(t in ast.unparse(node.value) for t in TABLES):
            key = node.slice
            if isinstance(key, ast.Constant) and key.value in PASS_NAMES:
                found.append((node.lineno, ast.unparse(node)))
    return found


@pytest.mark.parametrize("path", sorted((ROOT / "flow").rglob("*.py")), ids=lambda p: p.name)
def test_the_flow_layer_names_no_pass(path: Path) -> None:
    hits = pass_names_in(path.read_text(encoding="utf-8"))
    assert not hits, f"{path.relative_to(ROOT.parent)} names passes (ask for a role, perflow/flow/roles.py): {hits}"


def test_the_check_catches_a_named_pass() -> None:
    src = 'get_pass("report_page")(v)\nregistry._REGISTRY["findings"]\nrole_pass("findings")\nwrite(x, "findings")\n'
    assert sorted(line for line, _ in pass_names_in(src)) == [1, 2]


def test_perflows_library_fills_every_role() -> None:
    # from the pass index, importing no pass module (role_pass imports the one that fills the role)
    infos = registry.pass_infos()
    filled = {
        role: [n for n, i in infos.items() if i.role == role and i.module.startswith("perflow.passes.")]
        for role in ROLES
    }
    assert filled == {"page": ["report_page"], "findings": ["findings"], "fragment": ["output_html"]}


def _fragment(value: Any, *, name: str = "", max_rows: int = 20) -> str:
    return f"<p>mine: {name}</p>"


@pytest.fixture
def own_passes():  # type: ignore[no-untyped-def]
    """Register passes as a third-party library's (module ``pfx.passes``); removed afterwards."""
    added: list[str] = []

    def add(func: Any, name: str, role: str) -> None:
        func.__module__ = "pfx.passes"
        registry.register(registry.make_spec(func, name=name, role=role))
        added.append(name)

    yield add
    for name in added:
        registry._REGISTRY.pop(name, None)


def test_a_third_party_pass_replaces_the_built_in_one(own_passes) -> None:  # type: ignore[no-untyped-def]
    from perflow.flow.result import _inline

    own_passes(_fragment, "pfx_fragment", "fragment")
    assert registry.role_pass("fragment").name == "pfx_fragment"
    assert _inline(pd.DataFrame({"a": [1]}), "t") == "<p>mine: t</p>"  # the notebook display asks for the role


def test_two_third_party_passes_for_one_role_are_an_error(own_passes) -> None:  # type: ignore[no-untyped-def]
    def other(value: Any, *, name: str = "", max_rows: int = 20) -> str:
        return ""

    own_passes(_fragment, "pfx_fragment", "fragment")
    own_passes(other, "pfx_other", "fragment")
    with pytest.raises(PassError, match="role 'fragment' is claimed by several passes: pfx_fragment, pfx_other"):
        registry.role_pass("fragment")


def test_a_pass_that_does_not_fit_its_role_is_refused() -> None:
    def page(outputs: dict, steps: Any = None, *, title: str = "") -> str:
        return ""

    with pytest.raises(PassError, match=r"cannot fill the role 'page': its first inputs must be \(outputs, pag"):
        registry.make_spec(page, role="page")

    def frag(value: Any, *, name: str = "") -> str:
        return ""

    with pytest.raises(PassError, match="cannot fill the role 'fragment': it has no setting 'max_rows'"):
        registry.make_spec(frag, role="fragment")
    with pytest.raises(PassError, match="unknown role 'pages'"):
        registry.make_spec(frag, role="pages")
    with pytest.raises(PassError, match="unknown role 'pages'"):
        registry.role_pass("pages")
