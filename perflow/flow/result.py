"""What a run returns: outputs by name, per-step status and timing, errors."""

from __future__ import annotations

import html
from collections.abc import Iterator
from typing import Any

import pandas as pd

from perflow.pag.pag import PAG

from .._atomic import write_text
from ..errors import FlowError, StepError
from .outputs import run_page, write_outputs
from .problems import did_you_mean
from .registry import role_pass

__all__ = ["FlowResult"]


class FlowResult:
    """The outcome of :func:`perflow.run`.

    ``result["name"]`` is a flow output (raising the step's
    :class:`~perflow.errors.StepError` if the step that makes it failed);
    ``result.steps`` is a table of every step's status and timing;
    :meth:`raise_for_status` raises the first failure.

    Attributes
    ----------
    flow : Flow
    outputs : dict
        The outputs that were computed, by name.
    steps : pandas.DataFrame
        One row per step (``outer/inner`` for steps of sub-flows), in plan
        order: ``pass``, ``status`` (done, cached, shared, unneeded, failed,
        skipped), ``start`` and ``seconds`` (wall time from the start of the
        run), ``error``.
    errors : dict of str to StepError
        Failures by step.
    seconds : float
        Wall time of the whole run.
    intermediates : dict
        Every step's outputs, when the run kept them (``keep=True``).
    """

    def __init__(
        self,
        flow: Any,
        outputs: dict[str, Any],
        steps: pd.DataFrame | list[dict[str, Any]],
        errors: dict[str, StepError],
        output_steps: dict[str, str],
        seconds: float,
        intermediates: dict[str, dict[str, Any]] | None = None,
    ):
        self.flow = flow
        self.outputs = outputs
        self._steps = steps
        self.errors = errors
        self.seconds = seconds
        self.intermediates = intermediates or {}
        self._output_steps = output_steps
        self.inputs: dict[str, Any] = {}

    @property
    def steps(self) -> pd.DataFrame:
        """One row per step: pass, status, start, seconds, error (built on first use)."""
        if not isinstance(self._steps, pd.DataFrame):
            cols = ["step", "pass", "status", "start", "seconds", "error"]
            self._steps = pd.DataFrame(self._steps, columns=cols).set_index("step")
        return self._steps

    # ------------------------------------------------------------------ outputs
    def __getitem__(self, name: str) -> Any:
        if name in self.outputs:
            return self.outputs[name]
        step = self._output_steps.get(name)
        if step is not None:
            if step in self.errors:
                raise self.errors[step]
            status = self.steps.at[step, "status"] if step in self.steps.index else "?"
            upstream = next(iter(self.errors.values()), None)
            raise FlowError(
                f"output {name!r} was not computed: step {step!r} was {status}"
                + (f" because {upstream.step!r} failed" if upstream is not None else "")
            ) from upstream
        raise KeyError(
            f"no output {name!r}{did_you_mean(name, self._output_steps)} "
            f"(outputs: {', '.join(self._output_steps) or 'none'})"
        )

    def __contains__(self, name: object) -> bool:
        return name in self.outputs

    def __iter__(self) -> Iterator[str]:
        return iter(self._output_steps)

    def keys(self) -> list[str]:
        """Names of the flow's outputs (computed or not)."""
        return list(self._output_steps)

    def get(self, name: str, default: Any = None) -> Any:
        """An output, or ``default`` when it was not computed."""
        return self.outputs.get(name, default)

    # ------------------------------------------------------------------ status
    @property
    def ok(self) -> bool:
        """Whether every step succeeded."""
        return not self.errors

    @property
    def failed(self) -> list[str]:
        """Steps that failed."""
        return list(self.errors)

    @property
    def skipped(self) -> list[str]:
        """Steps that did not run because something upstream failed."""
        return self.steps.index[self.steps["status"] == "skipped"].tolist()

    def raise_for_status(self) -> FlowResult:
        """Raise the first step failure (its ``__cause__`` is the original exception); return self otherwise."""
        if self.errors:
            raise next(iter(self.errors.values()))
        return self

    def save(self, directory: Any, *, index: bool = True) -> dict[str, Any]:
        """Write every computed output to ``directory`` and ``index.html`` (see :mod:`perflow.flow.outputs`).

        Returns the paths by output name (``"index"``: the page of the run).
        """

        return write_outputs(self, directory, index=index)

    def to_html(self, path: Any = None) -> str:
        """The self-contained HTML page of the run (as ``index.html``); also written to ``path`` when given."""

        pag = next((v for v in self.inputs.values() if isinstance(v, PAG)), None)
        page = run_page(self.outputs, pag, self.steps, title=f"perflow: {self.flow.name}", subtitle=self.summary())
        if path is not None:
            write_text(path, page)
        return page

    # ------------------------------------------------------------------ display
    def summary(self) -> str:
        """One line: how many steps ran, were cached, failed, were skipped; wall time."""
        counts = self.steps["status"].value_counts()
        parts = [
            f"{int(counts[s])} {s}"
            for s in ("done", "cached", "shared", "unneeded", "failed", "skipped")
            if s in counts
        ]
        return f"flow {self.flow.name!r}: {', '.join(parts)} in {self.seconds:.3f} s"

    def __repr__(self) -> str:
        state = "ok" if self.ok else f"failed: {', '.join(self.failed)}"
        return f"<FlowResult {self.flow.name!r} {state}; outputs [{', '.join(self.outputs)}]>"

    def _repr_html_(self) -> str:
        """The run in a notebook: its summary, then every output shown (reports rendered, figures, tables), then the steps."""
        e = html.escape
        colour = {"failed": "#c00", "skipped": "#888", "cached": "#06c", "unneeded": "#888"}
        rows = []
        for step, r in self.steps.iterrows():
            c = colour.get(r["status"], "inherit")
            rows.append(
                f"<tr><td>{e(str(step))}</td><td>{e(str(r['pass']))}</td>"
                f"<td style='color:{c}'>{e(str(r['status']))}</td><td>{r['seconds']:.3f}</td>"
                f"<td>{e(str(r['error'] or ''))}</td></tr>"
            )
        shown = []
        try:  # the diagnosis first, as on the run's page and in the terminal
            pag = next((v for v in self.inputs.values() if isinstance(v, PAG)), None)
            found = role_pass("findings")(self.outputs, pag)
            if len(found):
                shown.append(f"<h4>Findings</h4>{_inline(found, 'findings')}")
        except Exception as exc:  # the outputs stand without them
            shown.append(f"<p><i>no findings: {e(str(exc))}</i></p>")
        for name in self._output_steps:
            if name not in self.outputs:
                shown.append(f"<h4><code>{e(name)}</code></h4><p><i>not computed</i></p>")
                continue
            shown.append(f"<h4><code>{e(name)}</code></h4>{_inline(self.outputs[name], name)}")
        return (
            f"<b>{e(self.summary())}</b>"
            + "".join(shown)
            + "<details><summary>steps</summary><table><tr><th>step</th><th>pass</th><th>status</th>"
            "<th>seconds</th><th>error</th></tr>" + "".join(rows) + "</table></details>"
        )


#: Rows of a table shown inline in a notebook.
INLINE_ROWS = 20


def _inline(value: Any, name: str) -> str:
    """One output as an HTML fragment for a notebook (the pass library's pass for the ``fragment`` role)."""
    return str(role_pass("fragment")(value, name=name, max_rows=INLINE_ROWS))
