"""Behaviour shared by vertex and edge sets: ids, order, set algebra, display, filters.

A selection is an array of integer ids into one PAG table (vertex ids, metric
rows, edge rows) plus an order. Set algebra returns sets sorted by id; ``sort_by``
and ``top`` keep the order they compute.
"""

from __future__ import annotations

import fnmatch
import html
import re
from collections.abc import Iterable, Iterator
from typing import Any, Self

import numpy as np
import pandas as pd

from .._arrays import setdiff_sorted, unique
from ..errors import PAGError
from .patterns import compile_pattern

__all__ = ["Selection", "name_mask"]


def name_mask(names: pd.Series, name: str | Iterable[str] | None, regex: str | re.Pattern | None) -> np.ndarray:
    """Mask of ``names`` matching any glob in ``name`` and the regular expression ``regex``.

    Works on the categories of a categorical series, so the cost is one
    pattern match per distinct name.
    """
    cat = names if isinstance(names.dtype, pd.CategoricalDtype) else names.astype("category")
    cats = cat.cat.categories.astype(str)
    ok = np.ones(len(cats), dtype=bool)
    if name is not None:
        globs = [name] if isinstance(name, str) else list(name)
        pats = [re.compile(fnmatch.translate(g)) for g in globs]
        ok &= np.array([any(p.match(c) for p in pats) for c in cats], dtype=bool)
    if regex is not None:
        rx = regex if isinstance(regex, re.Pattern) else compile_pattern(regex, "regex")
        ok &= np.array([rx.search(c) is not None for c in cats], dtype=bool)
    codes = cat.cat.codes.to_numpy()
    return np.where(codes >= 0, np.r_[ok, False][codes], False)


class Selection:
    """Base of vertex and edge sets: an ordered array of ids into one PAG table."""

    _what = "items"

    def __init__(self, pag: Any, ids: np.ndarray, *, ordered: bool = False) -> None:
        ids = np.asarray(ids, dtype=np.int64)
        if not ordered and len(ids) > 1 and not np.all(ids[1:] > ids[:-1]):
            ids = unique(ids)
        ids.flags.writeable = False
        self._pag = pag
        self._ids = ids
        self._ordered = ordered

    # -------------------------------------------------------------- basics
    @property
    def pag(self) -> Any:
        """The PAG the set belongs to."""
        return self._pag

    @property
    def ids(self) -> np.ndarray:
        """The ids, in the set's order (read-only)."""
        return self._ids

    @property
    def ordered(self) -> bool:
        """Whether the ids are in a computed order (``sort_by``, ``top``) rather than sorted by id."""
        return self._ordered

    def __len__(self) -> int:
        return len(self._ids)

    def __bool__(self) -> bool:
        return len(self._ids) > 0

    def __contains__(self, item: object) -> bool:
        i = getattr(item, "id", item)
        return bool(np.isin(i, self._ids).any())

    def _make(self, ids: np.ndarray, ordered: bool = False) -> Self:
        return type(self)(self._pag, ids, ordered=ordered)

    def _check_same(self, other: object) -> Selection:
        if not isinstance(other, type(self)):
            raise PAGError(f"cannot combine a {type(self).__name__} with a {type(other).__name__}")
        if other._pag is not self._pag:
            raise PAGError(f"cannot combine {self._what} of two different PAGs")
        return other

    def __or__(self, other: Self) -> Self:
        return self._make(np.union1d(self._ids, self._check_same(other)._ids))

    def __and__(self, other: Self) -> Self:
        return self._make(np.intersect1d(self._ids, self._check_same(other)._ids))

    def __sub__(self, other: Self) -> Self:
        return self._make(setdiff_sorted(self._ids, self._check_same(other)._ids))

    def __xor__(self, other: Self) -> Self:
        return self._make(np.setxor1d(self._ids, self._check_same(other)._ids))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Selection) or type(other) is not type(self):
            return NotImplemented
        return other._pag is self._pag and np.array_equal(np.sort(self._ids), np.sort(other._ids))

    def __hash__(self) -> int:
        return hash((id(self._pag), np.sort(self._ids).tobytes()))

    def union(self, *others: Self) -> Self:
        """Union with any number of sets."""
        out = self
        for o in others:
            out = out | o
        return out

    def intersection(self, *others: Self) -> Self:
        """Intersection with any number of sets."""
        out = self
        for o in others:
            out = out & o
        return out

    def difference(self, *others: Self) -> Self:
        """Elements of this set that are in none of the others."""
        out = self
        for o in others:
            out = out - o
        return out

    def _select(self, mask: np.ndarray) -> Self:
        return self._make(self._ids[mask], ordered=self._ordered)

    def head(self, k: int) -> Self:
        """The first ``k`` elements in the set's order."""
        return self._make(self._ids[: max(int(k), 0)], ordered=True)

    # -------------------------------------------------------------- subclass hooks
    def to_frame(self, *args: Any, **kwargs: Any) -> pd.DataFrame:  # pragma: no cover - abstract
        raise NotImplementedError

    def _sort_values(self, metric: str, agg: str) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _default_metric(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    # -------------------------------------------------------------- ordering
    def sort_by(self, metric: str, agg: str = "sum", *, ascending: bool = False) -> Self:
        """Sort by a metric (aggregated with ``agg`` where that applies); largest first by default."""
        vals = self._sort_values(metric, agg)
        key = vals if ascending else -vals
        order = np.lexsort((self._ids, np.nan_to_num(key, nan=np.inf)))
        return self._make(self._ids[order], ordered=True)

    def top(self, k: int, by: str | None = None, agg: str = "sum") -> Self:
        """The ``k`` largest by a metric (default: the current order, or exclusive time)."""
        if by is None and self._ordered:
            return self.head(k)
        return self.sort_by(by or self._default_metric(), agg).head(k)

    # -------------------------------------------------------------- display
    def __iter__(self) -> Iterator[Any]:  # pragma: no cover - overridden
        return iter(self._ids.tolist())

    def __repr__(self) -> str:
        n = len(self)
        if n == 0:
            return f"<{type(self).__name__}: empty>"
        shown = self.to_frame().head(10)
        more = f"\n... {n - 10} more" if n > 10 else ""
        return f"<{type(self).__name__}: {n} {self._what}>\n{shown.to_string()}{more}"

    def _repr_html_(self) -> str:
        n = len(self)
        head = f"<b>{type(self).__name__}</b>: {n} {html.escape(self._what)}"
        if n == 0:
            return head
        more = f"<p>... {n - 20} more</p>" if n > 20 else ""
        return head + self.to_frame().head(20).to_html() + more
