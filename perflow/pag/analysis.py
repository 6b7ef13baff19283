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
several rounds of exchange between partitions is a ``program(executor,
handle, pag, settings)`` instead.

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
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import PerflowError
from .settings import NoSettings, Settings, SettingsError, settings_dict

if TYPE_CHECKING:  # pragma: no cover
    from .pag import PAG
    from .partitioned import Executor

__all__ = ["Analysis", "AnalysisManager", "Settings", "NoSettings", "SettingsError", "USES"]

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
        A multi-round partitioned form ``program(executor, handle, pag, settings)``.
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
        from .partitioned import PAGPartition

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
            from .partitioned import LOCAL

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
