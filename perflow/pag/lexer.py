"""The one tokenizer of perflow's small languages: metric expressions and call-path queries.

Both grammars (:mod:`perflow.pag.expr_parse`, :mod:`perflow.pag.cypher`) read
their text with :func:`tokenize`, so whitespace, names, strings and their
escapes, operators and error positions follow one set of rules:

* **names** ``[A-Za-z_][A-Za-z0-9_]*`` are ``name`` tokens, or ``kw`` tokens
  (upper-cased) when the grammar lists them as keywords (any case);
* **strings** are quoted with ``'`` or ``"``; a backslash escapes
  ``\\n`` (newline), ``\\t`` (tab), ``\\\\``, ``\\'`` and ``\\"``, and any other
  backslash stays as written (so the regular expression ``"\\d+"`` means
  what it says); an unterminated string is an error at its opening quote;
* **numbers** are read by the grammar's own rule (:data:`EXPR_NUMBER`:
  ``1_000``, ``2.5e-3``; :data:`QUERY_NUMBER`: signed, as Hatchet writes
  them), so that ``-`` stays an operator in expressions;
* **operators** are matched longest first from the grammar's list;
  ``refused`` sequences are errors right away, with their message; any
  other character is an error too, or, with ``defer=True``, a ``bad`` token
  the parser reports when it reaches it (so that earlier problems come
  first);
* optionally, **backquoted names** (`` `time (inc)` ``) are ``qname`` tokens.

Every token carries its position in the text, for error messages that point
at it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

__all__ = ["Token", "tokenize", "read_string", "EXPR_NUMBER", "QUERY_NUMBER", "NAME", "ESCAPES"]


@dataclass(frozen=True)
class Token:
    """One token: ``kind`` (name, kw, qname, str, num, op, bad, end), its text, position and value."""

    kind: str
    text: str
    pos: int
    value: object = None


#: names of both languages
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: numbers of metric expressions: digits with underscores, a fraction, an exponent (no sign: ``-`` is an operator)
EXPR_NUMBER = re.compile(r"(?:\d(?:_?\d)*(?:\.(?:\d(?:_?\d)*)?)?|\.\d(?:_?\d)*)(?:[eE][+-]?\d+)?")
#: numbers of call-path queries: optionally signed (the query language has no arithmetic)
QUERY_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
#: what a backslash in a string stands for (any other backslash is kept as written)
ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", "'": "'", '"': '"'}

Fail = Callable[[str, int], Exception]


def read_string(text: str, i: int, fail: Fail) -> tuple[str, int]:
    """The value of the string starting at its quote ``text[i]``, and the position after its closing quote."""
    q, j, n, buf = text[i], i + 1, len(text), []
    while j < n and text[j] != q:
        if text[j] == "\\" and j + 1 < n:
            buf.append(ESCAPES.get(text[j + 1], "\\" + text[j + 1]))
            j += 2
        else:
            buf.append(text[j])
            j += 1
    if j >= n:
        raise fail("unterminated string", i)
    return "".join(buf), j + 1


def tokenize(
    text: str,
    *,
    ops: tuple[str, ...],
    number: re.Pattern[str],
    fail: Fail,
    keywords: frozenset[str] = frozenset(),
    quoted_names: bool = False,
    refused: Mapping[str, str] | None = None,
    defer: Mapping[str, str] | None = None,
    starts_number: Callable[[str, int, list[Token]], bool] | None = None,
    strict_numbers: bool = False,
) -> list[Token]:
    """The tokens of ``text``, ending with an ``end`` token (see the module docstring).

    Parameters
    ----------
    ops : tuple of str
        Operators, longest first where one is a prefix of another.
    number : re.Pattern
        The grammar's number rule.
    fail : callable
        ``fail(message, position)`` makes the grammar's error.
    keywords : frozenset of str
        Upper-case keywords (matched in any case).
    quoted_names : bool
        Read `` `...` `` as ``qname`` tokens.
    refused : mapping, optional
        Character sequences that are errors at once, with their messages.
    defer : mapping, optional
        When given, an unknown character is a ``bad`` token whose value is
        its message (``defer.get(char)`` or "unexpected character").
    starts_number : callable, optional
        ``starts_number(text, i, tokens so far)``: whether a number may start
        at ``i`` (default: a digit, or a ``.`` before a digit).
    strict_numbers : bool
        A number followed by a letter, digit, ``_`` or ``.`` is an error (``1x``, ``1.2.3``).
    """
    out: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
            continue
        if c in "'\"":
            value, j = read_string(text, i, fail)
            out.append(Token("str", text[i:j], i, value))
            i = j
            continue
        if quoted_names and c == "`":
            j = text.find("`", i + 1)
            if j < 0:
                raise fail("unterminated `quoted name`", i)
            out.append(Token("qname", text[i : j + 1], i, text[i + 1 : j]))
            i = j + 1
            continue
        may = (
            starts_number(text, i, out)
            if starts_number is not None
            else c.isdigit() or (c == "." and i + 1 < n and text[i + 1].isdigit())
        )
        m = number.match(text, i) if may else None
        if m:
            end = m.end()
            if strict_numbers and end < n and (text[end].isalnum() or text[end] in "_."):
                raise fail(f"invalid number {text[i : end + 1]!r}", i)
            out.append(Token("num", m.group(), i, float(m.group().replace("_", ""))))
            i = end
            continue
        m = NAME.match(text, i)
        if m:
            word = m.group()
            up = word.upper()
            out.append(Token("kw", up, i) if up in keywords else Token("name", word, i, word))
            i = m.end()
            continue
        bad = next((r for r in refused or () if text.startswith(r, i)), None)
        if bad is not None:
            raise fail(refused[bad], i)  # type: ignore[index]
        op = next((o for o in ops if text.startswith(o, i)), None)
        if op is not None:
            out.append(Token("op", op, i))
            i += len(op)
            continue
        if defer is None:
            raise fail(f"unexpected character {c!r}", i)
        out.append(Token("bad", c, i, defer.get(c, f"unexpected character {c!r}")))
        i += 1
    out.append(Token("end", "", n))
    return out
