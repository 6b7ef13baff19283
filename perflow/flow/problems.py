"""A problem found in a flow, with where it is (YAML path, line and column)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["Problem", "locate", "did_you_mean"]


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a flow.

    Attributes
    ----------
    path : str
        Where in the flow, as a YAML path: ``steps.hot.settings.k``,
        ``outputs.table``, ``inputs`` ("" for the whole flow).
    message : str
        What is wrong, naming the step, pass, input or setting.
    line, column : int or None
        1-based position in the YAML file (``None`` for flows built in Python).
    """

    path: str
    message: str
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        where = self.path
        if self.line is not None:
            pos = f"line {self.line}, column {self.column}"
            where = f"{where} ({pos})" if where else pos
        return f"{where}: {self.message}" if where else self.message


def locate(locations: Mapping[str, tuple[int, int]], path: str) -> tuple[int | None, int | None]:
    """Line and column of ``path``, or of its closest recorded parent."""
    p = path
    while p:
        if p in locations:
            return locations[p]
        cut = max(p.rfind("."), p.rfind("["))
        p = p[:cut] if cut > 0 else ""
    return locations.get("", (None, None))


def did_you_mean(name: str, choices: object) -> str:
    """``"; did you mean 'x'?"`` for the closest of ``choices``, or ``""``."""
    from difflib import get_close_matches

    close = get_close_matches(str(name), [str(c) for c in choices], n=1)  # type: ignore[attr-defined]
    return f"; did you mean {close[0]!r}?" if close else ""
