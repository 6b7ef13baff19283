"""Settings declared once (a Settings dataclass) and given once per flow (flow settings).

A pass takes a :class:`~perflow.pag.settings.Settings` class's fields as keyword settings
(:func:`~perflow.pag.settings.settings_keywords`): their types, allowed values, defaults, checks and
documentation come from the class alone. A flow setting reaches every step (and sub-flow step) whose pass has
it; a step's own setting, or a nearer flow's, overrides it. Validation checks every value before any pass
runs and names the setting, the step and the allowed values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

import perflow.passes  # noqa: F401 - registers the passes
from perflow import Flow
from perflow.errors import PassError, ValidationError
from perflow.flow.plan import compile_flow
from perflow.flow.registry import get_pass, pass_
from perflow.flow.yaml_io import loads
from perflow.pag.settings import Settings, SettingsError, settings_keywords, settings_of
from perflow.trace.builder import TraceBuilder
from perflow.trace.waits import WaitSettings

from . import helpers  # noqa: F401  (registers the t_* passes)
from .test_cli import cli


@dataclass(frozen=True)
class _Demo(Settings):
    """Demo settings.

    Attributes
    ----------
    level : int
        How far (at least 0).
    shape : {"round", "square"}
        Which shape.
    """

    level: int = 2
    shape: Literal["round", "square"] = "round"

    def check(self) -> None:
        if self.level < 0:
            raise SettingsError(f"setting level must be >= 0, got {self.level}")


@pass_(name="t_demo")
@settings_keywords(_Demo, "demo")
def _demo_pass(x: int, *, scale: int = 1, demo: _Demo) -> str:
    """A pass taking the demo settings.

    Parameters
    ----------
    scale : int
        A factor.
    """
    return f"{x * scale}:{demo.level}:{demo.shape}"


def test_a_pass_takes_its_settings_from_the_dataclass() -> None:
    spec = get_pass("t_demo")
    s = {x.name: x for x in spec.settings}
    assert list(s) == ["scale", "level", "shape"]
    assert (s["level"].type, s["level"].default) == (int, 2)
    assert (s["shape"].type, s["shape"].default) == (Literal["round", "square"], "round")
    assert s["shape"].doc == "Which shape." and s["scale"].doc == "A factor."
    assert settings_of(spec.func) == (_Demo,)
    assert _demo_pass(3) == "3:2:round" and _demo_pass(3, scale=2, shape="square") == "6:2:square"
    assert _demo_pass(3, demo=_Demo(level=5), shape="square") == "3:5:square"  # a ready object, a field replaced
    with pytest.raises(PassError, match="pass '_demo_pass': setting shape='oval' is not one of 'round', 'square'"):
        _demo_pass(3, shape="oval")
    with pytest.raises(PassError, match="setting level must be >= 0, got -1"):
        _demo_pass(3, level=-1)
    with pytest.raises(TypeError, match="needs a keyword-only parameter 'opts'"):
        settings_keywords(_Demo, "opts")(lambda x, *, demo: x)


def test_the_wait_state_passes_declare_nothing_of_their_own() -> None:
    # every pass reading the wait states takes WaitSettings: one default, one list of allowed values
    fields = {"wrong_order_window", "late_receiver", "early_reduce"}
    users = ["wait_states", "p2p_wait_states", "late_sender", "wait_state_summary", "collective_wait_states",
             "critical_path", "critical_path_imbalance", "root_cause", "breakdown", "comm_summary", "variance"]  # fmt: skip
    for name in users:
        spec = get_pass(name)
        got = {x.name: x for x in spec.settings if x.name in fields}
        assert set(got) == fields, name
        assert got["late_receiver"].default == WaitSettings.late_receiver == "blocking"
        assert "WaitSettings" in {c.__name__ for c in c_mro(settings_of(spec.func))}, name
    # the replay asks which sends would wait if their receiver were later (eager or rendezvous), not which did:
    # ReplaySettings, shared by POP's ideal network, the critical path's ideal runtime and the what-if
    from perflow.trace.analyses import ReplaySettings

    for name in ("pop_metrics", "pop_scaling", "what_if"):
        assert get_pass(name).setting("late_receiver").default == ReplaySettings.late_receiver == "auto"
    # no pass signature repeats a default of WaitSettings (there were 16 in 8 files)
    pattern = re.compile(r"(late_receiver|early_reduce|wrong_order_window|window)\s*:\s*(str|int)\s*=")
    for path in Path(perflow.passes.__file__).parent.glob("*.py"):
        assert not pattern.search(path.read_text()), path.name


def c_mro(classes: tuple[type, ...]) -> list[type]:
    return [c for cls in classes for c in cls.__mro__]


FLOW = """
perflow: 1
name: waits
inputs:
  pag: {type: PAG}
settings:
  late_receiver: synchronous
steps:
  all:
    pass: wait_states
    inputs: {pag: input:pag}
  own:
    pass: p2p_wait_states
    inputs: {pag: input:pag}
    settings: {late_receiver: none}
  cp:
    pass: critical_path_imbalance
    inputs: {pag: input:pag}
  sub:
    flow: critical_path
    inputs: {pag: input:pag}
"""


def _task_settings(flow: Flow) -> dict[str, dict]:
    return {t.key: t.settings for t in compile_flow(flow).tasks}


def test_a_flow_setting_reaches_every_step_that_has_it() -> None:
    f = loads(FLOW, source="waits.yaml")
    assert f.settings == {"late_receiver": "synchronous"}
    ts = _task_settings(f)
    assert ts["all"]["late_receiver"] == "synchronous" and ts["cp"]["late_receiver"] == "synchronous"
    assert ts["own"]["late_receiver"] == "none"  # the step's own setting wins
    assert {ts[k]["late_receiver"] for k in ("sub/path", "sub/imbalance", "sub/waits")} == {"synchronous"}
    assert "late_receiver" not in ts["sub/report"]  # the report pass has no such setting
    assert ts["all"]["wrong_order_window"] == 100  # the others keep their defaults
    # a sub-flow's own flow setting is nearer than its parent's
    g = f.copy().set("sub.late_receiver", "blocking")
    assert _task_settings(g)["sub/imbalance"]["late_receiver"] == "blocking"
    assert _task_settings(g)["all"]["late_receiver"] == "synchronous"
    # the YAML form keeps it
    again = loads(f.to_yaml())
    assert again.settings == f.settings and again == f


def test_flow_settings_are_checked_before_anything_runs() -> None:
    bad = FLOW.replace("late_receiver: synchronous", "late_receiver: bogus\n  wrong_order_windw: 3")
    with pytest.raises(ValidationError) as e:
        loads(bad, source="waits.yaml")
    msg = str(e.value)
    assert (
        "settings.late_receiver (line 7, column 3): flow setting late_receiver='bogus' must be one of "
        "'blocking', 'synchronous', 'none' (it reaches step 'all' (pass 'wait_states'), "
        "step 'cp' (pass 'critical_path_imbalance'), step 'sub/path' (pass 'critical_path')" in msg
    )
    assert "step 'own'" not in msg  # it sets its own
    assert (
        "settings.wrong_order_windw (line 8, column 3): flow setting 'wrong_order_windw' is not a setting of any "
        "step; did you mean 'wrong_order_window'?" in msg
    )
    f = loads(FLOW, source="waits.yaml").set("wrong_order_window", -1)
    with pytest.raises(ValidationError, match="settings.wrong_order_window: flow setting wrong_order_window=-1 is "
                       "refused: setting wrong_order_window must be >= 0, got -1 \\(it reaches step 'all'"):  # fmt: skip
        compile_flow(f)
    step = loads(FLOW, source="waits.yaml").set("own.early_reduce", "never")
    assert [str(p) for p in step.problems()] == [
        "steps.own.settings.early_reduce (line 15, column 5): setting 'early_reduce' of pass 'p2p_wait_states' "
        "must be one of "
        "'latest', 'earliest', got 'never'"
    ]
    step = loads(FLOW, source="waits.yaml").set("own.wrong_order_window", -2)
    assert [str(p) for p in step.problems()] == [
        "steps.own.settings (line 15, column 5): pass 'p2p_wait_states': setting wrong_order_window must be >= 0, "
        "got -2"
    ]


def test_validate_rejects_an_unknown_value_with_the_allowed_values(capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    flow = tmp_path / "lr.yaml"
    flow.write_text(
        "perflow: 1\ninputs: {pag: PAG}\nsteps:\n  w:\n    pass: wait_states\n    inputs: {pag: input:pag}\n"
        "    settings: {late_receiver: bogus}\n"
    )
    code, out, err = cli(capsys, "validate", flow)
    assert code == 2
    assert (
        "steps.w.settings.late_receiver (line 7, column 16): setting 'late_receiver' of pass 'wait_states' "
        "must be one of 'blocking', 'synchronous', 'none', got 'bogus'" in err
    )
    code, out, err = cli(capsys, "validate", "critical_path")
    assert code == 0
    code, out, err = cli(capsys, "run", "critical_path", "--input", str(flow), "-s", "late_receiver=bogus")
    assert code == 2 and "Traceback" not in err
    assert "settings.late_receiver: flow setting late_receiver='bogus' must be one of 'blocking', 'synchronous'" in err


def _late_receiver_trace():  # type: ignore[no-untyped-def]
    # P0 prep[0,1], then a large MPI_Send[1,6] to P1, which works [0,5] before its Recv[5,6]: P0 waits [1,5]
    tb = TraceBuilder()
    tb.call(0, "prep", 0, 1)
    tb.call(0, "MPI_Send", 1, 6, send={"to": 1, "bytes": 1 << 24})
    tb.call(1, "late_recv_work", 0, 5)
    tb.call(1, "MPI_Recv", 5, 6, recv={"frm": 0, "bytes": 1 << 24})
    return tb.build()


def test_one_setting_given_for_a_flow_run_reaches_its_imbalance_table() -> None:
    from perflow.flow.api import run

    pag = _late_receiver_trace()
    first = {}
    for lr in ("blocking", "synchronous"):
        r = run("critical_path", {"pag": pag}, settings={"late_receiver": lr}, outputs=["imbalance", "summary"], jobs=1)
        first[lr] = r.outputs["imbalance"]["name"].astype(str).iloc[0]
    # by default the send waited for its late receiver, whose work is on the path; with only synchronous
    # sends counted, the MPI_Send itself is (what users saw before)
    assert first == {"blocking": "late_recv_work", "synchronous": "MPI_Send"}
