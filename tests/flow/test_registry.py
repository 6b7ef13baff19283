"""Registry refinements: your passes take precedence over built-in ones of the same name."""

from __future__ import annotations

import pytest

from perflow.errors import PassError
from perflow.flow import registry
from perflow.flow.registry import all_passes, get_pass, make_spec, register


def test_own_pass_replaces_a_builtin_one_in_either_order(caplog):
    builtin = all_passes()["load"]
    try:

        def load(x: int) -> int:
            return x

        mine = make_spec(load, name="load")
        register(mine)
        assert get_pass("load") is mine
        assert "replaces the built-in pass perflow.passes.io.load" in caplog.text
        register(builtin)  # e.g. the pass library imported later
        assert get_pass("load") is mine
        assert "is hidden by your pass 'load'" in caplog.text
    finally:
        registry._REGISTRY["load"] = builtin


def test_two_own_passes_under_one_name_are_an_error():
    def one(x: int) -> int:
        return x

    def two(x: int) -> int:
        return x

    register(make_spec(one, name="t_clash"))
    register(make_spec(one, name="t_clash"))  # the same function again: fine
    with pytest.raises(PassError, match="pass name 't_clash' is already registered by tests.flow.test_registry"):
        register(make_spec(two, name="t_clash"))
