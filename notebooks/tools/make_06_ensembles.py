"""Write notebooks/06_ensembles.ipynb (outputs are not stored; the tests execute it)."""

from pathlib import Path

import nbformat as nbf

cells = []


def md(s: str) -> None:
    cells.append(nbf.v4.new_markdown_cell(s.strip("\n")))


def code(s: str) -> None:
    cells.append(nbf.v4.new_code_cell(s.strip("\n")))


md("""
# Ensembles of runs and PAG arithmetic

Performance engineers compare runs: scales, inputs, compilers, repetitions. A `perflow.Ensemble`
holds several runs (of any formats) with a **metadata table**, their call trees **aligned by
call path**, **statistics per call path across runs**, and **grouping and filtering by
metadata**; PAGs combine with `+ - * /`, aligned by call path, units checked
(see `docs/ensembles.md`).

The data: five LULESH 2.0.3 runs measured with Caliper and Adiak at 27, 64, 125, 216 and 343
ranks (`scaling/lulesh-caliper` in the shared sample data). Without the shared data the notebook
uses synthetic profiles at the same scales.
""")
code("""
import os
from pathlib import Path

import numpy as np
import pandas as pd

import perflow
from perflow.passes.differential import difference, differential
from perflow.passes.hotspot import hotspot
from perflow.passes.plot import new_figure  # a Figure that shows itself in a notebook

pd.set_option("display.width", 160)
pd.set_option("display.max_colwidth", 60)


def lulesh_dir():
    for c in (os.environ.get("PERFLOW_SHARED_DATA"), Path("../../shared/data"), Path("/work/shared/data")):
        if c and Path(c, "scaling", "lulesh-caliper").is_dir():
            return Path(c, "scaling", "lulesh-caliper")
    return None


d = lulesh_dir()
if d is not None:
    ens = perflow.Ensemble.from_paths(d)  # a directory of runs; a glob or a list works too
else:  # synthetic stand-ins with the same scales
    runs = [perflow.synthetic.profile(45, p, seed=0) for p in (27, 64, 125, 216, 343)]
    ens = perflow.Ensemble(runs, names=[f"{p}_cores" for p in (27, 64, 125, 216, 343)])
ens
""")
md("""
## The metadata table

One row per run. The standard columns (`tool`, `nprocs`, `nthreads`, `command`, `executable`,
`date`, `host`, `user`) read what each format records, under one name; then every scalar the
tool recorded itself: here Adiak's globals such as the problem size, the compiler and LULESH's
figure of merit. Runs are named after their files and read in natural order.
""")
code("""
meta = ens.metadata
wanted = ["tool", "nprocs", "nthreads", "date", "user", "compiler", "problem_size", "elapsed_time", "figure_of_merit"]
cols = [c for c in wanted if c in meta.columns]
meta[cols]
""")
md("""
## Call trees aligned by call path

The runs' trees are aligned by call path (`main/lulesh.cycle/TimeIncrement/MPI_Allreduce`): one
union tree, with the number of runs having each path. A path missing from a run is NaN in the
values, never a silent 0 (`ens.presence` is the mask).
""")
code("""
print(len(ens.tree), "call paths;", "present in every run:", bool(ens.presence.to_numpy().all()))
ens.tree.head(6)
""")
md("""
## Statistics per call path across runs

A run's value of a call path is the metric aggregated over that run's processes with `agg`
(chosen explicitly; here `max`: the slowest process; these Caliper profiles were aggregated by
Caliper, so each run holds one value per path), then the mean, standard deviation, minimum,
percentiles and maximum are taken over the runs having the path.
""")
code("""
st = ens.stats("time_exc", agg="max")
st.sort_values("mean", ascending=False).head(8)[["name", "n_runs", "mean", "std", "min", "p50", "max"]].round(3)
""")
md("""
## Grouping and filtering by metadata

Columns of our own (here: small or large scale) sit beside the tools' columns; `groupby` gives
one ensemble per key, and `stats` of all groups at once.
""")
code("""
ens2 = ens.with_metadata(scale=lambda pag: "small" if pag.attrs.get("nprocs", 0) < 125 else "large")
groups = ens2.groupby("scale")
print({k: g.names for k, g in groups.items()})
print("at 125 ranks or more:", ens.filter(lambda m: m.nprocs >= 125).names)
by_scale = groups.stats("time_exc", agg="max")
top = st.sort_values("mean", ascending=False)["call_path"].head(5)
label = {p: "/".join(p.split("/")[-2:]) for p in top}  # names repeat (two MPI_Wait): label by the path's tail
sel = by_scale[by_scale["call_path"].isin(top)].assign(path=lambda df: df["call_path"].map(label))
sel.pivot(index="path", columns="scale", values="mean").round(3)
""")
md("""
## A pandas view indexed by (vertex, run)

Like Thicket's: every (union vertex, run) pair, joined here with the metadata to tabulate the
time of the largest paths against the process count.
""")
code("""
frame = ens.frame(["time_exc"], agg="max").join(ens.metadata[["nprocs"]], on="run")
sel = frame[frame["call_path"].isin(top)].assign(path=lambda df: df["call_path"].map(label))
sel.pivot(index="path", columns="nprocs", values="time_exc").round(3)
""")
code("""
fig = new_figure(7, 4)
ax = fig.add_subplot()
for path in top:
    rows = frame[frame["call_path"] == path]
    ax.plot(rows["nprocs"], rows["time_exc"], "o-", label=label[path])
ax.set_xscale("log", base=2)
ax.set_xlabel("processes")
ax.set_ylabel("exclusive time, slowest process [s]")
ax.set_title("the five largest call paths across the ensemble")
ax.legend(fontsize=8)
fig
""")
md("""
## PAG arithmetic

`b - a` aligns two PAGs by call path and returns a PAG (the union tree, a `status` column per
vertex) that every pass takes: here the hotspots of the growth from 27 to 343 ranks. Both runs
hold one (aggregated) location, so rows pair per (call path, process); runs with different
process counts need an explicit `by="vertex"` (each side aggregated first).
""")
code("""
small, large = ens["27_cores"], ens["343_cores"]
growth = large - small
hotspot(growth, k=5)[["name", "call_path", "value"]]  # seconds gained (shares of a difference mean little)
""")
code("""
ratio = large.div(small, by="vertex", fill=np.nan)  # a ratio of totals; NaN where a path is in one run only
print("unit of the ratio:", repr(ratio.metric_info["time_exc"].unit), "(s / s: dimensionless)")
try:
    bad = large.select_metrics("time_exc") + large.select_metrics("avg.count#inclusive#sum#time.duration")
except perflow.MetricError as exc:  # units are checked (here: seconds and a count without unit)
    print("refused:", exc)
""")
md("""
`differential` gives the comparison as a table, and `difference` as a PAG: with the defaults both
agree call path by call path.
""")
code("""
table = differential(small, large, agg="max", k=5)
diff_pag = difference(small, large, agg="max")
check = pd.Series(diff_pag.aggregate("time_exc").to_numpy(), index=diff_pag.call_paths().to_numpy())
table.assign(from_pag=check.reindex(table["call_path"]).to_numpy())[["name", "value_a", "value_b", "diff", "from_pag"]]
""")
md("""
## The `ensemble` flow

The same from the command line: `perflow run ensemble --input runs=DIR` (or a glob) prints the
metadata, the statistics, every run's hotspots and every run against the first.
""")
code("""
result = perflow.run("ensemble", runs=ens)
result
""")

nb = nbf.v4.new_notebook()
nb["cells"] = cells
nb["metadata"] = {
    "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
    "language_info": {"name": "python"},
}
out = Path(__file__).resolve().parents[1] / "06_ensembles.ipynb"
nbf.write(nb, out)
print("wrote", out)
