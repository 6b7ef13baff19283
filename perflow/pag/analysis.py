"""Analyses: declared once, computed lazily, cached by the PAG that owns them.

An :class:`Analysis` is a named computation over a PAG with typed
:class:`Settings`. It has a *local form* (``compute(pag, settings)``: the
whole PAG in this process) and may have a *partitioned form*, which an
engine uses to compute it where the data lives (see
:mod:`perflow.pag.partitioned`):

* ``partial(partition, settings)`` reduces one partition (a
  :class:`~perflow.pag.partitioned.Partition`: some processes' metric rows,
  messages and collectives) to a small partial result,
* ``combine(partials, settings)`` merges partials (associative),
* ``finish(pag, combined, settings)`` turns the merged partial into the
  result, on the client, with the PAG's vertex table at hand.

An analysis with a partitioned form and no ``compute`` is computed locally as
``finish(pag, combine([partial(whole PAG)]))``: the local form is the
one-partition run of the partitioned one. A partitioned form that needs
several rounds of exchange between partitions is a *program* instead:
``program(built, pag, settings)``, where ``built`` is the trace built on the
engine's runtime (:class:`perflow.trace.pipeline.Built`: ``built.runtime``
maps functions over the partitions, exchanges frames between them and
gathers results; ``built.tables``, ``built.messages`` ... are the
partitions' references). An engine runs it where the partitions live; the
local executor runs the local form ``compute`` (an analysis with a program
has one too).

Every analysis has one identity: its name. Analyses are registered when they
are made (:func:`register`, after LLVM's ``registerPass``): a second,
different analysis under a name in use is an error naming both definitions,
so two analyses can never share a cache entry. The same definition made
again (a reloaded module, a re-run notebook cell) replaces the first.
:func:`registered` lists them, :func:`analysis_named` finds one.

Every PAG owns an :class:`AnalysisManager` (``pag.analyses``), after LLVM's
analysis manager: one cache entry per analysis and settings, computed once
(threads asking at the same time wait for one computation) and kept as long
as the PAG lives. A PAG never changes, so nothing is ever invalidated;
derived PAGs (``with_metrics``) inherit the entries of analyses that do not
read the metrics. The manager hands the computation to the PAG's executor:
local, or an engine's (a Dask PAG runs partitioned forms on its workers).

>>> from perflow.pag.analysis import Analysis, Settings
>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class TopSettings(Settings):
...     k: int = 5
>>> TOP = Analysis("example.top", compute=lambda pag, s: pag.aggregate("time_exc").nlargest(s.k),
...                settings=TopSettings, uses=frozenset({"metrics"}))
>>> # pag.analyses.get(TOP, k=3)

Results are shared: callers must not modify them.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import PerflowError
from .partitioned import LOCAL, PAGPartition
from .settings import NoSettings, Settings, SettingsError, settings_dict

if TYPE_CHECKING:  # pragma: no cover
    from .pag import PAG
    from .partitioned import Executor

__all__ = [
    "Analysis",
    "AnalysisManager",
    "Settings",
    "NoSettings",
    "SettingsError",
    "USES",
    "register",
    "registered",
    "analysis_named",
]

log = logging.getLogger(__name__)

#: what an analysis may read of a PAG (used to decide what a derived PAG may inherit)
USES = frozenset({"vertices", "metrics", "trace"})


@dataclass(frozen=True, eq=False)
class Analysis:
    """A named, cached computation over a PAG (see the module docstring).

    Parameters
    ----------
    name : str
        Unique name, dotted by the module family (``"trace.wait_instances"``).
    compute : callable, optional
        The local form ``compute(pag, settings) -> result``.
    settings : type
        A :class:`Settings` subclass (default :class:`NoSettings`).
    partial, combine, finish : callable, optional
        The partitioned form (all three, or none).
    program : callable, optional
        A multi-round partitioned form ``program(built, pag, settings)`` (see the module docstring).
    uses : frozenset of {"vertices", "metrics", "trace"}
        What the analysis reads of the PAG.
    version : str
        Part of the cache key; bump it when results change.
    doc : str
        One line saying what the result is.
    """

    name: str
    compute: Callable[[Any, Any], Any] | None = None
    settings: type = NoSettings
    partial: Callable[[Any, Any], Any] | None = None
    combine: Callable[[list[Any], Any], Any] | None = None
    finish: Callable[[Any, Any, Any], Any] | None = None
    program: Callable[..., Any] | None = None
    uses: frozenset[str] = field(default=USES)
    version: str = "1"
    doc: str = ""
    #: where the analysis was defined (``file:line``, module), filled in when it is made
    defined_at: tuple[str, str] = field(default=("", ""), compare=False, repr=False)

    def __post_init__(self) -> None:
        form = (self.partial, self.combine, self.finish)
        if any(f is not None for f in form) and not all(f is not None for f in form):
            raise PerflowError(f"analysis {self.name!r}: a partitioned form needs partial, combine and finish")
        if self.compute is None and self.partial is None:
            raise PerflowError(f"analysis {self.name!r} has neither a local nor a partitioned form")
        if not self.uses <= USES:
            raise PerflowError(f"analysis {self.name!r}: uses must be a subset of {sorted(USES)}")
        if not (isinstance(self.settings, type) and issubclass(self.settings, Settings)):
            raise PerflowError(f"analysis {self.name!r}: settings must be a Settings subclass")
        if not isinstance(self.name, str) or not self.name:
            raise PerflowError(f"an analysis needs a non-empty name, not {self.name!r}")
        if self.defined_at == ("", ""):
            object.__setattr__(self, "defined_at", _caller())
        register(self)

    @property
    def partitioned(self) -> bool:
        """Whether the analysis has a partial/combine/finish form."""
        return self.partial is not None

    def make_settings(self, settings: Settings | None = None, owner: str | None = None, **values: Any) -> Settings:
        """Validated settings from a settings object and/or keyword values."""
        if settings is not None:
            if not isinstance(settings, self.settings):
                raise SettingsError(
                    f"{owner or self.name}: settings of type {type(settings).__name__}, "
                    f"expected {self.settings.__name__}"
                )
            return dataclasses.replace(settings, **values) if values else settings
        return self.settings.of(owner or self.name, **values)

    def run_local(self, pag: PAG, settings: Settings) -> Any:
        """The local form: ``compute``, or the one-partition run of the partitioned form."""
        if self.compute is not None:
            return self.compute(pag, settings)

        assert self.partial is not None and self.combine is not None and self.finish is not None
        part = self.partial(PAGPartition(pag), settings)
        return self.finish(pag, self.combine([part], settings), settings)

    def __hash__(self) -> int:
        return hash((self.name, self.version))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Analysis) and (self.name, self.version) == (other.name, other.version)

    def __repr__(self) -> str:
        form = "partitioned" if self.partitioned else ("program" if self.program else "local")
        return f"<Analysis {self.name} ({form})>"


def _caller() -> tuple[str, str]:
    """``(file:line, module)`` of the code that made an analysis (the first frame outside this machinery)."""
    f = sys._getframe(1)
    generated = Analysis.__init__.__code__  # the dataclass's __init__, which calls __post_init__
    while f is not None and (f.f_code.co_filename == __file__ or f.f_code is generated):
        f = f.f_back  # type: ignore[assignment]
    if f is None:  # pragma: no cover - always called from a frame outside this module
        return ("?", "?")
    return (f"{f.f_code.co_filename}:{f.f_lineno}", str(f.f_globals.get("__name__", "?")))


_REGISTRY: dict[str, Analysis] = {}
_REGISTRY_LOCK = threading.Lock()


def register(analysis: Analysis) -> Analysis:
    """Register ``analysis`` under its name (done when an :class:`Analysis` is made); return it.

    Registering the same object again is fine, and so is the same definition
    made again (same file and line: a reloaded module; or both made by the
    ``__main__`` module: a script or a notebook re-run), which replaces the
    first. Any other analysis under a name in use is refused.

    Raises
    ------
    PerflowError
        When another analysis has the name, naming both definitions.
    """
    with _REGISTRY_LOCK:
        old = _REGISTRY.get(analysis.name)
        if old is not None and old is not analysis:
            same = (
                old.defined_at[0] == analysis.defined_at[0] or old.defined_at[1] == analysis.defined_at[1] == "__main__"
            )
            if not same:
                raise PerflowError(
                    f"analysis {analysis.name!r} is defined twice: at {old.defined_at[0]} and at "
                    f"{analysis.defined_at[0]}; an analysis name must be unique (prefix it with your library's "
                    f"name, e.g. 'mylib.{analysis.name.rsplit('.', 1)[-1]}')"
                )
            log.debug("analysis %r defined again at %s: replaced", analysis.name, analysis.defined_at[0])
        _REGISTRY[analysis.name] = analysis
    return analysis


def registered() -> dict[str, Analysis]:
    """The registered analyses by name (those of the modules imported so far)."""
    with _REGISTRY_LOCK:
        return dict(sorted(_REGISTRY.items()))


def analysis_named(name: str) -> Analysis:
    """The registered analysis called ``name``.

    Raises
    ------
    PerflowError
        For an unknown name, with the closest registered one.
    """
    with _REGISTRY_LOCK:
        found = _REGISTRY.get(name)
        names = list(_REGISTRY)
    if found is None:
        from difflib import get_close_matches

        close = get_close_matches(name, names, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise PerflowError(f"no analysis named {name!r}{hint} (analyses are registered when their module is imported)")
    return found


class AnalysisManager:
    """The analyses of one PAG: computed on first request, then cached (see the module docstring)."""

    def __init__(self, pag: PAG, executor: Executor | None = None) -> None:
        self._pag = weakref.ref(pag)
        self._executor = executor
        self._store: dict[tuple[Analysis, Settings], Any] = {}
        self._locks: dict[tuple[Analysis, Settings], threading.Lock] = {}
        self._lock = threading.Lock()

    @property
    def executor(self) -> Executor:
        """Where analyses run (the local executor unless an engine gave the PAG its own)."""
        if self._executor is None:
            return LOCAL
        return self._executor

    def get(self, analysis: Analysis, settings: Settings | None = None, /, *, owner: str | None = None,
            **values: Any) -> Any:  # fmt: skip
        """The result of ``analysis`` with these settings (computed once).

        Parameters
        ----------
        analysis : Analysis
        settings : Settings, optional
            A settings object; keyword ``values`` build one (or override fields).
        owner : str, optional
            The pass asking, named in settings errors.
        """
        s = analysis.make_settings(settings, owner, **values)
        key = (analysis, s)
        with self._lock:
            if key in self._store:
                return self._store[key]
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key in self._store:
                return self._store[key]
            pag = self._pag()
            if pag is None:  # pragma: no cover - the PAG owns the manager
                raise PerflowError("the PAG of this analysis manager is gone")
            value = self.executor.run(analysis, pag, s)
            with self._lock:
                self._store[key] = value
        return value

    def cached(self, analysis: Analysis, settings: Settings | None = None, /, **values: Any) -> bool:
        """Whether the result is already computed (nothing is computed)."""
        return (analysis, analysis.make_settings(settings, **values)) in self._store

    def entries(self) -> list[tuple[str, Settings]]:
        """``(analysis name, settings)`` of every cached result."""
        with self._lock:
            return [(a.name, s) for a, s in self._store]

    def inherit(self, other: AnalysisManager, *, unchanged: frozenset[str]) -> None:
        """Take ``other``'s results of analyses that read only parts listed in ``unchanged``."""
        with other._lock:
            items = [(k, v) for k, v in other._store.items() if k[0].uses <= unchanged]
        with self._lock:
            for k, v in items:
                self._store.setdefault(k, v)

    def __repr__(self) -> str:
        return f"<AnalysisManager {len(self._store)} cached: {', '.join(sorted({a.name for a, _ in self._store}))}>"


__all__ += ["settings_dict"]
