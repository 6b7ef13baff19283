"""``perflow.run``: validate, plan and run a flow; return a :class:`FlowResult`."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, get_origin

import pandas as pd

from ..errors import ValidationError
from ..readers import read
from ..readers.runs import expand_runs, read_ensemble
from .cache import Cache
from .engine import current_engine, using
from .flow import MISSING, Flow
from .loader import load_flow
from .plan import FromTask, compile_flow, output_types, select_outputs
from .problems import did_you_mean
from .result import FlowResult
from .scheduler import execute
from .types import coerce_value, resolve_type, shallow_check, type_label
from .writes import write_policy

__all__ = ["run", "prepare_inputs"]


def _read_as(value: Any, tp: Any) -> Any:
    """Read a path given for a PAG, Ensemble or DataFrame input; a path or glob given for a list is its runs."""
    if tp is resolve_type("Ensemble") and isinstance(value, str | os.PathLike | list | tuple):
        return read_ensemble(list(value) if isinstance(value, tuple) else value)
    if not isinstance(value, str | os.PathLike):
        return value
    if get_origin(tp) is list or tp is list:
        return expand_runs(value)  # a directory stays one entry (of runs); a glob is its matches
    if tp is resolve_type("PAG"):
        return read(value, engine=current_engine())
    if tp is pd.DataFrame:
        p = Path(value)
        if p.suffix == ".csv":
            return pd.read_csv(p)
        if p.suffix in (".parquet", ".pq"):
            return pd.read_parquet(p)
    return value


def prepare_inputs(flow: Flow, given: Mapping[str, Any]) -> dict[str, Any]:
    """Check and convert the values given for a flow's inputs (defaults filled in).

    A path given for a ``PAG`` input is read with :func:`perflow.read`; a
    path, directory or glob given for an ``Ensemble`` input is read with
    :func:`perflow.readers.runs.read_ensemble`; a glob given for a ``list``
    input becomes the list of its matches (a plain path a one-entry list); a
    ``.csv`` or ``.parquet`` path given for a ``DataFrame`` input is read with
    pandas; strings become paths for ``path`` inputs.

    Raises
    ------
    ValidationError
        For unknown, missing or mistyped inputs (all of them together).
    """
    problems = []
    for name in given:
        if name not in flow.inputs:
            problems.append(
                f"flow {flow.name!r} has no input {name!r}{did_you_mean(name, flow.inputs)} "
                f"(inputs: {', '.join(flow.inputs) or 'none'})"
            )
    values: dict[str, Any] = {}
    for name, spec in flow.inputs.items():
        if name in given:
            v = coerce_value(_read_as(given[name], spec.type), spec.type)
        elif spec.default is not MISSING:
            v = coerce_value(spec.default, spec.type)
        else:
            problems.append(
                f"flow input {name!r} ({type_label(spec.type)}) is required" + (f": {spec.doc}" if spec.doc else "")
            )
            continue
        if not shallow_check(v, spec.type):
            hint = ""
            if type(v).__name__ == "Ensemble":
                hint = (
                    f" ({given.get(name)!s} holds {len(v)} runs, read as an ensemble: pass one run, or run a flow "
                    "that takes several, such as 'ensemble' or 'scalability')"
                )
            problems.append(f"flow input {name!r} expects {type_label(spec.type)}, got {type(v).__name__}{hint}")
        values[name] = v
    if problems:
        raise ValidationError(problems, flow.source)
    return values


def run(
    flow: Flow | str | os.PathLike[str],
    inputs: Mapping[str, Any] | None = None,
    /,
    *,
    jobs: int | None = None,
    cache: Cache | str | os.PathLike[str] | None = None,
    hooks: Sequence[Any] = (),
    settings: Mapping[str, Any] | None = None,
    allow_import: bool = False,
    keep: bool = False,
    engine: Any = None,
    outputs: Sequence[str] | Callable[[dict[str, Any]], Sequence[str] | None] | None = None,
    output_dir: str | os.PathLike[str] | None = None,
    allow_write: Sequence[str | os.PathLike[str]] = (),
    **input_values: Any,
) -> FlowResult:
    """Run a flow and return its :class:`FlowResult`.

    Parameters
    ----------
    flow : Flow, str or path
        A flow, a flow file, or the name of a shipped flow.
    inputs : mapping, optional
        Flow input values by name (also accepted as keyword arguments; use
        the mapping for inputs whose names clash with this function's
        parameters).
    jobs : int, optional
        Steps that may run at the same time (threads); ``1`` runs them one
        after the other in this thread. Default: the number of CPUs.
    cache : path or Cache, optional
        A directory caching step results across runs (keyed by pass, pass
        version, settings and input content).
    hooks : sequence
        Objects with any of the methods ``on_start(plan)``,
        ``before_step(event)``, ``after_step(event)``, ``on_finish(result)``.
    settings : mapping, optional
        Setting overrides ``{"STEP.SETTING": value}``; a key without a step
        (``{"late_receiver": "blocking"}``) is a flow setting, for every step
        whose pass has it.
    allow_import : bool
        Allow the flow to import code (dotted pass paths, Python sub-flows).
    keep : bool
        Keep every step's outputs in ``result.intermediates`` (they are
        otherwise released once no later step needs them).
    engine : Engine, optional
        Where the flow reads and analyses its data (see
        :mod:`perflow.flow.engine`); default: this process.
    outputs : sequence of str, or callable, optional
        Compute only these flow outputs (and the steps they need; the other
        steps are ``unneeded``). A callable receives ``{output name: declared
        type}`` and returns the names (or None for all).
    output_dir : path, optional
        The run's output folder: the files steps write (``path`` settings)
        go there, relative to it. Without one, steps write no files (unless
        allowed below). See :mod:`perflow.flow.writes`.
    allow_write : sequence of paths
        Further folders steps may write into (absolute ``path`` settings).

    Returns
    -------
    FlowResult
        Failed steps do not raise here: check ``result.ok``, call
        ``result.raise_for_status()``, or read an output (which raises the
        failure of the step that should have made it).

    Raises
    ------
    ValidationError
        The flow or its inputs are invalid (nothing has run).
    """

    f = flow if isinstance(flow, Flow) else load_flow(flow, allow_import=allow_import, validate=False)
    if settings:
        f = f.with_settings(settings)
    plan = compile_flow(f, allow_import=allow_import)
    if outputs is not None:
        names = outputs(output_types(plan)) if callable(outputs) else list(outputs)
        if names is not None:
            plan = select_outputs(plan, list(names))
    store = cache if isinstance(cache, Cache) or cache is None else Cache(cache)
    if jobs is None:
        jobs = min(os.cpu_count() or 1, len(plan.tasks))
    with using(engine), write_policy(output_dir, allow_write):
        values = prepare_inputs(f, {**dict(inputs or {}), **input_values})
        r = execute(plan, values, jobs=jobs, cache=store, hooks=hooks, keep=keep)
    rows = []
    for t in plan.tasks:
        start, end = r.times.get(t.index, (float("nan"), float("nan")))
        err = r.errors.get(t.index)
        status = r.status.get(t.index, "skipped")
        if t.same_as is not None and r.status.get(t.same_as) in ("failed", "skipped"):
            status = "skipped"
        rows.append(
            {
                "step": t.key,
                "pass": t.pass_name,
                "status": status,
                "start": start,
                "seconds": end - start,
                "error": f"{type(err.error).__name__}: {err.error}" if err is not None else None,
            }
        )
    out_steps = {
        name: (plan.tasks[src.task].key if isinstance(src, FromTask) else "") for name, src in plan.outputs.items()
    }
    errors = {plan.tasks[i].key: e for i, e in sorted(r.errors.items())}
    outputs = {name: r.outputs[name] for name in plan.outputs if name in r.outputs}  # in declared order
    result = FlowResult(f, outputs, rows, errors, out_steps, _elapsed(r), r.kept if keep else None)
    result.inputs = values  # the inputs as read (a trace's PAG for the HTML report's tree and timeline)
    r.hook("on_finish", result)
    return result


def _elapsed(r: Any) -> float:
    import time

    return time.perf_counter() - r.t0
