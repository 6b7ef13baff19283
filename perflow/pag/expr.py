"""Safe metric and filter expressions: a small grammar, parsed by hand, never handed to ``eval``.

An expression such as ``"time_exc > 0.01 and max(time_exc) > 1.3 * mean(time_exc)"``
is tokenised and parsed here into a tree of the node classes below; the
evaluator (:mod:`perflow.pag.expr_eval`) walks that tree with numpy over whole
columns. Nothing else is accepted: attribute access, ``@`` locals, subscripts,
calls of functions outside :data:`AGGREGATIONS` and :data:`FUNCTIONS`,
``lambda`` and other Python keywords, names starting with ``__``, single
``=``, and expressions longer than :data:`MAX_LENGTH` characters or nested
deeper than :data:`MAX_DEPTH` are an :class:`~perflow.errors.ExpressionError`
naming the column of the offending part.

Grammar (lowest precedence first; ``&``/``|`` mean ``and``/``or`` with their
precedence, as in ``pandas.eval``)::

    expr       := and_expr (("or" | "|") and_expr)*
    and_expr   := not_expr (("and" | "&") not_expr)*
    not_expr   := "not" not_expr | comparison
    comparison := sum (("==" | "!=" | "<" | "<=" | ">" | ">=" | "in" | "not in") sum)*
    sum        := term (("+" | "-") term)*
    term       := factor (("*" | "/" | "//" | "%") factor)*
    factor     := ("-" | "+" | "~") factor | power
    power      := primary ("**" factor)?
    primary    := NUMBER | STRING | NAME | `quoted name` | True | False
                | "(" expr ")" | "[" literal ("," literal)* "]" | FUNCTION "(" args ")"
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "MAX_LENGTH",
    "MAX_DEPTH",
    "AGGREGATIONS",
    "FUNCTIONS",
    "Expr",
    "Num",
    "Str",
    "Bool",
    "Name",
    "ListLit",
    "Agg",
    "Call",
    "Unary",
    "Binary",
    "Compare",
    "BoolOp",
    "TextTest",
    "Check",
    "Leaf",
    "Reduce",
    "parse",
    "names_in",
]

#: Longest expression accepted, in characters.
MAX_LENGTH = 4000
#: Deepest nesting of operators and parentheses accepted.
MAX_DEPTH = 64
#: Aggregations across processes, written ``max(time_exc)``: one metric name as argument.
AGGREGATIONS = ("sum", "mean", "max", "min", "std", "median", "count")
#: Element-wise functions (those ``pandas.eval`` offers) and their number of arguments.
FUNCTIONS = {
    **{
        f: 1
        for f in (
            "abs sqrt exp expm1 log log10 log1p sin cos tan arcsin arccos arctan "
            "sinh cosh tanh arcsinh arccosh arctanh floor ceil"
        ).split()
    },
    "arctan2": 2,
}
_COMPARISONS = ("==", "!=", "<", "<=", ">", ">=", "in", "not in")
_PY_KEYWORDS = frozenset(
    "as assert async await break class continue def del elif else except finally for from global if import "
    "is lambda nonlocal pass raise return try while with yield None".split()
)


# ---------------------------------------------------------------------------------------------------------- nodes
@dataclass(frozen=True)
class Expr:
    """A node of a parsed expression; ``pos`` is its 0-based offset in the source text."""

    pos: int


@dataclass(frozen=True)
class Num(Expr):
    value: float


@dataclass(frozen=True)
class Str(Expr):
    value: str


@dataclass(frozen=True)
class Bool(Expr):
    value: bool


@dataclass(frozen=True)
class Name(Expr):
    """A column: a vertex attribute or a metric (aggregated, or per location)."""

    name: str


@dataclass(frozen=True)
class ListLit(Expr):
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class Agg(Expr):
    """``func(metric)``: the metric aggregated across processes with ``func``."""

    func: str
    name: str


@dataclass(frozen=True)
class Call(Expr):
    func: str
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class Unary(Expr):
    op: str  # "-", "+", "not"
    operand: Expr


@dataclass(frozen=True)
class Binary(Expr):
    op: str  # "+", "-", "*", "/", "//", "%", "**"
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Compare(Expr):
    """A comparison chain ``a < b <= c`` (each link is and-ed)."""

    ops: tuple[str, ...]
    operands: tuple[Expr, ...]
    op_pos: tuple[int, ...] = ()


@dataclass(frozen=True)
class BoolOp(Expr):
    op: str  # "and", "or"
    values: tuple[Expr, ...]


@dataclass(frozen=True)
class TextTest(Expr):
    """A test of a text column against ``pattern``: startswith, endswith, contains, match (regex at the start), fullmatch."""

    op: str
    operand: Expr
    pattern: str


@dataclass(frozen=True)
class Check(Expr):
    """``isnan``, ``isinf`` or ``isnone`` (missing: NaN, or empty text) of a column."""

    op: str
    operand: Expr


@dataclass(frozen=True)
class Leaf(Expr):
    """True for vertices without children."""


@dataclass(frozen=True)
class Reduce(Expr):
    """``any`` or ``all`` of a per-location boolean across locations (the query's multi-index modes)."""

    op: str
    operand: Expr


def names_in(node: Expr) -> set[str]:
    """The column names an expression reads (bare names and aggregated metrics)."""
    if isinstance(node, Name | Agg):
        return {node.name}
    out: set[str] = set()
    for v in vars(node).values():
        for x in v if isinstance(v, tuple) else (v,):
            if isinstance(x, Expr):
                out |= names_in(x)
    return out


def parse(text: str) -> Expr:
    """Parse an expression into a tree of :class:`Expr` nodes.

    Parameters
    ----------
    text : str
        The expression, e.g. ``"time_exc > 0.01 and name != 'MPI_Wait'"``.

    Returns
    -------
    Expr

    Raises
    ------
    ExpressionError
        For anything outside the grammar (see the module docstring), with the
        column of the offending part.
    """
    return expr_parse.parse_expression(text)


# The expression parser builds on this module (imports it at its top): the module, not its
# names, is imported here, last, so that either can be imported first.
from . import expr_parse  # noqa: E402
