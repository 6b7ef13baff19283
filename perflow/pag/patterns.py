"""Bounded user patterns: regular expressions on a linear-time engine, and the caps of counts in queries.

Regular expressions come from users and from other people's flows (query
predicates ``name =~ "..."``, ``filter(regex=...)``, settings). Python's
``re`` backtracks: ``([^!]|\\w)*!`` on a 75-character kernel name without a
``!`` takes longer than the age of the universe. Every user pattern is
therefore compiled here, with RE2 (the ``google-re2`` package), whose
matching time is linear in the text. RE2 does not do what needs backtracking
(backreferences such as ``\\1``, lookahead ``(?=...)``/``(?!...)``,
lookbehind, possessive or atomic groups): such a pattern is refused with a
:class:`~perflow.errors.PAGError` saying so, never run on the backtracking
engine. Patterns are also bounded in size (:data:`MAX_PATTERN` characters,
repetition counts ``{n}`` at most :data:`MAX_REPEAT`, RE2's default) and in
the memory the compiled program may take.

:data:`MAX_QUANTIFIER` caps the count quantifiers of call-path queries
(``(3)``, ``[(1000, ...)]``): a count larger than any call path is deep is
refused at validation instead of expanding into a billion-element list.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Protocol

from ..errors import PAGError

__all__ = ["compile_pattern", "Pattern", "MAX_PATTERN", "MAX_REPEAT", "MAX_QUANTIFIER", "linear_engine"]

#: Longest regular expression accepted (characters).
MAX_PATTERN = 4096
#: Largest repetition count ``{n}`` / ``{n,m}`` accepted (RE2's own limit).
MAX_REPEAT = 1000
#: Largest count quantifier of a call-path query (deeper than any call path perflow builds).
MAX_QUANTIFIER = 10_000
#: Memory (bytes) a compiled pattern may take.
MAX_PROGRAM = 8 << 20

_BACKTRACKING = [
    (re.compile(r"\\[1-9]|\(\?P=\w+\)|\\g<"), "a backreference"),
    (re.compile(r"(?<!\\)\(\?<?[=!]"), "a lookahead or lookbehind"),
    (re.compile(r"(?<!\\)\(\?>|(?<!\\)[*+?}]\+"), "an atomic group or a possessive quantifier"),
]
_REPEAT = re.compile(r"(?<!\\)\{(\d+)(?:,(\d*))?\}")


class Pattern(Protocol):
    """What a compiled pattern offers (RE2's or ``re``'s)."""

    def search(self, s: str) -> Any: ...  # pragma: no cover
    def match(self, s: str) -> Any: ...  # pragma: no cover
    def fullmatch(self, s: str) -> Any: ...  # pragma: no cover


def linear_engine() -> bool:
    """Whether RE2 is installed (without it, patterns that could backtrack badly are refused)."""
    try:
        import re2  # noqa: F401
    except ImportError:  # pragma: no cover - google-re2 is a dependency
        return False
    return True


def compile_pattern(pattern: str, what: str = "regular expression") -> Pattern:
    """Compile a user's regular expression for linear-time matching; PAGError when it cannot be.

    ``what`` names the pattern in the error (``"regex setting of step 'f'"``).
    """
    if not isinstance(pattern, str):
        raise PAGError(f"{what}: a regular expression is text, not {type(pattern).__name__}")
    return _compile(pattern, what)


@lru_cache(maxsize=512)
def _compile(pattern: str, what: str) -> Pattern:
    if len(pattern) > MAX_PATTERN:
        raise PAGError(f"{what}: the pattern is {len(pattern)} characters long (at most {MAX_PATTERN})")
    for m in _REPEAT.finditer(pattern):
        n = max(int(m[1]), int(m[2]) if m[2] else 0)
        if n > MAX_REPEAT:
            raise PAGError(f"{what} {_short(pattern)}: repetition count {m[0]} exceeds {MAX_REPEAT}")
    for rx, name in _BACKTRACKING:
        hit = rx.search(pattern)
        if hit:
            raise PAGError(
                f"{what} {_short(pattern)}: {name} ({hit[0]!r}) needs a backtracking matcher, whose time can grow "
                "exponentially; perflow matches patterns in linear time (RE2): rewrite it without"
            )
    # Python's \Z (end of text) is RE2's \z; $ without (?m) means the same in RE2
    translated = re.sub(r"(?<!\\)((?:\\\\)*)\\Z", r"\1\\z", pattern)
    try:
        re.compile(pattern)  # the syntax errors users know, with their position
    except re.error as exc:
        raise PAGError(f"invalid {what} {_short(pattern)}: {exc}") from None
    try:
        import re2
    except ImportError:  # pragma: no cover - google-re2 is a dependency
        if _nested_quantifier(pattern):
            raise PAGError(
                f"{what} {_short(pattern)}: a repeated group that holds a repetition can take exponential time "
                "with Python's matcher; install google-re2 (pip install google-re2) or rewrite it"
            ) from None
        return re.compile(pattern)
    opts = re2.Options()
    opts.log_errors = False
    opts.max_mem = MAX_PROGRAM
    try:
        return re2.compile(translated, options=opts)
    except re2.error as exc:
        reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise PAGError(f"{what} {_short(pattern)}: not supported by the linear-time matcher ({reason})") from None


def _short(p: str) -> str:
    return repr(p) if len(p) <= 80 else repr(p[:77] + "...")


def _nested_quantifier(p: str) -> bool:  # pragma: no cover - only without RE2
    return re.search(r"\([^()]*[*+}][^()]*\)[*+{]", p) is not None
