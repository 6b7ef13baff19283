"""Text for the terminal: control and bidirectional characters from data are shown escaped, never obeyed.

A vertex name comes from a trace someone else wrote: a CR, an ESC sequence
(an OSC window-title sequence, a cursor move), a NUL or U+202E RIGHT-TO-LEFT
OVERRIDE printed raw would rewrite what the terminal shows. :func:`printable`
replaces every C0/C1 control character but newline and tab, and every
bidirectional formatting character, with a backslash escape (``\\x1b``,
``\\u202e``); Markdown and HTML outputs escape on their own.
"""

from __future__ import annotations

import re
from typing import Any, TextIO

__all__ = ["printable", "EscapingStream"]

_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_UNSAFE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}]")


def _escape(m: re.Match[str]) -> str:
    c = m[0]
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"


def printable(text: str) -> str:
    """``text`` with control characters (but newline and tab) and bidi controls as backslash escapes."""
    return _UNSAFE.sub(_escape, text)


class EscapingStream:
    """A text stream that writes :func:`printable` text to the stream it wraps."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, s: str) -> int:
        self._stream.write(printable(s))
        return len(s)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
