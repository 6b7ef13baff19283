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
    │   └── StepError        one step failed while running (its exception is the cause)
    ├── PassError            a pass was misused: unknown pass, bad setting, bad input
    └── RecordError          ``perflow record`` could not build or run the collector
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
    "StepError",
    "PassError",
    "RecordError",
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
