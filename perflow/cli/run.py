"""``perflow run FLOW``: run an analysis flow on performance data."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from ._term import printable

__all__ = ["register", "run", "parse_inputs", "parse_settings", "sort_steps", "shown_outputs", "Progress"]

log = logging.getLogger(__name__)


def register(sub: Any) -> None:
    """Add the ``run`` subcommand."""
    p = sub.add_parser(
        "run",
        help="run an analysis flow",
        description="Run FLOW (a YAML or Python flow file, or the name of a shipped flow: see `perflow flows`), "
        "write its outputs to --output and print its reports.",
    )
    from .completion import engine_names, flow_or_file

    p.add_argument("flow", metavar="FLOW", help="flow file or shipped flow name").completer = flow_or_file  # type: ignore[attr-defined]
    p.add_argument(
        "inputs",
        nargs="*",
        default=[],
        metavar="INPUT",
        help="flow inputs, as --input takes them: PATH for a flow with one input (perflow run root_cause "
        "run.rec), NAME=PATH otherwise; they may come before or after the options",
    )
    p.add_argument(
        "-i",
        "--input",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="a flow input (repeatable); a flow with one input also takes a bare PATH",
    )
    p.add_argument(
        "-s",
        "--set",
        action="append",
        default=[],
        metavar="[STEP.]SETTING=VALUE",
        help="change a setting (repeatable): SETTING=VALUE for every step that has it (a flow setting), "
        "STEP.SETTING=VALUE for one step; VALUE is read as a YAML scalar: 5, 0.5, true, text, [1, 2]",
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="DIR",
        help="write every output to DIR (CSV, JSON, PNG, MD, TXT, HTML, saved PAG) and DIR/index.html, "
        "a page with all of them",
    )
    p.add_argument(
        "--allow-write",
        action="append",
        default=[],
        metavar="DIR",
        help="let the flow's steps write files into DIR too (repeatable); by default they write only "
        "inside --output (see docs/security.md)",
    )
    p.add_argument(
        "--sort",
        metavar="COLUMN",
        help="rank the findings by COLUMN, e.g. gain (the predicted saving): sets the 'sort' setting of every "
        "step whose pass has one (root_cause, critical_path_imbalance)",
    )
    p.add_argument("-j", "--jobs", type=int, default=None, metavar="N", help="steps to run at once (default: CPUs)")
    p.add_argument("--cache", metavar="DIR", help="reuse step results cached in DIR across runs")
    p.add_argument(
        "--allow-import",
        action="store_true",
        help="let the flow import Python code it names (module:function passes, .py sub-flows)",
    )
    p.add_argument(
        "--progress",
        action="store_true",
        help="print a line per finished step on stderr (a terminal shows a progress display anyway)",
    )
    p.add_argument(
        "--engine",
        default="local",
        metavar="NAME",
        help="where traces are read and analysed: local (this process, the default) or an engine of the "
        "perflow.engines entry points, e.g. dask (a Dask cluster; pip install 'perflow[dask]')",
    ).completer = engine_names  # type: ignore[attr-defined]
    p.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="with --engine dask: a running Dask scheduler (tcp://host:8786 or a scheduler file); "
        "default: a local cluster",
    )
    p.add_argument("--workers", type=int, metavar="N", help="with --engine dask: workers of the local cluster")
    p.set_defaults(func=run, extra_inputs=True)


def _yaml_scalar(text: str) -> Any:
    import yaml

    try:
        return yaml.safe_load(text) if text.strip() else ""
    except yaml.YAMLError:
        return text


def parse_inputs(flow: Any, items: list[str]) -> dict[str, Any]:
    """``NAME=VALUE`` (or a bare value for a flow with one input) -> {name: value}.

    A list input may be given several times (``--input runs=a.cali --input runs=b.cali``); a directory or
    a glob given for it (``--input runs=DIR``, ``--input 'runs=DIR/*.cali'``) is expanded when the flow runs.
    """
    from ..errors import ValidationError
    from ..flow.flow import NAME_RE

    out: dict[str, Any] = {}
    for item in items:
        name, eq, value = item.partition("=")
        if eq and NAME_RE.match(name) and (name in flow.inputs or len(flow.inputs) != 1):
            pass
        elif len(flow.inputs) == 1:
            name, value = next(iter(flow.inputs)), item
        else:
            names = ", ".join(flow.inputs) or "none"
            raise ValidationError(
                [f"--input {item!r} has no NAME=; flow {flow.name!r} has the inputs {names}"], flow.source
            )
        tp = flow.inputs[name].type if name in flow.inputs else None
        if name in out and tp is not list:
            raise ValidationError([f"--input {name} is given twice"], flow.source)
        parsed = _yaml_scalar(value) if tp in (int, float, bool, list, dict) else value
        if tp is list and name in out:  # --input runs=a --input runs=b: one list
            prev = out[name]
            out[name] = (prev if isinstance(prev, list) else [prev]) + (
                parsed if isinstance(parsed, list) else [parsed]
            )
        else:
            out[name] = parsed
    return out


def sort_steps(flow: Any, column: str) -> list[str]:
    """``--sort COLUMN``: set ``sort`` on every step of ``flow`` whose pass has that setting; the steps set."""
    from ..errors import ValidationError
    from ..flow.registry import pass_infos

    infos = pass_infos()
    done = []
    for name, step in flow.steps.items():
        info = infos.get(step.target) if isinstance(step.target, str) else None
        if info is not None and any(s[0] == "sort" for s in info.settings):
            flow.set(f"{name}.sort", column)
            done.append(name)
    if not done:
        have = sorted(n for n, i in infos.items() if any(s[0] == "sort" for s in i.settings))
        raise ValidationError(
            [f"--sort: no step of flow {flow.name!r} can be sorted (passes with a sort setting: {', '.join(have)})"],
            flow.source,
        )
    return done


def parse_settings(items: list[str]) -> dict[str, Any]:
    """``[STEP.]SETTING=VALUE`` items -> {"[STEP.]SETTING": value parsed as YAML}."""
    from ..errors import ValidationError

    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or not key or key.startswith(".") or key.endswith("."):
            raise ValidationError([f"--set {item!r}: expected SETTING=VALUE or STEP.SETTING=VALUE"])
        out[key] = _yaml_scalar(value)
    return out


class Progress:
    """A hook printing one line per finished step on a stream."""

    def __init__(self, stream: Any = None) -> None:
        self.stream = stream or sys.stderr

    def after_step(self, ev: Any) -> None:
        extra = f" in {ev.seconds:.2f} s" if ev.status in ("done", "cached") else ""
        err = f": {type(ev.error.error).__name__}: {ev.error.error}" if ev.error is not None else ""
        print(
            f"[{ev.number}/{ev.total}] {ev.step} ({ev.pass_name}) {ev.status}{extra}{err}", file=self.stream, flush=True
        )


def shown_outputs(types: dict[str, Any]) -> list[str] | None:
    """Without ``--output`` a terminal shows only a flow's text reports (when it has any): compute those and tables.

    ``types`` maps each output to its declared type; outputs of unknown type are
    computed too (they may turn out to be text), and tables (the findings are read
    off them). None: every output.
    """
    import inspect

    def unknown(tp: Any) -> bool:
        return tp is Any or tp is inspect.Parameter.empty or isinstance(tp, str)

    if not any(tp is str for tp in types.values()):
        return None
    import pandas as pd

    # tables too: the findings printed first are read off them (figures and PAGs are what costs)
    return [n for n, tp in types.items() if tp is str or unknown(tp) or tp in (pd.DataFrame, pd.Series)]


def _start(run_flow: Any, flow: Any, inputs: dict[str, Any], args: argparse.Namespace, show: bool, engine: Any) -> Any:
    """Run the flow as the command line asks."""
    return run_flow(
        flow,
        inputs,
        jobs=args.jobs,
        cache=args.cache,
        hooks=[Progress()] if show else [],
        allow_import=args.allow_import,
        engine=engine,
        # without --output (or --cache, which keeps every step for later runs) the terminal shows the text
        # reports only: the steps that only feed other outputs (figures, say) are not run
        outputs=None if (args.output or args.cache) else shown_outputs,
        output_dir=args.output,
        allow_write=getattr(args, "allow_write", []),
    )


def _missing_inputs(flow: Any, exc: Exception) -> None:
    """When the only problems are required inputs not given, one line: ``missing --input pag (A trace ...)``."""
    from ..errors import PerflowError

    problems = list(getattr(exc, "problems", []))
    missing = [
        (n, i)
        for n, i in flow.inputs.items()
        if any(p.startswith(f"flow input {n!r} (") and "is required" in p for p in problems)
    ]
    if not missing or len(missing) != len(problems):
        return
    one = len(flow.inputs) == 1
    parts = []
    for n, i in missing:
        doc = f" ({i.doc.strip().rstrip('.')})" if getattr(i, "doc", "") else ""
        parts.append(f"--input {n}{doc}" if one else f"--input {n}=PATH{doc}")
    raise PerflowError(f"missing {'; '.join(parts)}; `perflow flows {flow.name}` shows the flow") from None


def _check_output(out: str) -> None:
    """``cannot write to OUT: reason`` before anything runs, rather than an OS error after the analysis."""
    import os
    import tempfile
    from pathlib import Path

    from ..errors import PerflowError

    try:
        Path(out).mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        if isinstance(exc, NotADirectoryError | FileExistsError) or (Path(out).exists() and not Path(out).is_dir()):
            reason = "a file is in the way (--output names a folder)" if Path(out).is_file() else reason
        raise PerflowError(f"cannot write to {out}: {reason}") from None
    if not os.access(out, os.W_OK):  # pragma: no cover - root passes the probe above anyway
        raise PerflowError(f"cannot write to {out}: permission denied")


def _findings(outputs: dict[str, Any], pag: Any) -> Any:
    """The run's findings table (the pass for the ``findings`` role), or None when it cannot be made (said on stderr)."""
    from ..flow.registry import role_pass

    try:
        return role_pass("findings")(outputs, pag)
    except Exception as exc:  # the run's own outputs stand without them
        print(f"perflow: warning: no findings: {type(exc).__name__}: {exc}", file=sys.stderr)
        return None


def _figure_files(written: dict[str, Any], name: str) -> list[Any]:
    """The figure files written beside a Markdown report (``NAME_files/*.png``), in order."""
    p = written.get(name)
    d = p.with_name(p.stem + "_files") if p is not None and p.suffix == ".md" else None
    return sorted(d.glob("fig-*.png"), key=lambda f: int(f.name.split("-")[1])) if d is not None and d.is_dir() else []


def run(args: argparse.Namespace) -> int:
    """Load, configure and run the flow; write and print its outputs (on the engine chosen with --engine)."""
    from ..errors import FlowError, ValidationError
    from ..flow.engine import make_engine

    name = getattr(args, "engine", "local") or "local"
    opts = {"scheduler": getattr(args, "scheduler", None), "n_workers": getattr(args, "workers", None)}
    if name == "local" and any(v is not None for v in opts.values()):
        raise ValidationError(["--scheduler and --workers need an engine that takes them, e.g. --engine dask"])
    try:
        engine = make_engine(name, **opts)
    except FlowError as e:
        raise ValidationError([str(e)]) from None
    try:
        return _run(args, engine)
    finally:
        engine.close()


def _run(args: argparse.Namespace, engine: Any = None) -> int:
    import traceback

    from ..errors import FlowError, ValidationError
    from ..flow.api import run as run_flow
    from ..flow.loader import load_flow
    from ..flow.outputs import as_text, write_outputs

    flow = load_flow(args.flow, allow_import=args.allow_import, validate=False)
    try:
        settings = parse_settings(args.set)
        for key, value in settings.items():
            flow.set(key, value)
    except FlowError as exc:
        if isinstance(exc, ValidationError):
            raise
        raise ValidationError([f"--set: {exc}"], flow.source) from None
    if getattr(args, "sort", None):
        sort_steps(flow, args.sort)
    inputs = parse_inputs(flow, [*getattr(args, "inputs", []), *args.input])
    if args.output:
        _check_output(args.output)
    show = args.progress  # a terminal gets perflow.progress's display (enabled by perflow.cli.main)
    if args.jobs is not None and args.jobs < 1:
        raise ValidationError([f"--jobs must be at least 1, not {args.jobs}"])
    if not args.debug:  # failures are printed below, once
        logging.getLogger("perflow.flow.scheduler").setLevel(logging.ERROR)
    try:
        result = _start(run_flow, flow, inputs, args, show, engine)
    except ValidationError as exc:
        _missing_inputs(flow, exc)
        raise
    printed = []
    hidden = [n for n in flow.outputs if n not in result.outputs]  # not even computed
    has_report = any(isinstance(v, str) for v in result.outputs.values())
    from ..pag.pag import PAG

    pag = next((v for v in result.inputs.values() if isinstance(v, PAG)), None)
    found = _findings(result.outputs, pag)
    try:
        written = write_outputs(result, args.output, findings=found) if args.output else {}  # every output, index.html
    except OSError as exc:
        from ..errors import PerflowError

        raise PerflowError(f"cannot write to {args.output}: {exc.strerror or exc}") from None
    for name, value in result.outputs.items():
        where = written.get(name)
        # when the flow has a text report, the terminal shows the report(s) only
        text = (
            as_text(value, figures=_figure_files(written, name)) if (isinstance(value, str) or not has_report) else None
        )
        if text is not None:
            printed.append((name, text))
        elif where is None:
            hidden.append(name)
    hidden = [n for n in flow.outputs if n in set(hidden)]  # in declared order
    if found is not None and len(found):
        from ..flow.outputs import terminal_width
        from ..passes.findings import findings_markdown

        print(findings_markdown(found, width=terminal_width()))
    for name, text in printed:
        if len(printed) > 1:
            print(f"== {name} ==")
        print(text)
        if len(printed) > 1:
            print()
    sys.stdout.flush()
    if hidden and not args.quiet:  # after the sections, which it is about
        print(
            f"perflow: output{'s' if len(hidden) > 1 else ''} {', '.join(hidden)} not shown; "
            "use --output DIR to save every output",
            file=sys.stderr,
        )
    if not args.quiet:
        dest = f"; outputs written to {args.output} (open {written['index']})" if args.output else ""
        print(f"perflow: {result.summary()}{dest}", file=sys.stderr)
    for err in result.errors.values():
        if args.debug:
            traceback.print_exception(err)
        print(f"perflow: error: {printable(str(err))}", file=sys.stderr)
    if result.ok:
        return 0
    from .main import EXIT_FAILED, EXIT_USAGE, _usage_error

    # unreadable or missing input data is the caller's mistake, not a failed analysis
    return EXIT_USAGE if all(_usage_error(e.error) for e in result.errors.values()) else EXIT_FAILED
