"""One tokenizer for expressions and queries: the same strings, escapes and error positions in both grammars."""

from __future__ import annotations

import pytest

from perflow.errors import ExpressionError
from perflow.pag.cypher import parse_cypher
from perflow.pag.expr import Str, TextTest
from perflow.pag.expr_parse import parse_expression
from perflow.pag.lexer import EXPR_NUMBER, tokenize


def _strings(node: object) -> list[str]:
    """Every string literal and text pattern in an expression tree."""
    out = []
    if isinstance(node, Str):
        out.append(node.value)
    if isinstance(node, TextTest):
        out.append(node.pattern)
    for v in vars(node).values() if hasattr(node, "__dict__") else ():
        for x in v if isinstance(v, tuple) else (v,):
            if hasattr(x, "__dataclass_fields__"):
                out += _strings(x)
    return out


@pytest.mark.parametrize(
    ("written", "value"),
    [
        (r"a\"b", 'a"b'),  # an escaped quote
        (r"a\\b", "a\\b"),  # an escaped backslash
        (r"tab\there", "tab\there"),
        (r"\d+\.x", r"\d+\.x"),  # other backslashes stay as written: regular expressions mean what they say
    ],
)
def test_both_grammars_read_a_string_alike(written: str, value: str) -> None:
    expr = parse_expression(f'name == "{written}"')
    query = parse_cypher(f'MATCH (".", p) WHERE p."name" =~ "{written}"')
    assert _strings(expr) == [value]
    assert _strings(query.nodes[0].predicate) == [value]


def test_errors_point_at_the_same_place() -> None:
    for parse, text in ((parse_expression, 'name == "open'), (parse_cypher, 'MATCH (".", p) WHERE p."name" = "open')):
        with pytest.raises(ExpressionError, match="unterminated string") as err:
            parse(text)
        assert err.value.offset == text.index('"open')


def test_tokens_keep_positions() -> None:
    toks = tokenize("a  <= 1_0", ops=("<=",), number=EXPR_NUMBER, fail=lambda m, p: ValueError(m, p))
    assert [(t.kind, t.text, t.pos, t.value) for t in toks] == [
        ("name", "a", 0, "a"),
        ("op", "<=", 3, None),
        ("num", "1_0", 6, 10.0),
        ("end", "", 9, None),
    ]
