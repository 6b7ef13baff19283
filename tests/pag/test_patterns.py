"""Bounded user patterns (issue 25): regexes on a linear-time engine, capped quantifiers and repetition counts.

Before, ``([^!]|\\w)*!`` in a query or filter on a 75-character kernel name hung
(killed at 90 s) and a query quantifier of 1e9 allocated an 8 GB list.
"""

from __future__ import annotations

import time

import pandas as pd
import pytest

import perflow
from perflow.errors import PAGError, PerflowError
from perflow.pag.patterns import MAX_QUANTIFIER, compile_pattern, linear_engine

EVIL = r"([^!]|\w)*!"
KERNEL = "void stencil_kernel_" + "a" * 55  # 75 characters, no '!'


@pytest.fixture(scope="module")
def pag() -> perflow.PAG:
    lit = [{"name": "main", "metrics": {"time_exc": 1.0}, "children": [{"name": KERNEL, "metrics": {"time_exc": 2.0}}]}]
    from perflow.pag.literal import from_literal

    return from_literal(lit)


def test_re2_is_the_engine() -> None:
    assert linear_engine()
    assert type(compile_pattern("a+")).__module__.startswith("re2")


@pytest.mark.timeout(30)
def test_catastrophic_pattern_runs_in_linear_time(pag: perflow.PAG) -> None:
    t0 = time.process_time()
    assert len(pag.query(f'MATCH (".", p)->(".", k) WHERE k."name" =~ "{EVIL}"')) == 0
    assert len(pag.vertices.filter(regex=EVIL)) == 0
    assert len(pag.vertices.filter(regex=r"stencil_kernel_a+$")) == 1
    assert time.process_time() - t0 < 5


@pytest.mark.parametrize(
    ("pattern", "needle"),
    [
        (r"(a)\1", "a backreference"),
        (r"(?P<x>a)(?P=x)", "a backreference"),
        (r"foo(?=bar)", "a lookahead or lookbehind"),
        (r"(?<!x)y", "a lookahead or lookbehind"),
        (r"a{2000}", "repetition count {2000} exceeds 1000"),
        ("x" * 5000, "characters long"),
        ("(", "invalid regex"),
    ],
)
def test_refused_patterns(pag: perflow.PAG, pattern: str, needle: str) -> None:
    with pytest.raises(PAGError, match=__import__("re").escape(needle)):
        pag.vertices.filter(regex=pattern)


def test_python_anchors_keep_their_meaning(pag: perflow.PAG) -> None:
    assert len(pag.vertices.filter(regex=r"^main\Z")) == 1
    assert len(pag.query([(".", {"name": "ma"})])) == 0  # object dialect: the whole name
    assert len(pag.query([(".", {"name": "main"})])) == 1
    assert len(pag.vertices.filter(regex=r"C\+\+|\++")) == 0  # an escaped plus is not possessive


@pytest.mark.timeout(30)
@pytest.mark.parametrize("q", [[(1_000_000_000, {"name": ".*"})], "MATCH (1000000000)", "MATCH (10001)"])
def test_quantifier_cap(pag: perflow.PAG, q: object) -> None:
    with pytest.raises(PerflowError, match=f"count quantifier is at most {MAX_QUANTIFIER}"):
        pag.query(q)
    assert len(pag.query([(1, {"name": "main"}), (1, None)])) >= 1


def test_big_integer_in_yaml_is_a_problem_with_its_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from perflow.errors import ValidationError

    f = tmp_path / "flow.yaml"
    f.write_text("perflow: 1\nname: big\ninputs: {pag: PAG}\nsteps:\n  t:\n    pass: hotspot\n    inputs: {data: input:pag}\n"
                 "    settings: {k: " + "9" * 100_001 + "}\n")  # fmt: skip
    t0 = time.process_time()
    with pytest.raises(ValidationError, match=r"line 8.*integer of 100001 digits"):
        perflow.load_flow(f)
    assert time.process_time() - t0 < 5


def test_frame_of_names_is_categorical_safe() -> None:
    from perflow.pag.selection import name_mask

    s = pd.Series([KERNEL, "main", KERNEL], dtype="category")
    assert name_mask(s, None, EVIL).tolist() == [False, False, False]
