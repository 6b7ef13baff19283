"""Write notebooks/01_quickstart.ipynb (outputs are not stored; the tests execute it)."""

from pathlib import Path

import nbformat as nbf

cells = []


def md(s: str) -> None:
    cells.append(nbf.v4.new_markdown_cell(s.strip("\n")))


def code(s: str) -> None:
    cells.append(nbf.v4.new_code_cell(s.strip("\n")))


md("""
# perflow quick start

This notebook reads a sample trace, looks at it through the **PAG** (Program Abstraction Graph),
composes built-in passes and one pass of our own into an analysis **flow** in Python, runs it,
and then writes the same flow in YAML.

The sample `examples/data/ring8/traces.otf2` is an OTF2 trace of an 8-rank MPI ring halo
exchange with a slow rank (3), load imbalance and occasional late senders, made by
`examples/make_samples.py`.
""")
code("""
import pandas as pd

import perflow
from perflow import PAG, pass_

pag = perflow.read("../examples/data/ring8/traces.otf2")
pag
""")
md("""
## The PAG

The **top-down view** is a calling-context tree with metrics per (vertex, process, thread);
the **parallel view** joins those vertices across processes with communication edges. Both
are tables underneath, with sets for selecting and networkx graphs on demand.
""")
code("""
pag.vertices.filter(kind="mpi").sort_by("time_exc", agg="max").top(3)
""")
code("""
# vertices whose slowest process spends 30% more than the average one
pag.vertices.filter("max(time_exc) > 1.3 * mean(time_exc)").names()
""")
code("""
# Hatchet-style call-path queries (docs/queries.md): paths from the root down to MPI calls
pag.query('MATCH ("*")->(".", p) WHERE p."name" STARTS WITH "MPI_" AND p IS LEAF').names()
""")
code("""
# where receivers waited longest for their messages
pag.parallel.edges.filter(kind="p2p").sort_by("wait").top(3).to_frame()[
    ["src_name", "src_process", "dst_name", "dst_process", "count", "wait"]
]
""")
md("""
## Passes are typed functions

A pass is a plain Python function: its positional parameters are its data **inputs**, its
keyword-only parameters are its **settings**, and the return annotation is its **output**.
The built-in library (`perflow passes` lists it) covers hotspots, imbalance, wait states,
critical path, scalability and more; a pass is still a function you can call directly.
""")
code("""
from perflow.passes.hotspot import hotspot
from perflow.passes.imbalance import imbalance

hotspot(pag, k=3)[["call_path", "value", "share"]]
""")
md("""
Our own pass, registered with `@pass_` (which records its inputs, settings, output and
docstring), turns two tables into a two-line summary:
""")
code("""
@pass_(version="1")
def headline(hot: pd.DataFrame, imb: pd.DataFrame) -> str:
    \"\"\"A two-line summary: the hottest call path and the most imbalanced one.\"\"\"
    return (
        f"hottest: {hot['call_path'].iloc[0]} ({hot['share'].iloc[0]:.0%} of the time)\\n"
        f"most imbalanced: {imb['call_path'].iloc[0]} "
        f"(slowest process {imb['max_over_mean'].iloc[0]:.2f}x the mean)"
    )
""")
md("""
## A flow in Python

`flow.input()` declares a value the flow takes, `flow.step()` adds a pass invocation (data
inputs first, settings by keyword, just as when calling the pass) and returns a reference to
its output, and `flow.output()` names what the run returns.
""")
code("""
flow = perflow.Flow("quickstart", "Hotspots, load imbalance and wait states of a run.")
run_pag = flow.input("pag", PAG, doc="The run to analyse.")
hot = flow.step("hot", "hotspot", run_pag, k=5)
imb = flow.step("imb", "imbalance", run_pag, k=5)
waits = flow.step("waits", "wait_states", run_pag)
flow.output("hot", hot)
flow.output("imbalance", imb)
flow.output("waits", flow.step("wait_summary", "wait_state_summary", run_pag, waits))
flow.output("timeline", flow.step("timeline", "plot_timeline", run_pag, waits))
flow.output("headline", flow.step("headline", headline, hot, imb))
flow
""")
md("""
`perflow.run` validates the flow, runs independent steps concurrently, and returns a
`FlowResult`: outputs by name, and the status and timing of every step.
""")
code("""
result = perflow.run(flow, pag=pag)
print(result["headline"])
result.steps
""")
code("""
result["waits"].head()
""")
code("""
result["timeline"]
""")
md("""
## The same flow in YAML

A flow written in YAML is the same object: `flow.to_yaml()` writes it, and `perflow.load_flow`
(for a file or a shipped flow name) or `Flow.from_yaml` reads it back.
""")
code("""
text = flow.to_yaml()
print(text)
""")
code("""
from_yaml = perflow.Flow.from_yaml(text)
assert from_yaml == flow
# a path given for a PAG input is read with perflow.read
print(perflow.run(from_yaml, pag="../examples/data/ring8.pag")["headline"])
""")
md("""
## Mistakes are reported together, with where they are

Validation runs before anything does and lists every problem, with its YAML path, line and
column.
""")
code("""
broken = text.replace("k: 5", "k: five").replace("pass: wait_states", "pass: wait_state")
try:
    perflow.Flow.from_yaml(broken)
except perflow.ValidationError as exc:
    print(exc)
""")
md("""
## Changing settings, caching results

`settings=` changes settings by `STEP.SETTING`. With `cache=DIR`, step results are kept across
runs, keyed by pass name and version, settings and input content: an unchanged step is
loaded, a changed one recomputed.
""")
code("""
import tempfile

cache = tempfile.mkdtemp()
first = perflow.run(flow, pag=pag, cache=cache)
again = perflow.run(flow, pag=pag, cache=cache)
fewer = perflow.run(flow, pag=pag, cache=cache, settings={"hot.k": 2})
pd.DataFrame({"first": first.steps["status"], "again": again.steps["status"], "hot.k=2": fewer.steps["status"]})
""")
md("""
The same flow runs on any PAG, for example a synthetic trace with a slow rank 5:
""")
code("""
synthetic = perflow.synthetic.trace(nprocs=16, iterations=20, slow_rank=5, slow_factor=3.0)
print(perflow.run(flow, pag=synthetic)["headline"])
""")
md("""
From the command line, shipped flows run the same way:
`perflow run mpi_profiler --input ../examples/data/ring8/traces.otf2`, or
`perflow run wait_states --input run.otf2 --output results/`. `perflow flows` lists the shipped
flows and `perflow passes` the passes; a flow file of your own with passes from an importable
module runs with `perflow run my_flow.yaml --allow-import`.
""")

nb = nbf.v4.new_notebook()
nb.cells = cells
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
out = Path(__file__).resolve().parents[1] / "01_quickstart.ipynb"
nbf.write(nb, out)
print(f"wrote {out}")
