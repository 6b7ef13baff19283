"""Analysis flows: the pass registry, flows in Python and YAML, and the scheduler.

>>> import perflow
>>> flow = perflow.Flow("hotspots")
>>> pag = flow.input("pag", perflow.PAG)
>>> flow.output("hot", flow.step("hot", "hotspot", pag, k=5))
>>> result = perflow.run(flow, pag=perflow.synthetic.trace())

See docs/flows.md for the model, the YAML schema and the scheduler semantics.
"""

from .api import prepare_inputs, run
from .cache import Cache
from .flow import MISSING, Flow, FlowInput, FlowOutput, Ref, Step
from .loader import load_flow
from .problems import Problem
from .registry import PassSpec, Port, Setting, all_passes, get_pass, pass_
from .result import FlowResult
from .scheduler import StepEvent

__all__ = [
    "pass_",
    "PassSpec",
    "Port",
    "Setting",
    "get_pass",
    "all_passes",
    "Flow",
    "FlowInput",
    "FlowOutput",
    "Step",
    "Ref",
    "MISSING",
    "Problem",
    "load_flow",
    "run",
    "prepare_inputs",
    "FlowResult",
    "StepEvent",
    "Cache",
]
