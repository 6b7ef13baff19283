"""Vectorised evaluation of parsed expressions (:mod:`perflow.pag.expr`) over columns.

Values are numpy arrays (float64 or bool), :class:`Text` columns (codes into
distinct strings, so a text test costs one check per distinct value), Python
scalars, or tuples (list literals). Names resolve through a :class:`Columns`
source, which may return 1-d arrays (one value per row) or 2-d arrays (rows x
locations, for the query's ``any``/``all`` modes): numpy broadcasting does the
rest. Every type error names the offending part's column.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd

from ..errors import ExpressionError, MetricError, PAGError
from .expr import (
    FUNCTIONS,
    Agg,
    Binary,
    Bool,
    BoolOp,
    Call,
    Check,
    Compare,
    Expr,
    Leaf,
    ListLit,
    Name,
    Num,
    Reduce,
    Str,
    TextTest,
    Unary,
    parse,
)
from .patterns import compile_pattern

__all__ = ["Text", "Columns", "FrameColumns", "evaluate", "eval_mask", "text_of"]


@dataclass(frozen=True)
class Text:
    """A text column: ``codes`` (any shape, -1 for missing) into the distinct strings ``cats``."""

    codes: np.ndarray
    cats: np.ndarray

    def per_code(self, ok: np.ndarray, missing: bool = False) -> np.ndarray:
        """Spread a boolean per distinct string to the rows."""
        return np.r_[np.asarray(ok, dtype=bool), missing][self.codes]

    def values(self) -> np.ndarray:
        return np.r_[self.cats, np.array([""], dtype=object)][self.codes]


def text_of(values: Any) -> Text:
    """A :class:`Text` of a categorical or object column."""
    cat = values if isinstance(values, pd.Categorical) else pd.Categorical(np.asarray(values, dtype=object))
    cats = np.asarray(cat.categories.astype(str), dtype=object)
    return Text(np.asarray(cat.codes), cats)  # int8/int16 codes stay as they are


class Columns(Protocol):
    """Where an expression's names come from."""

    def column(self, name: str) -> np.ndarray | Text:
        """A column by name (raise :class:`MetricError` for an unknown one)."""

    def aggregate(self, func: str, name: str) -> np.ndarray:
        """A metric aggregated across processes (raise :class:`PAGError` where that does not apply)."""

    def leaf(self) -> np.ndarray:
        """True for rows without children."""

    def __len__(self) -> int: ...


class FrameColumns:
    """Columns of a lazily built DataFrame (parallel vertices and edges); no aggregations."""

    def __init__(self, frame: Callable[[], pd.DataFrame], n: int, *, what: str, no_agg: str) -> None:
        self._make, self._frame, self._n, self._what, self._no_agg = frame, None, n, what, no_agg

    def __len__(self) -> int:
        return self._n

    def column(self, name: str) -> np.ndarray | Text:
        if self._frame is None:
            self._frame = self._make()
        df = self._frame
        if name not in df.columns:
            raise MetricError(f"unknown {self._what} {name!r}; columns are {', '.join(map(str, df.columns))}")
        return column_values(df[name])

    def aggregate(self, func: str, name: str) -> np.ndarray:
        raise PAGError(self._no_agg)

    def leaf(self) -> np.ndarray:
        raise PAGError("IS LEAF applies to top-down vertices")


def column_values(s: pd.Series | np.ndarray | pd.Categorical) -> np.ndarray | Text:
    """A column as the evaluator's value: float64, bool or :class:`Text`."""
    dt = getattr(s, "dtype", None)
    if isinstance(dt, pd.CategoricalDtype) or isinstance(s, pd.Categorical):
        cat = s.array if isinstance(s, pd.Series) else s
        return Text(np.asarray(cat.codes), np.asarray(cat.categories.astype(str), dtype=object))
    arr = np.asarray(s)
    if arr.dtype == bool:
        return arr
    if arr.dtype.kind in "iuf":
        return arr.astype(np.float64, copy=False)
    return text_of(arr)


# ---------------------------------------------------------------------------------------------------------- evaluator
_ARITH: dict[str, Callable[[Any, Any], Any]] = {
    "+": np.add,
    "-": np.subtract,
    "*": np.multiply,
    "/": np.true_divide,
    "//": np.floor_divide,
    "%": np.remainder,
    "**": np.power,
}
_CMP: dict[str, Callable[[Any, Any], Any]] = {
    "==": np.equal,
    "!=": np.not_equal,
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
}
_FUNCS = {name: getattr(np, name if name != "abs" else "absolute") for name in FUNCTIONS}
_TEST_NAMES = {"startswith": "STARTS WITH", "endswith": "ENDS WITH", "contains": "CONTAINS", "match": "=~"}
_TEXT_TESTS: dict[str, Callable[[str, str], bool]] = {
    "startswith": lambda s, p: s.startswith(p),
    "endswith": lambda s, p: s.endswith(p),
    "contains": lambda s, p: p in s,
}


def _kind(v: Any) -> str:
    if isinstance(v, Text | str):
        return "text"
    if isinstance(v, tuple):
        return "list"
    if isinstance(v, bool | np.bool_) or (isinstance(v, np.ndarray) and v.dtype == bool):
        return "bool"
    return "number"


class _Eval:
    def __init__(self, text: str, cols: Columns, what: str) -> None:
        self.text, self.cols, self.what = text, cols, what
        self.cache: dict[tuple[str, str], Any] = {}

    def fail(self, node: Expr | int, message: str) -> ExpressionError:
        pos = node if isinstance(node, int) else node.pos
        return ExpressionError(self.text, message, pos, self.what)

    def number(self, node: Expr, v: Any, role: str) -> Any:
        k = _kind(v)
        if k == "number":
            return v
        if k == "bool":
            return np.asarray(v, dtype=np.float64) if isinstance(v, np.ndarray) else float(v)
        raise self.fail(node, f"{role} needs numbers, not {k}")

    def boolean(self, node: Expr, v: Any, role: str) -> Any:
        if _kind(v) != "bool":
            raise self.fail(node, f"{role} needs true/false values, not {_kind(v)} (compare it, e.g. x > 0)")
        return v

    def run(self, node: Expr) -> Any:
        m = getattr(self, "e_" + type(node).__name__)
        return m(node)

    def e_Num(self, n: Num) -> float:
        return n.value

    def e_Str(self, n: Str) -> str:
        return n.value

    def e_Bool(self, n: Bool) -> bool:
        return n.value

    def e_ListLit(self, n: ListLit) -> tuple:
        return tuple(self.run(x) for x in n.items)

    def e_Name(self, n: Name) -> Any:
        key = ("", n.name)
        if key not in self.cache:
            try:
                self.cache[key] = self.cols.column(n.name)
            except PAGError as exc:
                raise self.fail(n, str(exc)) from None
        return self.cache[key]

    def e_Agg(self, n: Agg) -> Any:
        key = (n.func, n.name)
        if key not in self.cache:
            try:
                self.cache[key] = self.cols.aggregate(n.func, n.name)
            except PAGError as exc:
                raise self.fail(n, str(exc)) from None
        return self.cache[key]

    def e_Leaf(self, n: Leaf) -> Any:
        try:
            return self.cols.leaf()
        except PAGError as exc:
            raise self.fail(n, str(exc)) from None

    def e_Call(self, n: Call) -> Any:
        args = [self.number(a, self.run(a), f"{n.func}()") for a in n.args]
        with np.errstate(all="ignore"):
            return _FUNCS[n.func](*args)

    def e_Unary(self, n: Unary) -> Any:
        v = self.run(n.operand)
        if n.op == "not":
            v = self.boolean(n.operand, v, "'not'")
            return np.logical_not(v) if isinstance(v, np.ndarray) else not v
        v = self.number(n.operand, v, f"unary {n.op!r}")
        return -v if n.op == "-" else +v

    def e_Binary(self, n: Binary) -> Any:
        a = self.number(n.left, self.run(n.left), f"{n.op!r}")
        b = self.number(n.right, self.run(n.right), f"{n.op!r}")
        with np.errstate(all="ignore"):
            try:
                out = _ARITH[n.op](a, b)
            except (ZeroDivisionError, OverflowError):  # scalars: numpy's results instead
                out = _ARITH[n.op](np.float64(a), np.float64(b))
        return out

    def e_BoolOp(self, n: BoolOp) -> Any:
        fn = np.logical_and if n.op == "and" else np.logical_or
        out = self.boolean(n.values[0], self.run(n.values[0]), f"{n.op!r}")
        for x in n.values[1:]:
            out = fn(out, self.boolean(x, self.run(x), f"{n.op!r}"))
        return out

    def e_Compare(self, n: Compare) -> Any:
        vals = [self.run(x) for x in n.operands]
        pos = n.op_pos or (n.pos,) * len(n.ops)
        out: Any = True
        for i, op in enumerate(n.ops):
            r = self.compare(pos[i], op, vals[i], vals[i + 1])
            out = r if i == 0 else np.logical_and(out, r)
        return out

    def compare(self, pos: int, op: str, a: Any, b: Any) -> Any:
        ka, kb = _kind(a), _kind(b)
        if op in ("==", "!=") and kb == "list":
            op = "in" if op == "==" else "not in"
        if op in ("in", "not in"):
            if kb != "list":
                raise self.fail(pos, f"{op!r} needs a list on its right, e.g. name in ['MPI_Send', 'MPI_Recv']")
            r = self.isin(pos, a, b)
            return np.logical_not(r) if op == "not in" else r
        if ka == "list" or kb == "list":
            raise self.fail(pos, f"lists can only be used with 'in', 'not in', '==' and '!=', not {op!r}")
        if "text" in (ka, kb):
            if ka != kb:
                other = kb if ka == "text" else ka
                raise self.fail(pos, f"cannot compare text with {other}")
            if op not in ("==", "!=") and not (isinstance(a, str) and isinstance(b, str)):
                raise self.fail(pos, f"text can only be compared with == and != (not {op})")
            r = self.text_eq(a, b)
            return np.logical_not(r) if op == "!=" else r
        if "bool" in (ka, kb) and op not in ("==", "!="):
            a, b = self.number(pos, a, op), self.number(pos, b, op)  # type: ignore[arg-type]
        with np.errstate(invalid="ignore"):
            return _CMP[op](a, b)

    def text_eq(self, a: Any, b: Any) -> Any:
        if isinstance(a, str) and isinstance(b, str):
            return a == b
        if isinstance(b, Text) and isinstance(a, str):
            a, b = b, a
        if isinstance(b, str):
            return a.per_code(a.cats == b)
        return np.equal(a.values(), b.values())

    def isin(self, pos: int, a: Any, items: tuple) -> Any:
        ka = _kind(a)
        texts = [x for x in items if isinstance(x, str)]
        nums = [float(x) for x in items if not isinstance(x, str)]
        if ka == "text":
            if nums:
                raise self.fail(pos, "a text column can only be looked up in a list of strings")
            if isinstance(a, str):
                return a in texts
            return a.per_code(np.isin(a.cats, np.array(texts, dtype=object)))
        if ka == "list":
            raise self.fail(pos, "'in' needs a value on its left, not a list")
        if texts:
            raise self.fail(pos, f"a {ka} can only be looked up in a list of numbers")
        return np.isin(a, np.array(nums, dtype=np.float64)) if isinstance(a, np.ndarray) else float(a) in nums

    def e_TextTest(self, n: TextTest) -> Any:
        v = self.run(n.operand)
        if _kind(v) != "text":
            raise self.fail(
                n, f"{_TEST_NAMES.get(n.op, 'a regular expression')} needs a text attribute, not {_kind(v)}"
            )
        if n.op in _TEXT_TESTS:
            fn = _TEXT_TESTS[n.op]
            test: Callable[[str], bool] = lambda s: fn(s, n.pattern)  # noqa: E731
        else:
            try:
                rx = compile_pattern(n.pattern)  # linear time (RE2): a user's pattern cannot hang the query
            except PAGError as exc:
                raise self.fail(n, str(exc)) from None
            test = (
                (lambda s: rx.fullmatch(s) is not None) if n.op == "fullmatch" else (lambda s: rx.match(s) is not None)
            )
        if isinstance(v, str):
            return test(v)
        return v.per_code(np.fromiter((test(c) for c in v.cats), dtype=bool, count=len(v.cats)))

    def e_Check(self, n: Check) -> Any:
        v = self.run(n.operand)
        k = _kind(v)
        if k == "text":
            if n.op != "isnone":
                raise self.fail(n, f"IS {n.op[2:].upper()} needs a numeric attribute, not text")
            return v.per_code(v.cats == "", missing=True) if isinstance(v, Text) else v == ""
        v = self.number(n.operand, v, f"IS {n.op[2:].upper()}")
        return np.isinf(v) if n.op == "isinf" else np.isnan(v)

    def e_Reduce(self, n: Reduce) -> Any:
        v = self.boolean(n.operand, self.run(n.operand), n.op)
        if isinstance(v, np.ndarray) and v.ndim == 2:
            return v.any(axis=1, keepdims=True) if n.op == "any" else v.all(axis=1, keepdims=True)
        return v


def evaluate(node: Expr, cols: Columns, *, text: str = "", what: str = "expression") -> Any:
    """Evaluate a parsed expression over ``cols`` (a value: array, :class:`Text` or scalar)."""
    return _Eval(text, cols, what).run(node)


def eval_mask(expr: str | Expr, cols: Columns, *, text: str = "", what: str = "expression") -> np.ndarray:
    """A boolean mask, one value per row of ``cols``, of a true/false expression.

    Parameters
    ----------
    expr : str or Expr
        The expression (parsed with :func:`perflow.pag.expr.parse` when a string).
    cols : Columns
        Where names come from.

    Raises
    ------
    ExpressionError
        If the expression is not in the grammar, names an unknown column, mixes
        types, or does not give true/false per row.
    """
    if isinstance(expr, str):
        text = expr
        expr = parse(expr)
    res = evaluate(expr, cols, text=text, what=what)
    if _kind(res) != "bool":
        got = "text" if isinstance(res, Text) else f"{np.asarray(res).dtype} values"
        raise ExpressionError(text, f"the {what} does not give true/false per element (got {got})", 0, what)
    res = np.asarray(res, dtype=bool)
    if res.ndim == 2:
        if res.shape[1] != 1:
            raise ExpressionError(text, f"the {what} gives one value per location; wrap it in any/all", 0, what)
        res = res[:, 0]
    return np.broadcast_to(res, (len(cols),)).copy()
