"""A Markdown overview of a run: where the time goes in the calling-context tree.

Run it as ``perflow run overview --input RUN`` (prints the report) or with
``--output DIR`` (writes ``DIR/report.md`` and ``DIR/index.html``). A Python flow: the same graph
could be written in YAML; ``perflow flows overview`` prints it that way.
"""

from __future__ import annotations

from pathlib import Path

from perflow.flow import Flow


def flow() -> Flow:
    """Read the run, draw its calling-context tree by inclusive time, assemble a report."""
    f = Flow("overview", __doc__.strip())
    data = f.input("data", Path, doc="The trace, profile or saved PAG to read.")
    pag = f.step("read", "read", data)
    inclusive = f.step("inclusive", "tree_text", pag, metric="time_inc", threshold=0.01, ascii=True)
    f.output(
        "report",
        f.step(
            "report",
            "report",
            {"Calling-context tree: inclusive time (>= 1% of the total)": inclusive},
            title="perflow overview",
            format="markdown",
        ),
        doc="The overview as a Markdown document.",
    )
    return f
