"""The tokenizer and parser of metric expressions (the grammar is in :mod:`perflow.pag.expr`)."""

from __future__ import annotations

from ..errors import ExpressionError
from .expr import (
    _COMPARISONS,
    _PY_KEYWORDS,
    AGGREGATIONS,
    FUNCTIONS,
    MAX_DEPTH,
    MAX_LENGTH,
    Agg,
    Binary,
    Bool,
    BoolOp,
    Call,
    Compare,
    Expr,
    ListLit,
    Name,
    Num,
    Str,
    Unary,
)
from .lexer import EXPR_NUMBER, Token, tokenize

__all__ = ["parse_expression"]


# ---------------------------------------------------------------------------------------------------------- tokens
_OPS = ("**", "//", "==", "!=", "<=", ">=", "<", ">", "+", "-", "*", "/", "%", "(", ")", "[", "]", ",", "&", "|", "~")
_SHIFTS = {"<<": "shift operators are not supported", ">>": "shift operators are not supported"}
_REFUSED = {
    "@": "local variables (@name) are not allowed",
    ".": "attribute access is not allowed",
    "=": "assignment is not allowed; compare with ==",
    ":": "':' (slices, lambdas, dictionaries) is not allowed",
    ";": "';' is not allowed: one expression only",
    "{": "sets and dictionaries are not allowed",
    "}": "sets and dictionaries are not allowed",
    "^": "'^' is not supported; use 'and', 'or', 'not'",
    "!": "'!' is not supported; use 'not'",
}


def _fail(text: str, message: str, pos: int) -> ExpressionError:
    return ExpressionError(text, message, pos)


def _tokens(text: str) -> list[Token]:
    return tokenize(
        text,
        ops=_OPS,
        number=EXPR_NUMBER,
        fail=lambda message, pos: _fail(text, message, pos),
        quoted_names=True,
        refused=_SHIFTS,
        defer=_REFUSED,
        strict_numbers=True,
    )


# ---------------------------------------------------------------------------------------------------------- parser
class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.i = 0
        self.depth = 0

    # helpers
    @property
    def tok(self) -> Token:
        t = self.toks[self.i]
        if t.kind == "bad":
            raise _fail(self.text, str(t.value), t.pos)
        return t

    def fail(self, message: str, pos: int | None = None) -> ExpressionError:
        return _fail(self.text, message, self.tok.pos if pos is None else pos)

    def at(self, *texts: str) -> bool:
        t = self.tok
        return t.kind in ("op", "name") and t.text in texts

    def take(self) -> Token:
        t = self.tok
        self.i += 1
        return t

    def expect(self, text: str, what: str) -> Token:
        if not self.at(text):
            got = "the end" if self.tok.kind == "end" else repr(self.tok.text)
            raise self.fail(f"expected {what}, found {got}")
        return self.take()

    def nest(self, pos: int) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.fail(f"expression is nested too deeply (more than {MAX_DEPTH} levels)", pos)

    # grammar
    def parse(self) -> Expr:
        if not self.text.strip():
            raise self.fail("empty expression", 0)
        node = self.or_expr()
        if self.tok.kind != "end":
            raise self.fail(self._unexpected())
        return node

    def _unexpected(self) -> str:
        t = self.tok
        if t.kind == "op" and t.text == "(":
            return "calls are only allowed on functions (" + ", ".join([*AGGREGATIONS, *FUNCTIONS]) + ")"
        if t.kind == "op" and t.text == "[":
            return "subscripts are not allowed"
        if t.kind == "name" and t.text in _PY_KEYWORDS | {"not"}:
            return f"{t.text!r} is not allowed here"
        return f"unexpected {t.text!r}"

    def _chain(self, ops: tuple[str, ...], name: str, sub: str) -> Expr:
        first = getattr(self, sub)()
        values, pos = [first], first.pos
        while self.at(*ops):
            self.take()
            values.append(getattr(self, sub)())
        return values[0] if len(values) == 1 else BoolOp(pos, name, tuple(values))

    def or_expr(self) -> Expr:
        return self._chain(("or", "|"), "or", "and_expr")

    def and_expr(self) -> Expr:
        return self._chain(("and", "&"), "and", "not_expr")

    def not_expr(self) -> Expr:
        if self.at("not"):
            t = self.take()
            self.nest(t.pos)
            node = Unary(t.pos, "not", self.not_expr())
            self.depth -= 1
            return node
        return self.comparison()

    def _comp_op(self) -> str | None:
        t = self.tok
        if t.kind == "op" and t.text in _COMPARISONS:
            return t.text
        if t.kind == "name" and t.text == "in":
            return "in"
        if (
            t.kind == "name"
            and t.text == "not"
            and self.toks[self.i + 1].text == "in"
            and self.toks[self.i + 1].kind == "name"
        ):
            return "not in"
        if t.kind == "name" and t.text == "is":
            raise self.fail("'is' is not supported; compare with == or !=")
        return None

    def comparison(self) -> Expr:
        first = self.arith()
        ops, operands, op_pos = [], [first], []
        while (op := self._comp_op()) is not None:
            op_pos.append(self.tok.pos)
            self.i += 2 if op == "not in" else 1
            ops.append(op)
            operands.append(self.arith())
        if not ops:
            return first
        return Compare(op_pos[0], tuple(ops), tuple(operands), tuple(op_pos))

    def _binary(self, ops: tuple[str, ...], sub: str) -> Expr:
        node = getattr(self, sub)()
        levels = 0
        while self.tok.kind == "op" and self.tok.text in ops:
            t = self.take()
            self.nest(t.pos)
            levels += 1
            node = Binary(t.pos, t.text, node, getattr(self, sub)())
        self.depth -= levels
        return node

    def arith(self) -> Expr:
        return self._binary(("+", "-"), "term")

    def term(self) -> Expr:
        return self._binary(("*", "/", "//", "%"), "factor")

    def factor(self) -> Expr:
        t = self.tok
        if t.kind == "op" and t.text in ("-", "+", "~"):
            self.take()
            self.nest(t.pos)
            node = Unary(t.pos, "not" if t.text == "~" else t.text, self.factor())
            self.depth -= 1
            return node
        return self.power()

    def power(self) -> Expr:
        base = self.primary()
        if self.at("**"):
            t = self.take()
            self.nest(t.pos)
            node = Binary(t.pos, "**", base, self.factor())
            self.depth -= 1
            return node
        return base

    def primary(self) -> Expr:
        node = self._atom()
        t = self.tok
        if t.kind == "op" and t.text in ("(", "["):
            raise self.fail(self._unexpected())
        return node

    def _name(self, t: Token) -> str:
        name = str(t.value)
        if name.startswith("__"):
            raise self.fail(f"names starting with '__' are not allowed ({name!r})", t.pos)
        return name

    def _atom(self) -> Expr:
        t = self.tok
        if t.kind == "num":
            self.take()
            return Num(t.pos, float(t.value))  # type: ignore[arg-type]
        if t.kind == "str":
            self.take()
            return Str(t.pos, str(t.value))
        if t.kind == "qname":
            self.take()
            return Name(t.pos, self._name(t))
        if t.kind == "op" and t.text == "(":
            self.take()
            self.nest(t.pos)
            node = self.or_expr()
            self.expect(")", "')'")
            self.depth -= 1
            return node
        if t.kind == "op" and t.text == "[":
            return self._list()
        if t.kind == "name":
            word = t.text
            if word in ("True", "False"):
                self.take()
                return Bool(t.pos, word == "True")
            if word in ("and", "or", "not", "in"):
                raise self.fail(
                    f"expected a value before {word!r}" if self.i else f"expression cannot start with {word!r}"
                )
            if word in _PY_KEYWORDS:
                raise self.fail(f"{word!r} is not allowed in expressions")
            self.take()
            if self.at("("):
                return self._call(t)
            return Name(t.pos, self._name(t))
        if t.kind == "end":
            raise self.fail("expression ends too early")
        raise self.fail(f"expected a value, found {t.text!r}")

    def _list(self) -> Expr:
        start = self.take()
        items: list[Expr] = []
        while not self.at("]"):
            t = self.tok
            neg = t.kind == "op" and t.text == "-"
            if neg:
                self.take()
                t = self.tok
            if t.kind == "num":
                items.append(Num(t.pos, -float(t.value) if neg else float(t.value)))  # type: ignore[arg-type]
            elif t.kind == "str" and not neg:
                items.append(Str(t.pos, str(t.value)))
            elif t.kind == "name" and t.text in ("True", "False") and not neg:
                items.append(Bool(t.pos, t.text == "True"))
            elif t.kind == "name" and (t.text == "for" or self.toks[self.i + 1].text == "for"):
                raise self.fail("comprehensions are not allowed")
            else:
                raise self.fail("lists may only hold numbers, strings, True and False")
            self.take()
            if self.at("for"):
                raise self.fail("comprehensions are not allowed")
            if not self.at("]"):
                self.expect(",", "',' or ']'")
        self.take()
        return ListLit(start.pos, tuple(items))

    def _call(self, fn: Token) -> Expr:
        name = fn.text
        self.take()  # "("
        if name in AGGREGATIONS:
            t = self.tok
            if t.kind not in ("name", "qname") or self.toks[self.i + 1].text != ")":
                raise self.fail(f"{name}() takes one metric name, e.g. {name}(time_exc)", t.pos)
            self.take()
            self.take()
            return Agg(fn.pos, name, self._name(t))
        if name not in FUNCTIONS:
            allowed = ", ".join([*AGGREGATIONS, *FUNCTIONS])
            raise self.fail(f"unknown function {name!r}; functions are {allowed}", fn.pos)
        self.nest(fn.pos)
        args: list[Expr] = []
        while not self.at(")"):
            args.append(self.or_expr())
            if not self.at(")"):
                self.expect(",", "',' or ')'")
        self.take()
        self.depth -= 1
        if len(args) != FUNCTIONS[name]:
            n = FUNCTIONS[name]
            raise self.fail(f"{name}() takes {n} argument{'s' if n > 1 else ''}, not {len(args)}", fn.pos)
        return Call(fn.pos, name, tuple(args))


def parse_expression(text: str) -> Expr:
    """The parser behind :func:`perflow.pag.expr.parse` (documented there)."""
    if not isinstance(text, str):
        raise TypeError(f"an expression must be a str, not {type(text).__name__}")
    if len(text) > MAX_LENGTH:
        raise _fail(text, f"expression is too long ({len(text)} characters; at most {MAX_LENGTH})", MAX_LENGTH)
    return _Parser(text).parse()
