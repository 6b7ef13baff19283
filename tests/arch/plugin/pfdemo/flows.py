"""The flow recipe: a flow library (``names()``, ``find(name)``)."""

from __future__ import annotations

from perflow import PAG, Flow


def names() -> list[str]:
    return ["pfdemo_flow"]


def find(name: str) -> Flow:
    if name != "pfdemo_flow":
        raise KeyError(name)
    flow = Flow(name, "The pfdemo totals of a run")
    pag = flow.input("pag", PAG)
    flow.output("totals", flow.step("totals", "pfdemo_totals", pag, how="max"))
    return flow
