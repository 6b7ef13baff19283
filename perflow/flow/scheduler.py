"""The scheduler: one loop that runs a plan's tasks in dependency order.

State is plain dicts and sets. A task becomes *ready* as soon as its last
input is available (there is no level-by-level barrier) and is handed to the
executor: a thread pool (most passes spend their time in numpy and pandas,
which release the GIL) or, with ``jobs=1`` (or whenever a task is the only one that can
run), a synchronous executor that runs it at once in the calling thread. Either way the result comes back through
the same queue and the same loop handles it:

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

from ..errors import PassError, StepError
from .cache import Cache, task_key
from .fingerprint import Unfingerprintable, digest_of, fingerprint
from .plan import Plan, Task
from .types import describe_value, shallow_check

__all__ = ["execute", "StepEvent", "STATUSES"]

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


class _Synchronous:
    """An executor that runs each task at once in the calling thread."""

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        fn(*args)

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        pass


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
            from .types import type_label

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
        self, plan: Plan, values: Mapping[str, Any], jobs: int, cache: Cache | None, hooks: Sequence[Any], keep: bool
    ) -> None:
        self.plan, self.values, self.jobs, self.cache, self.hooks, self.keep = plan, values, jobs, cache, hooks, keep
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
            if src[0] == "task":
                self.out_of.setdefault(src[1], []).append((name, src[2]))
            else:
                self.outputs[name] = self.value(src)

    # ---------------------------------------------------------------- helpers
    def value(self, src: tuple) -> Any:
        kind = src[0]
        if kind == "task":
            return self.data[src[1]][src[2]]
        if kind == "input":
            return self.values[src[1]]
        if kind == "list":
            return [self.value(s) for s in src[1]]
        if kind == "dict":
            return {k: self.value(s) for k, s in src[1]}
        return src[1]

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

        def input_fp(src: tuple) -> str | None:
            if src[0] == "task":
                k = self.keys.get(src[1])
                return None if k is None else f"task:{k}:{src[2]}"
            if src[0] in ("list", "dict"):
                items = src[1] if src[0] == "dict" else enumerate(src[1])
                parts = [(str(k), input_fp(s)) for k, s in items]
                if any(fp is None for _, fp in parts):
                    return None
                return digest_of(src[0], *(f"{k}={fp}" for k, fp in parts))
            name = f"{src[0]}:{src[1]!r}" if src[0] == "input" else None
            if name is not None and name in fps:
                return fps[name]
            try:
                fp = self.fp(self.value(src))
            except Unfingerprintable as exc:
                log.info("not caching steps that read %s: %s", src[1] if src[0] == "input" else "a default", exc)
                fp = None
            if name is not None:
                fps[name] = fp
            return fp

        for i in self.active:
            t = self.tasks[i]
            self.keys[i] = None
            if not _cacheable(t):
                continue
            ins = {n: input_fp(s) for n, s in t.args}
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
            k = self.keys.get(s[1]) if s[0] == "task" else None
            ins[n] = f"task:{k}:{s[2]}" if k else self.fp(v)
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
        tasks = self.tasks
        consumers: dict[int, list[int]] = {i: [] for i in self.active}
        for i in self.active:
            for d in sorted(tasks[i].deps):
                consumers[d].append(i)
        needed = set(self.active)
        if self.cache is not None:
            self.static_keys()
            # whole entries only: a damaged one is dropped now and computed, not found missing when loaded
            hit = {i for i in self.active if self.keys[i] is not None and self.cache.check(self.keys[i])}
            needed = set()
            for i in reversed(self.active):
                t = tasks[i]
                if (
                    self.keep
                    or not _cacheable(t)
                    or i in self.out_of
                    or any(c in needed and c not in hit for c in consumers[i])
                ):
                    needed.add(i)
            self.load = hit & needed
            for i in self.active:
                if i not in needed:
                    self.status[i] = "unneeded"
        run_set = [i for i in self.active if i in needed]
        waits = {i: (set() if i in self.load else set(tasks[i].deps)) for i in run_set}
        consumers = {i: [c for c in consumers[i] if c in needed and c not in self.load] for i in run_set}
        refs = {i: len(consumers[i]) for i in run_set}
        self.number = {i: n + 1 for n, i in enumerate(run_set)}
        ready = [i for i in run_set if not waits[i]]
        heapq.heapify(ready)
        running = 0
        inline = _Synchronous()
        pool: Any = None
        try:
            while ready or running:
                while ready and running < self.jobs:
                    i = heapq.heappop(ready)
                    t = tasks[i]
                    args = [] if i in self.load else [self.value(s) for _, s in t.args]
                    self.hook("before_step", self.event(i))
                    running += 1
                    dynamic = self.cache is not None and _cacheable(t) and self.keys.get(i) is None
                    if self.jobs == 1 or (running == 1 and not ready):
                        # jobs=1, or the only task that can run now: nothing else could finish meanwhile, so
                        # running it here costs no concurrency (and no thread hand-off)
                        inline.submit(self.work, i, args, self.keys.get(i), dynamic)
                    else:
                        if pool is None:
                            pool = ThreadPoolExecutor(self.jobs, thread_name_prefix="perflow")
                        # each step runs in a copy of this context (the current engine, ...)
                        pool.submit(contextvars.copy_context().run, self.work, i, args, self.keys.get(i), dynamic)
                    del args
                i, outs, err, status, key, start, end = self.q.get()
                running -= 1
                self.times[i] = (start, end)
                self.keys[i] = key
                if err is None:
                    self.status[i] = status
                    self.data[i] = outs
                    for name, out in self.out_of.get(i, ()):
                        self.outputs[name] = outs[out]
                    if self.keep:
                        self.kept[tasks[i].key] = outs
                    for c in consumers[i]:
                        waits[c].discard(i)
                        if not waits[c] and c not in self.status:
                            heapq.heappush(ready, c)
                else:
                    self.status[i] = "failed"
                    self.errors[i] = err
                    log.warning("%s", err)
                    self.skip_downstream(i, consumers, refs)
                del outs, err
                self.hook("after_step", self.event(i, self.status[i], end - start, self.errors.get(i)))
                if not refs.get(i):
                    self.data.pop(i, None)
                if i not in self.load:
                    for d in tasks[i].deps:
                        self.release(d, refs)
        finally:
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
        self.data.clear()

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
) -> _Run:
    """Run every task of ``plan`` with the flow input ``values``; return the finished run state."""
    from .. import progress

    r = _Run(plan, values, max(1, int(jobs)), cache, hooks, keep)
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
