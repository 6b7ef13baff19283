"""Every notebook under notebooks/ runs from top to bottom without an error, and shows every figure.

No notebook uses ``%matplotlib`` magic: the figures of the plot passes (and those made with
``perflow.passes.plot.new_figure``) display themselves as the last expression of a cell.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    # the kernel imports perflow from this checkout, whatever is installed
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    # as a user runs them: kernels in the default mode (small inputs interpreted, no numba start-up in each kernel;
    # the suite checks the compiled kernels in process, tests/test_jit.py that both modes agree)
    monkeypatch.setenv("PERFLOW_JIT", "auto")
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=240, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as exc:  # show which cell failed and why
        pytest.fail(f"{path.name}: {exc}", pytrace=False)

    figures = 0
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        assert "%matplotlib" not in cell.source, f"{path.name} cell {i}: figures must show without magic"
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            text = data.get("text/plain", "")
            if re.search(r"Figure size \d+x\d+", text):  # a figure as the last expression of the cell
                assert "image/png" in data, f"{path.name} cell {i} shows {text!r} instead of the figure"
                figures += 1
            if "FlowResult" in text:  # a run shows its figures and tables inline
                assert "text/html" in data and "<table" in data["text/html"], f"{path.name} cell {i}"
    expected = sum(
        1
        for c in nb.cells
        if c.cell_type == "code"
        and re.search(r"^(fig|plot_\w+\(.*\)|result\[\"timeline\"\])\s*$", c.source.strip().split("\n")[-1])
    )
    assert figures >= expected > 0 or expected == 0, f"{path.name}: {figures} figures shown, {expected} expected"
