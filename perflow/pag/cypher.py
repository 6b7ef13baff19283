"""The string dialect of call-path queries (Hatchet's Cypher-like syntax), parsed by hand.

::

    MATCH (".", p)->("*")->(2, q)
    WHERE p."name" STARTS WITH "MPI_" AND NOT p."time (inc)" < 0.5 OR q IS LEAF

Grammar (keywords in any case; Hatchet writes them in capitals)::

    full      := query | "{" query "}" (("AND" | "OR" | "XOR") "{" query "}")*
    query     := "MATCH" node ("->" node)* ["WHERE" where]
    node      := "(" quantifier ["," VAR] ")" | "(" VAR ")"        quantifier: ".", "*", "+" or a count
    where     := conds | "{" conds "}" (("AND" | "OR" | "XOR") "{" conds "}")*
    conds     := cond (("AND" | "OR") cond)*
    cond      := ["NOT"] single | "(" conds ")"                   (parentheses: perflow, one variable inside)
    single    := VAR "." PROP ("=" | "!=" | "<" | "<=" | ">" | ">=") (NUMBER | STRING)
               | VAR "." PROP ("STARTS WITH" | "ENDS WITH" | "CONTAINS" | "=~") STRING
               | VAR "." PROP "IS" ["NOT"] ("NAN" | "INF" | "NONE")
               | VAR "IS" ["NOT"] "LEAF"

As in Hatchet, the conditions are split by variable: each query node's
predicate joins its own conditions with the ``AND``/``OR`` written before each
(``AND`` binding tighter), so conditions on different variables always hold
together. Braces combine whole queries, or queries that share the ``MATCH``
clause, by intersection, union or symmetric difference, left to right.
Conditions become :mod:`perflow.pag.expr` nodes; nothing is evaluated here.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ExpressionError
from .expr import BoolOp, Check, Compare, Expr, Leaf, Name, Num, Reduce, Str, TextTest, Unary
from .lexer import QUERY_NUMBER, Token, tokenize
from .patterns import MAX_QUANTIFIER
from .query import QUANTIFIERS, CompoundQuery, Query, QueryNode

__all__ = ["parse_cypher", "MAX_QUERY_LENGTH"]

#: Longest query accepted, in characters.
MAX_QUERY_LENGTH = 20_000
#: Deepest nesting of parentheses (and NOT) in a WHERE clause.
MAX_NESTING = 64
_KEYWORDS = frozenset("MATCH WHERE AND OR XOR NOT IS STARTS ENDS WITH CONTAINS NAN INF NONE LEAF".split())
_OPS = ("->", "=~", "<=", ">=", "!=", "<>", "=", "<", ">", "(", ")", ",", ".", "{", "}")


def _starts_number(text: str, i: int, before: list[Token]) -> bool:
    c = text[i]
    after_name = bool(before) and before[-1].kind == "name"  # p.1 is a column number, not the number .1
    return c.isdigit() or (c == "." and not after_name) or c in "+-"


def _tokens(text: str) -> list[Token]:
    return tokenize(
        text,
        ops=_OPS,
        number=QUERY_NUMBER,
        fail=lambda message, pos: _err(text, message, pos),
        keywords=_KEYWORDS,
        starts_number=_starts_number,
    )


def _err(text: str, message: str, pos: int) -> ExpressionError:
    return ExpressionError(text, message, pos, "query")


@dataclass
class _Cond:
    var: str
    expr: Expr
    pos: int


class _Parser:
    def __init__(self, text: str) -> None:
        self.text, self.toks, self.i, self.depth = text, _tokens(text), 0, 0

    @property
    def tok(self) -> Token:
        return self.toks[self.i]

    def peek(self, k: int = 1) -> Token:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def fail(self, message: str, pos: int | None = None) -> ExpressionError:
        return _err(self.text, message, self.tok.pos if pos is None else pos)

    def is_(self, kind: str, *texts: str) -> bool:
        return self.tok.kind == kind and (not texts or self.tok.text in texts)

    def take(self) -> Token:
        t = self.tok
        self.i += 1
        return t

    def expect(self, kind: str, text: str | None, what: str) -> Token:
        if not self.is_(kind, *((text,) if text else ())):
            got = "the end of the query" if self.tok.kind == "end" else repr(self.tok.text)
            raise self.fail(f"expected {what}, found {got}")
        return self.take()

    # ---------------------------------------------------------------- top level
    def full(self) -> Query | CompoundQuery:
        if self.is_("op", "{") and self.peek().kind == "kw" and self.peek().text == "MATCH":
            out = self._braced(self._braced_query)
        else:
            out = self.query()
        if self.tok.kind != "end":
            raise self.fail(f"unexpected {self.tok.text!r} after the query")
        return out

    def _braced(self, item) -> Query | CompoundQuery:  # noqa: ANN001
        out = item()
        while self.is_("kw", "AND", "OR", "XOR") and self.peek().text == "{":
            op = self.take().text.lower()
            nxt = item()
            out = CompoundQuery(op, (out, nxt))
        return out

    def _braced_query(self) -> Query | CompoundQuery:
        self.expect("op", "{", "'{'")
        q = self.query()
        self.expect("op", "}", "'}'")
        return q

    def query(self) -> Query | CompoundQuery:
        self.expect("kw", "MATCH", "MATCH")
        nodes = self.path()
        if not self.is_("kw", "WHERE"):
            return self._build(nodes, [])
        self.take()
        if self.is_("op", "{"):
            return self._braced(lambda: self._build(nodes, self._braced_conds()))
        return self._build(nodes, self.conds())

    def _braced_conds(self) -> list[tuple[str | None, _Cond]]:
        self.expect("op", "{", "'{'")
        c = self.conds()
        self.expect("op", "}", "'}'")
        return c

    # ---------------------------------------------------------------- MATCH
    def path(self) -> list[tuple[str | int, str | None, int]]:
        nodes = [self.node()]
        while self.is_("op", "->"):
            self.take()
            nodes.append(self.node())
        seen: dict[str, int] = {}
        for _, var, pos in nodes:
            if var is not None and var in seen:
                raise self.fail(f"variable {var!r} names two query nodes", pos)
            if var is not None:
                seen[var] = pos
        return nodes

    def node(self) -> tuple[str | int, str | None, int]:
        start = self.expect("op", "(", "'(' starting a query node")
        quant: str | int = "."
        var = None
        if self.is_("name"):
            var = self.take().text
        else:
            t = self.tok
            if t.kind == "str" and t.value in QUANTIFIERS:
                quant = str(t.value)
            elif t.kind == "num" and float(t.value).is_integer() and float(t.value) >= 0 and t.text.isdigit():  # type: ignore[arg-type]
                if len(t.text) > 6 or int(t.text) > MAX_QUANTIFIER:
                    raise self.fail(f"a count quantifier is at most {MAX_QUANTIFIER} (deeper than any call path), "
                                    f"not {t.text}")  # fmt: skip
                quant = int(t.text) or "."  # Hatchet reads a count of 0 as "."
            else:
                raise self.fail("a query node is (quantifier), (quantifier, variable) or (variable); "
                                'quantifiers are ".", "*", "+" or a count')  # fmt: skip
            self.take()
            if self.is_("op", ","):
                self.take()
                var = self.expect("name", None, "a variable name").text
        self.expect("op", ")", "')'")
        return quant, var, start.pos

    # ---------------------------------------------------------------- WHERE
    def conds(self) -> list[tuple[str | None, _Cond]]:
        items: list[tuple[str | None, _Cond]] = [(None, self.cond())]
        while self.is_("kw", "AND", "OR") and self.peek().text != "{":
            conn = self.take().text.lower()
            items.append((conn, self.cond()))
        if self.is_("kw", "XOR") and self.peek().text != "{":
            raise self.fail("XOR combines {...} groups of conditions or whole {MATCH ...} queries")
        return items

    def cond(self) -> _Cond:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise self.fail(f"conditions are nested too deeply (more than {MAX_NESTING} levels)")
        try:
            return self._cond()
        finally:
            self.depth -= 1

    def _cond(self) -> _Cond:
        if self.is_("kw", "NOT"):
            t = self.take()
            c = self.cond()
            return _Cond(c.var, Unary(t.pos, "not", c.expr), t.pos)
        if self.is_("op", "("):
            t = self.take()
            inner = self.conds()
            self.expect("op", ")", "')'")
            names = {c.var for _, c in inner}
            if len(names) > 1:
                raise self.fail("conditions inside parentheses must all be on one variable", t.pos)
            return _Cond(inner[0][1].var, _combine([(k, c.expr) for k, c in inner]), t.pos)
        return self.single()

    def single(self) -> _Cond:
        v = self.expect("name", None, 'a condition such as p."name" = "main"')
        if self.is_("kw", "IS"):
            self.take()
            neg = self._not()
            self.expect("kw", "LEAF", "LEAF")
            node: Expr = Reduce(v.pos, "cond", Leaf(v.pos))
            return _Cond(v.text, Unary(v.pos, "not", node) if neg else node, v.pos)
        self.expect("op", ".", "'.' and a quoted attribute name")
        prop_pos = self.tok.pos
        col = Name(prop_pos, self.prop())
        t = self.tok
        if t.kind == "kw" and t.text == "IS":
            self.take()
            neg = self._not()
            what = self.expect("kw", None, "NAN, INF or NONE")
            if what.text not in ("NAN", "INF", "NONE"):
                raise self.fail("expected NAN, INF or NONE", what.pos)
            node = Reduce(t.pos, "cond", Check(t.pos, "is" + what.text.lower(), col))
            return _Cond(v.text, Unary(t.pos, "not", node) if neg else node, v.pos)
        if t.kind == "kw" and t.text in ("STARTS", "ENDS", "CONTAINS"):
            self.take()
            if t.text != "CONTAINS":
                self.expect("kw", "WITH", f"WITH after {t.text}")
            s = self.expect("str", None, "a quoted string")
            op = {"STARTS": "startswith", "ENDS": "endswith", "CONTAINS": "contains"}[t.text]
            return _Cond(v.text, Reduce(t.pos, "cond", TextTest(t.pos, op, col, str(s.value))), v.pos)
        if t.kind == "op" and t.text == "=~":
            self.take()
            s = self.expect("str", None, "a quoted regular expression")
            return _Cond(v.text, Reduce(t.pos, "cond", TextTest(t.pos, "match", col, str(s.value))), v.pos)
        if t.kind == "op" and t.text in ("=", "!=", "<>", "<", "<=", ">", ">="):
            self.take()
            op = {"=": "==", "<>": "!="}.get(t.text, t.text)
            val = self.tok
            if val.kind == "num":
                rhs: Expr = Num(val.pos, float(val.value))  # type: ignore[arg-type]
            elif val.kind == "str" and op in ("==", "!="):
                rhs = Str(val.pos, str(val.value))
            else:
                raise self.fail("expected a number" + (" or a quoted string" if op in ("==", "!=") else ""))
            self.take()
            if col.name == "depth" and op == "==" and isinstance(rhs, Num) and rhs.value == -1:
                atom: Expr = Leaf(t.pos)  # Hatchet: depth = -1 means a leaf
            else:
                atom = Compare(t.pos, (op,), (col, rhs), (t.pos,))
            return _Cond(v.text, Reduce(t.pos, "cond", atom), v.pos)
        raise self.fail("expected a comparison (=, <, <=, >, >=, =~, STARTS WITH, ENDS WITH, CONTAINS, IS ...)")

    def _not(self) -> bool:
        if self.is_("kw", "NOT"):
            self.take()
            return True
        return False

    def prop(self) -> str:
        t = self.tok
        if t.kind == "str":
            self.take()
            return str(t.value)
        if t.kind == "num" and t.text.isdigit():
            self.take()
            return t.text
        if t.kind == "op" and t.text == "(":
            self.take()
            parts = [self.expect("str", None, "a quoted column name")]
            while self.is_("op", ","):
                self.take()
                parts.append(self.expect("str", None, "a quoted column name"))
            self.expect("op", ")", "')'")
            if len(parts) > 1:
                raise self.fail(
                    "multi-level column names (Thicket's) are not supported: perflow's columns are flat", t.pos
                )
            return str(parts[0].value)
        raise self.fail('expected a quoted attribute name, e.g. p."name"')

    # ---------------------------------------------------------------- building
    def _build(self, nodes: list[tuple[str | int, str | None, int]], conds: list[tuple[str | None, _Cond]]) -> Query:
        by_var: dict[str, list[tuple[str | None, Expr]]] = {}
        declared = {var for _, var, _ in nodes if var is not None}
        for conn, c in conds:
            if c.var not in declared:
                known = ", ".join(sorted(declared)) or "none"
                raise _err(self.text, f"variable {c.var!r} is not in the MATCH clause (variables: {known})", c.pos)
            lst = by_var.setdefault(c.var, [])
            lst.append((None if not lst else conn, c.expr))
        out = []
        for quant, var, pos in nodes:
            items = by_var.get(var) if var is not None else None
            out.append(QueryNode(quant, _combine(items) if items else None, self.text, pos))
        return Query(tuple(out), self.text)


def _combine(items: list[tuple[str | None, Expr]]) -> Expr:
    """Join one variable's conditions with their connectors, AND binding tighter than OR."""
    groups: list[list[Expr]] = [[]]
    for conn, e in items:
        if conn == "or":
            groups.append([])
        groups[-1].append(e)
    ands = [g[0] if len(g) == 1 else BoolOp(g[0].pos, "and", tuple(g)) for g in groups]
    return ands[0] if len(ands) == 1 else BoolOp(ands[0].pos, "or", tuple(ands))


def parse_cypher(text: str) -> Query | CompoundQuery:
    """Parse a string-dialect query.

    Raises
    ------
    ExpressionError
        With the line and column of the problem.
    """
    if len(text) > MAX_QUERY_LENGTH:
        raise _err(text, f"query is too long ({len(text)} characters; at most {MAX_QUERY_LENGTH})", MAX_QUERY_LENGTH)
    if not text.strip():
        raise _err(text, "empty query", 0)
    return _Parser(text).full()
