"""Write notebooks/07_scalana.ipynb (outputs are not stored; the tests execute it)."""

from pathlib import Path

import nbformat as nbf

cells = []


def md(s: str) -> None:
    cells.append(nbf.v4.new_markdown_cell(s.strip("\n")))


def code(s: str) -> None:
    cells.append(nbf.v4.new_code_cell(s.strip("\n")))


md("""
# Scaling models and the ScalAna paradigm

Runs of one program at several process counts answer two questions: *how* does each call
path scale (a performance model per call path, in the normal form of Extra-P), and *why* do
the ones that scale badly do so (backtracking from them through the parallel view of the
largest run to a root cause, after ScalAna, SC'20). This notebook fits models to known
functions, to the LULESH scaling runs, and runs the `scalana` flow on synthetic traces whose
cause we know.
""")
code("""
import numpy as np
import pandas as pd

import perflow
from perflow.passes.models import fit_models
from perflow.passes.scalability import read_runs, scaling_data
from perflow.passes.scalability_models import scaling_models

pd.set_option("display.width", 160)
pd.set_option("display.max_colwidth", 70)
""")
md("""
## Models in the performance-model normal form

A model is `c0 + c·p^i·log2(p)^j` with `i` from {0, 1/4, 1/3, 1/2, 2/3, 3/4, 1, ..., 3} and `j`
from {0, 1, 2}; `negative=True` adds `p^-i` for strong scaling. Every candidate is fitted by
least squares to every call path at once and the one with the smallest leave-one-out error
(`cv_smape`) wins; guards keep noise from buying terms. Five known functions at
p = 2 ... 32, exact and with 2 % noise:
""")
code("""
p = np.array([2.0, 4, 8, 16, 32])
truth = {
    "3": lambda p: 3 + 0 * p,
    "1 + p": lambda p: 1 + p,
    "1 + p·log2(p)": lambda p: 1 + p * np.log2(p),
    "0.1 + 8·p^-1": lambda p: 0.1 + 8 / p,
    "2 + 0.5·log2(p)^2": lambda p: 2 + 0.5 * np.log2(p) ** 2,
}
Y = np.array([f(p) for f in truth.values()])
noisy = Y * np.random.default_rng(0).lognormal(0.0, 0.02, Y.shape)
exact, fitted = fit_models(p, Y, negative=True), fit_models(p, noisy, negative=True)
at64 = np.array([f(64.0) for f in truth.values()])
pd.DataFrame(
    {
        "true": list(truth),
        "exact data": exact.text(),
        "with 2 % noise": fitted.text(),
        "cv_smape %": fitted.cv_smape.round(2),
        "predicted at 64 / true": (fitted.evaluate([64.0])[:, 0] / at64).round(3),
    }
)
""")
md("""
With noise, neighbouring exponents can be hard to tell apart over a short range of scales
(that is what the cross-validation error shows), but the extrapolation stays close.

## The LULESH runs (Caliper, 27 to 343 ranks)

`scaling_models` aligns the runs by call path and models each one (the metric aggregated over
the processes of a run, by default the slowest process). Their `problem_size` is 30 in every
run (weak scaling): asked to model it too, the pass says so and models the process count only.
""")
code("""
import os
from pathlib import Path


def lulesh_dir():
    for c in (os.environ.get("PERFLOW_SHARED_DATA"), "../../shared/data", "/work/shared/data"):
        if c and Path(c, "scaling", "lulesh-caliper").is_dir():
            return Path(c, "scaling", "lulesh-caliper")
    return None


def stand_in_runs():  # without the data: five profiles of the same shape, weak scaling
    out = []
    for n in (27, 64, 125, 216, 343):
        kids = [
            {"name": "CalcForceForNodes", "metrics": {"time_exc": [11.0 + 0.1 * np.sin(n)] * 4}},
            {"name": "MPI_Allreduce", "metrics": {"time_exc": [1.0 + 0.3 * np.log2(n)] * 4}},
            {"name": "MPI_Comm_split", "metrics": {"time_exc": [0.001 + 1e-6 * n**1.75] * 4}},
        ]
        lit = {"name": "main", "metrics": {"time_exc": [0.01] * 4}, "children": kids}
        out.append(perflow.PAG.from_literal(lit, attrs={"nprocs": n, "problem_size": 30}))
    return out


d = lulesh_dir()
runs = read_runs([str(d)]) if d else stand_in_runs()
models = scaling_models(runs, params=["problem_size"])
print(models.attrs["note"])
models[["call_path", "model", "smape", "cv_smape", "ar2", "poor_fit", "growth"]].head(10)
""")
code("""
from perflow.passes.plot_scaling import plot_scaling

grows = models[(models["lead"] != "1") & ~models["poor_fit"]].head(5)
plot_scaling(scaling_data(runs), grows, label="label", title="LULESH: call paths whose models grow")
""")
md("""
## The scalana flow

Three synthetic MPI traces at 4, 8 and 16 ranks: the compute phase divides a fixed amount of
work among the ranks (strong scaling), but rank 0 also runs 4 ms of serial work per
iteration, which every other rank waits for in the halo exchange and the allreduce. The flow
models every call path, finds the non-scalable ones (time lost relative to ideal scaling at
the largest scale, or predicted by the model at twice that scale), walks back from each
through the parallel view of the 16-rank run, and names the cause with its source line.
""")
code("""
traces = []
for P in (4, 8, 16):
    c = 0.04 / P
    pag = perflow.synthetic.trace(
        nprocs=P, iterations=20, compute_time=c, slow_rank=0, slow_factor=1 + 0.004 / c, seed=P
    )
    pag.attrs["nprocs"] = P
    traces.append(pag)
result = perflow.run("scalana", runs=traces)
result["causes"][["call_path", "cause", "source", "cause_process", "loss", "walk"]]
""")
code("""
result["non_scalable"][["call_path", "model", "loss", "share", "model_loss", "by_loss", "by_model"]]
""")
code("""
result["figure"]
""")
md("""
The compute phase's model, `0.08 + 0.8·p^-1`, is the 20 iterations of 4 ms serial work plus
the divided 40 ms: its constant is what does not scale. The waits in `MPI_Allreduce` and
`MPI_Waitall` stay flat while ideal scaling would halve them at each doubling; backtracking
leads from both to `compute` on rank 0.

From the command line: `perflow run scalana --input runs='[run2, run4, run8]' --output out`
(each entry a trace or profile, e.g. recorded with `perflow record -n N`), with
`--set paths.mode=weak` for weak scaling. `tests/recorder/test_record_scalana.py` does this
on a C program recorded at 2, 4 and 8 ranks, where rank 0 merges one value per rank.
""")

nb = nbf.v4.new_notebook()
nb.cells = cells
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
out = Path(__file__).resolve().parents[1] / "07_scalana.ipynb"
nbf.write(nb, out)
print(f"wrote {out}")
