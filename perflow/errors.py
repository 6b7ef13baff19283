"""The perflow exception hierarchy.

Every error perflow raises on purpose derives from :class:`PerflowError`, so a
caller can catch everything perflow-specific with one ``except`` clause. Each
message says what was wrong and where: the file (and offset or line), the
vertex, the flow step or the pass.

::

    PerflowError
    ├── FormatError          a file cannot be read: wrong format, truncated, corrupt
    ├── PAGError             an operation on a PAG is invalid (unknown metric, vertex, ...)
    │   └── MetricError      a metric name or expression is invalid
    ├── TraceError           event data is inconsistent (unmatched enter/leave, ...)
    ├── FlowError            a flow definition is invalid or a flow failed
    │   ├── ValidationError  the flow failed validation (carries every problem found)
    │   │   └── ExpressionError  a metric expression or call-path query is invalid (also a MetricError)
    │   └── StepError        one step failed while running (its exception is the cause)
    ├── PassError            a pass was misused: unknown pass, bad setting, bad input
    ├── RecordError          ``perflow record`` could not build or run the collector
    ├── WriteRefused         a running flow tried to write outside the folders it was given
    └── CacheError           the cross-run cache folder cannot be trusted (its key is not yours)
"""

from __future__ import annotations

__all__ = [
    "PerflowError",
    "FormatError",
    "PAGError",
    "MetricError",
    "TraceError",
    "FlowError",
    "ValidationError",
    "ExpressionError",
    "StepError",
    "PassError",
    "RecordError",
    "WriteRefused",
    "CacheError",
]


class PerflowError(Exception):
    """Base class of every error perflow raises deliberately."""


class FormatError(PerflowError, ValueError):
    """A data file cannot be read.

    Parameters
    ----------
    path : str or os.PathLike
        The file (or directory) that could not be read.
    message : str
        What is wrong with it.
    where : str, optional
        A position inside the file (byte offset, line, record) when known.
    """

    def __init__(self, path: object, message: str, where: str | None = None) -> None:
        self.path = str(path)
        self.reason = message
        self.where = where
        loc = f"{self.path}" + (f" ({where})" if where else "")
        # printable whatever the file held: lone surrogates (undecodable bytes in a name) become escapes
        super().__init__(f"{loc}: {message}".encode("utf-8", "backslashreplace").decode("utf-8"))

    def __reduce__(self) -> tuple[type, tuple[str, str, str | None]]:
        # rebuilt from its parts (an engine's worker raises it, the client re-raises it)
        return (type(self), (self.path, self.reason, self.where))


class PAGError(PerflowError, ValueError):
    """An invalid operation on a PAG (unknown vertex, metric, process, ...)."""


class MetricError(PAGError, KeyError):
    """An unknown metric name or an invalid metric expression."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class TraceError(PerflowError, ValueError):
    """Event data that is inconsistent: unmatched enter/leave, bad nesting, ..."""


class FlowError(PerflowError):
    """A flow definition is invalid, or running it failed."""


class ValidationError(FlowError, ValueError):
    """A flow failed validation.

    Parameters
    ----------
    problems : list of str
        Every problem found; validation reports all of them together.
    source : str, optional
        The file the flow came from, if any.
    """

    def __init__(self, problems: list[str], source: str | None = None) -> None:
        self.problems = list(problems)
        self.source = source
        head = f"{source}: " if source else ""
        n = len(self.problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{head}flow is invalid ({n} problem{'s' if n != 1 else ''}):\n{lines}")


class ExpressionError(ValidationError, MetricError):
    """A metric expression or call-path query that cannot be parsed or evaluated.

    Also a :class:`MetricError` (so a :class:`PAGError`): callers of
    ``filter`` that catch those keep working.

    Parameters
    ----------
    text : str
        The whole expression or query.
    message : str
        What is wrong.
    offset : int
        0-based position of the offending part in ``text``.
    what : str
        ``"expression"`` or ``"query"``, for the message.

    Attributes
    ----------
    line, column : int
        1-based line and column of the offending part.
    """

    def __init__(self, text: str, message: str, offset: int = 0, what: str = "expression") -> None:
        self.text, self.reason, self.what = text, message, what
        self.offset = max(0, min(int(offset), len(text)))
        start = text.rfind("\n", 0, self.offset) + 1
        self.line = text.count("\n", 0, self.offset) + 1
        self.column = self.offset - start + 1
        where = f"line {self.line}, column {self.column}" if "\n" in text else f"column {self.column}"
        end = text.find("\n", self.offset)
        src = text[start : len(text) if end < 0 else end]
        lo = max(0, self.column - 1 - 60)
        shown = ("..." if lo else "") + src[lo : lo + 120] + ("..." if len(src) > lo + 120 else "")
        caret = " " * (self.column - 1 - lo + (3 if lo else 0)) + "^"
        problem = f"{message} (at {where})"
        super().__init__([problem])
        head = f"invalid {what} {text!r}" if len(text) <= 80 and "\n" not in text else f"invalid {what}"
        self.args = (f"{head}: {problem}\n    {shown}\n    {caret}",)

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self) -> tuple[type, tuple[str, str, int, str]]:
        return (type(self), (self.text, self.reason, self.offset, self.what))


class StepError(FlowError):
    """A step of a flow raised an exception; the original is ``__cause__``."""

    def __init__(self, step: str, pass_name: str, error: BaseException) -> None:
        self.step = step
        self.pass_name = pass_name
        self.error = error
        super().__init__(f"step {step!r} (pass {pass_name!r}) failed: {type(error).__name__}: {error}")


class PassError(PerflowError, ValueError):
    """A pass was misused: unknown name, wrong setting type, missing input."""


class RecordError(PerflowError, RuntimeError):
    """The recorder could not build its library or run the program."""


class WriteRefused(PerflowError, PermissionError):
    """A running flow tried to write outside the folders it was given (see :mod:`perflow.flow.writes`)."""


class CacheError(PerflowError):
    """The cross-run cache folder cannot be trusted or used (see :mod:`perflow.flow.cache`)."""
