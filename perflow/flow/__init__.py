"""Analysis flows: the pass registry, flows in Python and YAML, and the scheduler.

>>> import perflow
>>> flow = perflow.Flow("hotspots")
>>> pag = flow.input("pag", perflow.PAG)
>>> flow.output("hot", flow.step("hot", "hotspot", pag, k=5))
>>> result = perflow.run(flow, pag=perflow.synthetic.trace())

See docs/flows.md for the model, the YAML schema and the scheduler semantics.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .registry import all_passes, get_pass, pass_, role_pass
from .spec import PassSpec, Port, Setting

if TYPE_CHECKING:  # imported on first use (pandas and the scheduler are not needed to list or register passes)
    from .api import prepare_inputs, run
    from .cache import Cache
    from .flow import MISSING, Flow, FlowInput, FlowOutput, Ref, Step
    from .loader import load_flow
    from .problems import Problem
    from .result import FlowResult
    from .scheduler import StepEvent

_LAZY = {
    "prepare_inputs": ".api",
    "run": ".api",
    "Cache": ".cache",
    "MISSING": ".flow",
    "Flow": ".flow",
    "FlowInput": ".flow",
    "FlowOutput": ".flow",
    "Ref": ".flow",
    "Step": ".flow",
    "load_flow": ".loader",
    "Problem": ".problems",
    "FlowResult": ".result",
    "StepEvent": ".scheduler",
}

__all__ = [
    "pass_",
    "PassSpec",
    "Port",
    "Setting",
    "get_pass",
    "role_pass",
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


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(target, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
