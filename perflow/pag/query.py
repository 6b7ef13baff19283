"""Call-path queries (Hatchet's query language) over a PAG's calling-context tree.

A query is a sequence of *query nodes*, each a quantifier and a predicate:
quantifier ``"."`` matches exactly one vertex, ``"*"`` zero or more, ``"+"``
one or more, an integer ``k`` exactly ``k``; the predicate says which vertices
a query node may match. The result is every vertex on a downward path that
matches the whole sequence (:mod:`perflow.pag.pathmatch` has the semantics).

Two dialects, as in Hatchet:

* the **object dialect**: a list whose items are a quantifier, a predicate, or
  a ``(quantifier, predicate)`` pair; a predicate is a dict of attribute ->
  value (a regular expression for text attributes; a number or a comparison
  string such as ``">= 1.0"`` for numeric ones; a list of values, all of which
  must hold), a perflow expression string (``"time_exc > 0.1"``), or a function
  taking one row per vertex (a DataFrame) and returning a boolean array;
* the **string dialect** (:mod:`perflow.pag.cypher`):
  ``MATCH (".", p)->("*") WHERE p."name" STARTS WITH "MPI_"``.

Every predicate becomes an expression of :mod:`perflow.pag.expr`, evaluated
over all vertices at once; nothing is passed to ``eval``. Metrics are
aggregated across locations with ``agg``; ``agg="any"`` or ``"all"`` instead
test each condition on every (process, thread) location and require one or
all of them (Hatchet's ``multi_index_mode``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ExpressionError, PAGError
from .columns import HATCHET_ALIASES, VertexColumns
from .expr import AGGREGATIONS, Bool, BoolOp, Check, Compare, Expr, Leaf, Name, Num, Reduce, TextTest, Unary, parse
from .expr_eval import Text, eval_mask
from .pathmatch import levels, match_paths
from .patterns import MAX_QUANTIFIER
from .sets import VertexSet

if TYPE_CHECKING:  # pragma: no cover
    from .pag import PAG
    from .sets import VertexSet

__all__ = ["QueryNode", "Query", "CompoundQuery", "parse_query", "query_mask", "query", "MODES"]

#: Values of ``agg`` besides the aggregations: test conditions per location, require any / all of them.
MODES = ("any", "all")
QUANTIFIERS = (".", "*", "+")
_CMP_TEXT = re.compile(r"\s*(<=|>=|==|!=|<>|<|>)\s*(.*?)\s*")


@dataclass(frozen=True)
class QueryNode:
    """One query node: a quantifier and a predicate (None: any vertex).

    ``text`` is the source that error messages quote (the query string, or the
    object-dialect item); ``pos`` is the node's offset in it.
    """

    quantifier: str | int
    predicate: Expr | Mapping[Any, Any] | Callable[..., Any] | str | None
    text: str = ""
    pos: int = 0


@dataclass(frozen=True)
class Query:
    """A sequence of query nodes (one dialect query)."""

    nodes: tuple[QueryNode, ...]
    text: str = ""


@dataclass(frozen=True)
class CompoundQuery:
    """Queries whose results are combined: ``"and"`` (intersection), ``"or"`` (union), ``"xor"``."""

    op: str
    parts: tuple[Query | CompoundQuery, ...]


# ---------------------------------------------------------------------------------------------------------- parsing
def _bad(text: str, message: str, pos: int = 0) -> ExpressionError:
    return ExpressionError(text, message, pos, "query")


def _quantifier(q: Any, text: str) -> str | int:
    if isinstance(q, bool) or not isinstance(q, str | int):
        raise _bad(text, f"a quantifier is '.', '*', '+' or a count, not {q!r}")
    if isinstance(q, int) and q < 0:
        raise _bad(text, f"a count quantifier must be >= 0, not {q}")
    if isinstance(q, int) and q > MAX_QUANTIFIER:
        raise _bad(text, f"a count quantifier is at most {MAX_QUANTIFIER} (deeper than any call path), not {q}")
    if isinstance(q, str) and q not in QUANTIFIERS:
        raise _bad(text, f"a quantifier is '.', '*', '+' or a count, not {q!r}")
    return q


def _object_query(items: Sequence[Any]) -> Query:
    nodes = []
    for i, item in enumerate(items):
        text = repr(item)
        if isinstance(item, list | tuple):  # a (quantifier, predicate) pair; YAML writes it as a list
            if len(item) != 2:
                raise _bad(text, f"query node {i}: a pair is (quantifier, predicate), not {len(item)} items")
            q, pred = item
        elif isinstance(item, str) and item not in QUANTIFIERS:
            q, pred = ".", item  # a perflow expression
        elif isinstance(item, str | int) and not isinstance(item, bool):
            q, pred = item, None
        elif isinstance(item, Mapping) or callable(item):
            q, pred = ".", item
        else:
            raise _bad(
                text,
                f"query node {i}: an item is a quantifier, a predicate (dict, expression string or function) "
                "or a (quantifier, predicate) pair",
            )
        if not (pred is None or isinstance(pred, Mapping | str) or callable(pred)):
            raise _bad(text, f"query node {i}: a predicate is a dict, an expression string or a function")
        if isinstance(pred, str):
            text, pred = pred, _parse_predicate(pred)
        nodes.append(QueryNode(_quantifier(q, text), pred, text, i))
    return Query(tuple(nodes), repr(list(items)))


def _parse_predicate(text: str) -> Expr:
    try:
        return parse(text)
    except ExpressionError as exc:
        raise ExpressionError(exc.text, exc.reason, exc.offset, "query") from None


def parse_query(q: Any) -> Query | CompoundQuery:
    """A query from either dialect (or an already parsed one).

    Parameters
    ----------
    q : str, list, Query or CompoundQuery
        A string-dialect query, an object-dialect list, or a parsed query.

    Raises
    ------
    ExpressionError
        For a malformed query, with the position of the problem.
    """
    if isinstance(q, Query | CompoundQuery):
        return q
    if isinstance(q, str):
        return cypher.parse_cypher(q)
    if isinstance(q, list | tuple):
        if not q:
            raise _bad("[]", "a query needs at least one query node")
        return _object_query(q)
    raise PAGError(f"a query is a string (string dialect) or a list (object dialect), not {type(q).__name__}")


# ---------------------------------------------------------------------------------------------------------- predicates
def with_mode(node: Expr, mode: str | None) -> Expr:
    """Resolve ``Reduce("cond", x)`` markers: ``any``/``all`` of ``x`` across locations, or ``x`` itself."""
    if isinstance(node, Reduce) and node.op == "cond":
        inner = with_mode(node.operand, mode)
        return Reduce(node.pos, mode, inner) if mode in MODES else inner
    changes = {}
    for f in fields(node):
        v = getattr(node, f.name)
        if isinstance(v, Expr):
            changes[f.name] = with_mode(v, mode)
        elif isinstance(v, tuple) and v and isinstance(v[0], Expr):
            changes[f.name] = tuple(with_mode(x, mode) for x in v)
    return replace(node, **changes) if changes else node


def _comparison(text: str, pos: int, name: str, value: str) -> Expr:
    m = _CMP_TEXT.fullmatch(value)
    num = None
    if m:
        try:
            num = float(m.group(2).removeprefix("np."))
        except ValueError:
            num = None
    if m is None or num is None:
        raise _bad(
            text, f"numeric attribute {name!r} needs a number or a comparison such as '>= 1.0', not {value!r}", pos
        )
    op = "!=" if m.group(1) == "<>" else m.group(1)
    col = Name(pos, name)
    if np.isnan(num) and op in ("==", "!="):
        isnan = Check(pos, "isnan", col)
        return isnan if op == "==" else Unary(pos, "not", isnan)
    return Compare(pos, (op,), (col, Num(pos, num)))


def dict_predicate(d: Mapping[Any, Any], text: str, cols: VertexColumns) -> Expr:
    """An object-dialect predicate (a dict) as an expression; the column types decide each test (as in Hatchet)."""
    parts: list[Expr] = []
    for key, value in d.items():
        name = key[0] if isinstance(key, tuple | list) and len(key) == 1 else key
        pos = max(text.find(repr(key)), 0)
        if not isinstance(name, str):
            raise _bad(text, f"attribute names are strings, not {key!r}", pos)
        try:
            col = cols.column(name)
        except PAGError as exc:
            raise _bad(text, str(exc), pos) from None
        values = list(value) if isinstance(value, list | tuple | set) else [value]
        for v in values:
            if isinstance(col, Text):
                if not isinstance(v, str):
                    raise _bad(text, f"text attribute {name!r} needs a regular expression, not {v!r}", pos)
                node: Expr = TextTest(pos, "match", Name(pos, name), v + r"\Z")
            elif isinstance(v, str):
                node = _comparison(text, pos, name, v)
            elif isinstance(v, int | float) and not isinstance(v, bool):
                node = (
                    Leaf(pos) if name == "depth" and v == -1 else Compare(pos, ("==",), (Name(pos, name), Num(pos, v)))
                )
            else:
                raise _bad(text, f"numeric attribute {name!r} needs a number or a comparison string, not {v!r}", pos)
            parts.append(Reduce(pos, "cond", node))
    if not parts:
        return Bool(0, True)
    return parts[0] if len(parts) == 1 else BoolOp(0, "and", tuple(parts))


def _frame_mask(pag: PAG, fn: Callable[..., Any], agg: str, text: str) -> np.ndarray:
    df = pag.metric_frame(agg="sum" if agg in MODES else agg)
    for c in ("file", "line", "module"):
        df[c] = pag.vertex_table[c]
    res = np.asarray(fn(df))
    if res.shape != (pag.n_vertices,) or res.dtype != bool:
        raise _bad(
            text,
            f"a predicate function must return one true/false per vertex ({pag.n_vertices}), got {res.dtype} {res.shape}",
        )
    return res


def _node_mask(pag: PAG, node: QueryNode, cols: VertexColumns, agg: str) -> np.ndarray:
    pred, mode = node.predicate, agg if agg in MODES else None
    if pred is None:
        return np.ones(pag.n_vertices, dtype=bool)
    if isinstance(pred, Expr):
        if mode and not _has_marker(pred):
            pred = Reduce(0, "cond", pred)  # an expression string of the object dialect: reduced as a whole
        return eval_mask(with_mode(pred, mode), cols, text=node.text, what="query")
    if isinstance(pred, Mapping):
        return eval_mask(with_mode(dict_predicate(pred, node.text, cols), mode), cols, text=node.text, what="query")
    return _frame_mask(pag, pred, agg, node.text)


def _has_marker(node: Expr) -> bool:
    if isinstance(node, Reduce):
        return True
    for f in fields(node):
        v = getattr(node, f.name)
        for x in v if isinstance(v, tuple) else (v,):
            if isinstance(x, Expr) and _has_marker(x):
                return True
    return False


def _expand(nodes: Sequence[QueryNode], masks: Sequence[np.ndarray]) -> list[tuple[str, np.ndarray]]:
    steps: list[tuple[str, np.ndarray]] = []
    for node, m in zip(nodes, masks):
        q = node.quantifier
        if q == "+":
            steps += [(".", m), ("*", m)]
        elif isinstance(q, int):
            steps += [(".", m)] * q
        else:
            steps.append((str(q), m))
    return steps


def query_mask(pag: PAG, q: Any, *, agg: str = "sum") -> np.ndarray:
    """Boolean mask over the vertices of ``pag`` matched by ``q`` (see :func:`query`)."""
    if agg not in AGGREGATIONS and agg not in MODES:
        raise PAGError(f"agg must be one of {', '.join((*AGGREGATIONS, *MODES))}, not {agg!r}")
    parsed = parse_query(q)
    cols = VertexColumns(pag, np.arange(pag.n_vertices), agg, aliases=HATCHET_ALIASES)
    tree = levels(pag.vertex_table["parent"].to_numpy(), pag.tree_index.depth)

    def run(x: Query | CompoundQuery) -> np.ndarray:
        if isinstance(x, CompoundQuery):
            out = run(x.parts[0])
            for p in x.parts[1:]:
                r = run(p)
                out = out & r if x.op == "and" else out | r if x.op == "or" else out ^ r
            return out
        steps = _expand(x.nodes, [_node_mask(pag, n, cols, agg) for n in x.nodes])
        if not steps:
            raise _bad(x.text, "the query has no query nodes (count quantifiers of 0 only)")
        return match_paths(tree, steps)

    return run(parsed)


def query(pag: PAG, q: Any, *, agg: str = "sum") -> VertexSet:
    """The vertices on call paths that match a query (Hatchet's call-path query language).

    Parameters
    ----------
    pag : PAG
    q : str or list
        A string-dialect query (``'MATCH (".", p)->("*") WHERE p."name" STARTS WITH "MPI_"'``)
        or an object-dialect list (``[(".", {"name": "MPI_.*"}), "*"]``); see
        ``docs/queries.md``.
    agg : str
        How metrics of several processes and threads are compared:
        aggregated with ``sum``, ``mean``, ``max``, ``min``, ``std``,
        ``median`` or ``count``, or ``any``/``all`` to require a condition on
        at least one / every location.

    Returns
    -------
    VertexSet

    Raises
    ------
    ExpressionError
        For a malformed query or predicate (with its position), an unknown
        attribute or metric, or a test that does not fit the attribute's type.
    """

    return VertexSet(pag, np.flatnonzero(query_mask(pag, q, agg=agg)))


# The Cypher parser builds on this module (imports it at its top): the module, not its
# names, is imported here, last, so that either can be imported first.
from . import cypher  # noqa: E402
