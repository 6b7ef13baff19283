"""The scheduler: one loop that runs a plan's tasks in dependency order.

State is plain dicts and sets. A task becomes *ready* as soon as its last
input is available (there is no level-by-level barrier) and is handed to the
executor, which the caller may hand in as Dask's ``get_async`` takes
``submit``: ``execute(..., submit=fn)`` with ``fn(callable, *args)`` running
the call somewhere (by default, a pool of ``jobs`` threads: most passes spend
their time in numpy and pandas, which release the GIL). With ``jobs=1``, or
whenever a task is the only one that can run, it runs at once in the calling
thread. Either way the result comes back through the same queue and the same
loop handles it:

* its outputs are stored and every waiting consumer's count drops; consumers
  with nothing left to wait for become ready;
* an intermediate result is released as soon as the last consumer has run
  (flow outputs are kept in the result);
* a failure becomes a :class:`~perflow.errors.StepError` whose ``__cause__``
  is the original exception (with its traceback); every task downstream is
  *skipped*, independent branches still run.

With a cache (:mod:`perflow.flow.cache`) the keys of all tasks whose inputs
are known up front are computed first; a task whose key is cached is loaded
instead of run, and tasks only needed by cached tasks are not run at all.
"""

from __future__ import annotations

import contextvars
import heapq
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from .. import progress
from ..errors import PassError, StepError
from .cache import Cache, task_key
from .fingerprint import Unfingerprintable, fingerprint
from .plan import Const, FromInput, FromTask, Plan, Task
from .types import describe_value, shallow_check, type_label

__all__ = ["execute", "StepEvent", "STATUSES", "Submit"]

#: ``submit(fn, *args)``: run ``fn(*args)`` somewhere (a thread, a process pool's worker, ...); the return value
#: is not used (the task reports back on the run's queue)
Submit = Callable[..., Any]

log = logging.getLogger(__name__)

#: Task statuses in a result: ran, loaded from the cache, merged with an identical task, not needed
#: (all its consumers were cached), failed, skipped (downstream of a failure).
STATUSES = ("done", "cached", "shared", "unneeded", "failed", "skipped")


@dataclass(frozen=True)
class StepEvent:
    """What hooks receive before and after each step."""

    step: str
    pass_name: str
    number: int
    total: int
    status: str = "running"
    seconds: float = 0.0
    error: BaseException | None = None


def _call_pass(task: Task, args: list[Any], settings: Mapping[str, Any]) -> dict[str, Any]:
    spec = task.spec
    res = spec.func(*args, **settings)
    if spec.multi_output:
        if not isinstance(res, Mapping) or set(res) != set(task.outputs):
            got = sorted(res) if isinstance(res, Mapping) else type(res).__name__
            raise PassError(f"pass {spec.name!r} must return a dict with the keys {list(task.outputs)}, got {got}")
        outs = {k: res[k] for k in task.outputs}
    else:
        outs = {task.outputs[0]: res}
    for p in spec.outputs:
        if not shallow_check(outs[p.name], p.type):
            raise PassError(
                f"pass {spec.name!r} returned {type(outs[p.name]).__name__} for output {p.name!r}, "
                f"declared as {type_label(p.type)}"
            )
    return outs


def _cacheable(t: Task) -> bool:
    """Whether a task's result may come from the cache: its pass is cacheable and it writes no file.

    A step given a ``path`` setting writes a file (a report, a figure): loading its result from the
    cache would skip the write, so it always runs (its consumers are still keyed by content).
    """
    return t.spec.cacheable and not t.settings.get("path")


class _Run:
    def __init__(
        self,
        plan: Plan,
        values: Mapping[str, Any],
        jobs: int,
        cache: Cache | None,
        hooks: Sequence[Any],
        keep: bool,
        submit: Submit | None = None,
    ) -> None:
        self.plan, self.values, self.jobs, self.cache, self.hooks, self.keep = plan, values, jobs, cache, hooks, keep
        self._submit, self._pool = submit, None
        self.tasks = plan.tasks
        skip = getattr(plan, "skip", frozenset())  # tasks no selected output needs
        self.active = [t.index for t in self.tasks if t.same_as is None and t.index not in skip]
        self.status: dict[int, str] = {t.index: "shared" for t in self.tasks if t.same_as is not None}
        self.status.update(dict.fromkeys(skip, "unneeded"))
        self.times: dict[int, tuple[float, float]] = {}
        self.errors: dict[int, StepError] = {}
        self.data: dict[int, dict[str, Any]] = {}
        self.kept: dict[str, dict[str, Any]] = {}
        self.keys: dict[int, str | None] = {}
        self.load: set[int] = set()
        self.q: queue.SimpleQueue = queue.SimpleQueue()
        self.number: dict[int, int] = {}
        self.t0 = time.perf_counter()
        self.outputs: dict[str, Any] = {}
        self.out_of: dict[int, list[tuple[str, str]]] = {}
        for name, src in plan.outputs.items():
            if isinstance(src, FromTask):
                self.out_of.setdefault(src.task, []).append((name, src.output))
            else:
                self.outputs[name] = src.get(self)
        # the loop's state (see run)
        self.consumers: dict[int, list[int]] = {}
        self.waits: dict[int, set[int]] = {}
        self.refs: dict[int, int] = {}
        self.ready: list[int] = []
        self.running = 0

    def hook(self, method: str, *args: Any) -> None:
        for h in self.hooks:
            fn = getattr(h, method, None)
            if fn is None:
                continue
            try:
                fn(*args)
            except Exception:  # a broken progress display must not break the run
                log.exception("hook %s.%s failed", type(h).__name__, method)

    def event(
        self, i: int, status: str = "running", seconds: float = 0.0, error: BaseException | None = None
    ) -> StepEvent:
        t = self.tasks[i]
        return StepEvent(t.key, t.pass_name, self.number.get(i, 0), len(self.active), status, seconds, error)

    # ---------------------------------------------------------------- cache keys
    def fp(self, value: Any) -> str:
        """A value's fingerprint; input files' hashes are kept in the cache's signed store."""
        return fingerprint(value, store=self.cache.file_hashes if self.cache is not None else None)

    def static_keys(self) -> None:
        fps: dict[str, str | None] = {}

        def leaf(src: FromInput | Const) -> str | None:
            name = src.name if isinstance(src, FromInput) else None
            if name is not None and name in fps:
                return fps[name]
            try:
                fp = self.fp(src.get(self))
            except Unfingerprintable as exc:
                log.info("not caching steps that read %s: %s", name or "a default", exc)
                fp = None
            if name is not None:
                fps[name] = fp
            return fp

        for i in self.active:
            t = self.tasks[i]
            self.keys[i] = None
            if not _cacheable(t):
                continue
            ins = {n: s.key(self.keys.get, leaf) for n, s in t.args}
            if any(v is None for v in ins.values()):
                continue
            try:
                sets = {k: self.fp(v) for k, v in t.settings.items()}
            except Unfingerprintable:
                continue
            self.keys[i] = task_key(t.spec.name, t.spec.version, sets, ins, t.outputs)  # type: ignore[arg-type]

    def dynamic_key(self, t: Task, args: list[Any]) -> str | None:
        ins = {}
        for (n, s), v in zip(t.args, args):
            k = self.keys.get(s.task) if isinstance(s, FromTask) else None
            ins[n] = f"task:{k}:{s.output}" if k else self.fp(v)  # type: ignore[union-attr]
        return task_key(t.spec.name, t.spec.version, {k: self.fp(v) for k, v in t.settings.items()}, ins, t.outputs)

    # ---------------------------------------------------------------- worker side
    def work(self, i: int, args: list[Any], key: str | None, dynamic: bool) -> None:
        t = self.tasks[i]
        start = time.perf_counter() - self.t0
        outs, err, status = None, None, "done"
        try:
            if dynamic and self.cache is not None and _cacheable(t):
                try:
                    key = self.dynamic_key(t, args)
                except Unfingerprintable:
                    key = None
            if key is not None and self.cache is not None and (i in self.load or dynamic):
                outs = self.cache.get(key)
                if outs is not None:
                    status = "cached"
                elif i in self.load:
                    raise PassError("its cached result vanished or is unreadable (the entry was removed); run again")
            if outs is None:
                outs = _call_pass(t, args, t.settings)
                if key is not None and self.cache is not None:
                    self.cache.put(key, outs, info={"pass": t.spec.name, "version": t.spec.version, "step": t.key})
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt) and threading.current_thread() is threading.main_thread():
                raise  # Ctrl-C while a step runs in the calling thread stops the run
            # anything else (SystemExit raised by a pass too) fails the step: the loop must hear back
            # from every task it started
            err = StepError(t.key, t.spec.name, exc)
            err.__cause__ = exc
            desc = ", ".join(f"{n}={describe_value(v)}" for (n, _), v in zip(t.args, args))
            sets = ", ".join(f"{k}={v!r}" for k, v in t.settings.items())
            err.add_note(f"inputs: {desc or 'none'}; settings: {sets or 'none'}")
            outs = None
        del args
        self.q.put((i, outs, err, status, key, start, time.perf_counter() - self.t0))

    # ---------------------------------------------------------------- the loop
    def run(self) -> None:
        """Run the plan: what must run, then start ready tasks and handle finished ones until none is left."""
        self.prepare(self.needed())
        try:
            while self.ready or self.running:
                self.start_ready()
                self.finish(*self.q.get())
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
        self.data.clear()

    def needed(self) -> set[int]:
        """The tasks that must run or be loaded: all, or with a cache those not covered by cached results."""
        tasks = self.tasks
        self.consumers = {i: [] for i in self.active}
        for i in self.active:
            for d in sorted(tasks[i].deps):
                self.consumers[d].append(i)
        if self.cache is None:
            return set(self.active)
        self.static_keys()
        # whole entries only: a damaged one is dropped now and computed, not found missing when loaded
        hit = {i for i in self.active if self.keys[i] is not None and self.cache.check(self.keys[i])}
        needed: set[int] = set()
        for i in reversed(self.active):
            t = tasks[i]
            if (
                self.keep
                or not _cacheable(t)
                or i in self.out_of
                or any(c in needed and c not in hit for c in self.consumers[i])
            ):
                needed.add(i)
        self.load = hit & needed
        for i in self.active:
            if i not in needed:
                self.status[i] = "unneeded"
        return needed

    def prepare(self, needed: set[int]) -> None:
        """What each task waits for, who consumes it, how many consumers hold it; the first ready tasks."""
        run_set = [i for i in self.active if i in needed]
        self.waits = {i: (set() if i in self.load else set(self.tasks[i].deps)) for i in run_set}
        self.consumers = {i: [c for c in self.consumers[i] if c in needed and c not in self.load] for i in run_set}
        self.refs = {i: len(self.consumers[i]) for i in run_set}
        self.number = {i: n + 1 for n, i in enumerate(run_set)}
        self.ready = [i for i in run_set if not self.waits[i]]
        heapq.heapify(self.ready)

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        """Hand a task to the executor: the one handed in, else a pool of ``jobs`` threads (made on first use)."""
        if self._submit is not None:
            self._submit(fn, *args)
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.jobs, thread_name_prefix="perflow")
        self._pool.submit(fn, *args)

    def start_ready(self) -> None:
        """Start ready tasks, up to ``jobs`` at a time."""
        while self.ready and self.running < self.jobs:
            i = heapq.heappop(self.ready)
            t = self.tasks[i]
            args = [] if i in self.load else [s.get(self) for _, s in t.args]
            self.hook("before_step", self.event(i))
            self.running += 1
            dynamic = self.cache is not None and _cacheable(t) and self.keys.get(i) is None
            if self.jobs == 1 or (self.running == 1 and not self.ready):
                # jobs=1, or the only task that can run now: nothing else could finish meanwhile, so
                # running it here costs no concurrency (and no thread hand-off)
                self.work(i, args, self.keys.get(i), dynamic)
            else:  # each step runs in a copy of this context (the current engine, the write policy, ...)
                self.submit(contextvars.copy_context().run, self.work, i, args, self.keys.get(i), dynamic)
            del args

    def finish(
        self, i: int, outs: dict[str, Any] | None, err: StepError | None, status: str, key: str | None,
        start: float, end: float,
    ) -> None:  # fmt: skip
        """Handle a finished task: keep its outputs and wake its consumers, or skip them after a failure."""
        self.running -= 1
        self.times[i] = (start, end)
        self.keys[i] = key
        if err is None:
            assert outs is not None
            self.status[i] = status
            self.data[i] = outs
            for name, out in self.out_of.get(i, ()):
                self.outputs[name] = outs[out]
            if self.keep:
                self.kept[self.tasks[i].key] = outs
            for c in self.consumers[i]:
                self.waits[c].discard(i)
                if not self.waits[c] and c not in self.status:
                    heapq.heappush(self.ready, c)
        else:
            self.status[i] = "failed"
            self.errors[i] = err
            log.warning("%s", err)
            self.skip_downstream(i, self.consumers, self.refs)
        del outs, err
        self.hook("after_step", self.event(i, self.status[i], end - start, self.errors.get(i)))
        if not self.refs.get(i):
            self.data.pop(i, None)
        if i not in self.load:
            for d in self.tasks[i].deps:
                self.release(d, self.refs)

    def release(self, d: int, refs: dict[int, int]) -> None:
        if d in refs:
            refs[d] -= 1
            if refs[d] <= 0:
                self.data.pop(d, None)

    def skip_downstream(self, i: int, consumers: dict[int, list[int]], refs: dict[int, int]) -> None:
        stack = list(consumers[i])
        while stack:
            c = stack.pop()
            if c in self.status:
                continue
            self.status[c] = "skipped"
            for d in self.tasks[c].deps:  # a skipped task no longer holds its inputs
                self.release(d, refs)
            stack.extend(consumers[c])
            self.hook("after_step", self.event(c, "skipped"))


def execute(
    plan: Plan,
    values: Mapping[str, Any],
    *,
    jobs: int = 1,
    cache: Cache | None = None,
    hooks: Sequence[Any] = (),
    keep: bool = False,
    submit: Submit | None = None,
) -> _Run:
    """Run every task of ``plan`` with the flow input ``values``; return the finished run state.

    ``submit(fn, *args)`` runs a ready task elsewhere (see the module docstring); ``jobs`` tasks run at a time.
    """
    r = _Run(plan, values, max(1, int(jobs)), cache, hooks, keep, submit)
    r.hook("on_start", plan)
    with progress.task("running the flow", total=len(r.active), unit="step") as shown:
        r.hooks = [*r.hooks, _Shown(shown)]
        r.run()
    return r


class _Shown:
    """Steps on the progress display (perflow.progress; shown only when the command line enables it)."""

    def __init__(self, task: Any) -> None:
        self.task = task

    def before_step(self, ev: StepEvent) -> None:
        self.task.describe(f"step {ev.step} ({ev.pass_name})")

    def after_step(self, ev: StepEvent) -> None:
        self.task.advance()
