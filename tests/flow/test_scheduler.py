"""The scheduler: order, concurrency without barriers, failure isolation, release, memoisation, hooks."""

from __future__ import annotations

import gc
import threading

import pytest

import perflow
from perflow import Flow
from perflow.errors import FlowError, PassError, StepError, ValidationError

from . import helpers
from .helpers import CALLS, EVENTS


def wide_flow(n: int = 12) -> Flow:
    """x -> n branches of inc chains of different lengths -> pairwise sums."""
    f = Flow("wide")
    x = f.input("x", int)
    ends = []
    for i in range(n):
        r = x
        for j in range(i % 4 + 1):
            r = f.step(f"b{i}_{j}", "t_inc", r, by=i + j)
        ends.append(r)
    total = ends[0]
    for i, e in enumerate(ends[1:]):
        total = f.step(f"sum{i}", "t_add", total, e, offset=i)
        f.output(f"partial{i}", total)
    f.output("total", total)
    return f


def test_sequential_and_concurrent_runs_agree():
    f = wide_flow()
    seq = perflow.run(f, x=3, jobs=1)
    par = perflow.run(f, x=3, jobs=4)
    assert seq.outputs == par.outputs and len(seq.outputs) == 12
    assert seq.ok and par.ok
    assert (seq.steps["status"] == "done").all() and (par.steps["status"] == "done").all()
    # worked by hand: branch i adds sum(i + j for j < i % 4 + 1); the sums add offsets 0..10
    expected = sum(3 + sum(i + j for j in range(i % 4 + 1)) for i in range(12)) + sum(range(11))
    assert seq["total"] == expected


def test_steps_run_in_dependency_order_and_report_timing():
    order = []

    class Recorder:
        def before_step(self, ev):
            order.append(ev.step)

    r = perflow.run(wide_flow(4), x=0, jobs=1, hooks=[Recorder()])
    for i in range(4):
        chain = [s for s in order if s.startswith(f"b{i}_")]
        assert chain == sorted(chain)
    assert order.index("sum0") > order.index("b1_1") and order.index("sum2") > order.index("b3_3")
    assert list(r.steps.columns) == ["pass", "status", "start", "seconds", "error"]
    assert (r.steps["seconds"] >= 0).all() and r.seconds >= r.steps["seconds"].max()


def test_a_step_starts_as_soon_as_its_inputs_are_ready():
    """No level barrier: 'after' (level 1) must start while 'slow' (level 0) still runs.

    'slow' waits for an event that only 'after' sets; with a barrier between
    levels this flow could not finish (t_wait raises after its timeout).
    """
    EVENTS["go"] = threading.Event()
    f = Flow("nobarrier")
    x = f.input("x", int)
    slow = f.step("slow", "t_wait", x, event="go", timeout=20.0)
    fast = f.step("fast", "t_inc", x)
    after = f.step("after", "t_signal", fast, event="go")
    f.output("slow", slow)
    f.output("after", after)
    r = perflow.run(f, x=1, jobs=2)
    r.raise_for_status()
    assert r["slow"] == 1 and r["after"] == 2


def test_failure_isolation():
    f = Flow("fails")
    x = f.input("x", int)
    bad = f.step("bad", "t_fail", x, message="broken input")
    f.step("down1", "t_inc", bad)
    f.step("down2", "t_add", "down1", x)
    good = f.step("good", "t_inc", x)
    f.step("good2", "t_inc", good)
    f.output("good", "good2")
    f.output("down", "down2")
    for jobs in (1, 3):
        r = perflow.run(f, x=1, jobs=jobs)
        assert not r.ok and r.failed == ["bad"] and r.skipped == ["down1", "down2"]
        assert r["good"] == 3
        assert dict(r.steps["status"]) == {
            "bad": "failed",
            "down1": "skipped",
            "down2": "skipped",
            "good": "done",
            "good2": "done",
        }
        assert r.steps.at["bad", "error"] == "ValueError: broken input"
        err = r.errors["bad"]
        assert isinstance(err, StepError) and isinstance(err.__cause__, ValueError)
        assert err.step == "bad" and err.pass_name == "t_fail"
        assert str(err) == "step 'bad' (pass 't_fail') failed: ValueError: broken input"
        assert err.__notes__ == ["inputs: x=1; settings: message='broken input'"]
        assert err.__cause__.__traceback__ is not None  # the pass's own frames are kept
        with pytest.raises(StepError, match="step 'bad'") as ei:
            r.raise_for_status()
        assert ei.value is err
        with pytest.raises(
            FlowError, match="output 'down' was not computed: step 'down2' was skipped because 'bad' failed"
        ):
            r["down"]


def test_reading_the_output_of_a_failed_step_raises_its_error():
    f = Flow()
    f.output("bad", f.step("bad", "t_fail", f.step("c", "t_const")))
    r = perflow.run(f)
    with pytest.raises(StepError) as ei:
        r["bad"]
    assert isinstance(ei.value.__cause__, ValueError)
    with pytest.raises(KeyError, match="no output 'bda'; did you mean 'bad'"):
        r["bda"]


def test_passes_that_break_their_declared_outputs_fail_their_step():
    f = Flow()
    c = f.step("c", "t_const")
    f.step("keys", "t_wrong_keys", c)
    f.step("type", "t_wrong_type", c)
    r = perflow.run(f, jobs=1)
    assert isinstance(r.errors["keys"].__cause__, PassError)
    assert "must return a dict with the keys ['a', 'b'], got ['a']" in str(r.errors["keys"])
    assert "returned int for output 'result', declared as DataFrame" in str(r.errors["type"])


def test_intermediates_are_released_once_consumed():
    helpers.BOXES.clear()
    f = Flow("boxes")
    x = f.input("x", int)
    b0 = f.step("b0", "t_box", x)
    b1 = f.step("b1", "t_unbox_next", b0)
    b2 = f.step("b2", "t_unbox_next", b1, dead=0)  # b0 must be gone when b2 runs
    b3 = f.step("b3", "t_unbox_next", b2, dead=1)
    f.output("last", b3)
    for jobs in (1, 2):
        helpers.BOXES.clear()
        r = perflow.run(f, x=5, jobs=jobs)
        r.raise_for_status()
        gc.collect()
        assert [ref() is None for ref in helpers.BOXES] == [True, True, True, False]
        assert r["last"].v == 8
        del r
        gc.collect()
        assert helpers.BOXES[3]() is None


def test_keep_retains_every_intermediate():
    helpers.BOXES.clear()
    f = Flow("boxes")
    f.output("b1", f.step("b1", "t_unbox_next", f.step("b0", "t_box", f.input("x", int))))
    r = perflow.run(f, x=1, keep=True)
    gc.collect()
    assert all(ref() is not None for ref in helpers.BOXES)
    assert r.intermediates["b0"]["result"].v == 1


def test_identical_steps_are_computed_once_per_run():
    CALLS.clear()
    f = Flow("twice")
    x = f.input("x", int)
    a = f.step("a", "t_inc", x, by=2)
    b = f.step("b", "t_inc", x, by=2)
    c = f.step("c", "t_inc", x, by=3)
    s1 = f.step("s1", "t_side", x)
    s2 = f.step("s2", "t_side", x)
    f.step("sum", "t_add", f.step("ab", "t_add", a, b), f.step("cs", "t_add", c, f.step("ss", "t_add", s1, s2)))
    r = perflow.run(f, x=1)
    assert r["sum"] == 3 + 3 + 4 + 2
    assert CALLS["t_inc"] == 2 and CALLS["t_side"] == 2
    assert r.steps.at["b", "status"] == "shared" and r.steps.at["s2", "status"] == "done"


def test_hooks_see_every_step_and_a_broken_hook_does_not_break_the_run(caplog):
    events = []

    class Hook:
        def on_start(self, plan):
            events.append(("start", len(plan.tasks)))

        def before_step(self, ev):
            events.append(("before", ev.step, ev.number, ev.total))

        def after_step(self, ev):
            events.append(("after", ev.step, ev.status))

        def on_finish(self, result):
            events.append(("finish", result.ok))

    class Broken:
        def after_step(self, ev):
            raise RuntimeError("display crashed")

    f = Flow()
    f.step("b", "t_inc", f.step("a", "t_const"))
    r = perflow.run(f, hooks=[Hook(), Broken()], jobs=1)
    assert r.ok and r["b"] == 2
    assert events == [
        ("start", 2),
        ("before", "a", 1, 2),
        ("after", "a", "done"),
        ("before", "b", 2, 2),
        ("after", "b", "done"),
        ("finish", True),
    ]
    assert "display crashed" in caplog.text


def test_subflows_are_inlined():
    inner = Flow("inner")
    v = inner.input("v", int)
    inner.output("w", inner.step("d", "t_add", v, inner.step("k", "t_const", value=10)))
    outer = Flow("outer")
    x = outer.input("x", int)
    s1 = outer.step("s1", inner, v=x)
    s2 = outer.step("s2", inner, v=s1)
    outer.output("out", s2)
    r = perflow.run(outer, x=1, jobs=2)
    assert r["out"] == 21
    assert list(r.steps.index) == ["s1/k", "s1/d", "s2/k", "s2/d"]
    assert r.steps.at["s2/k", "status"] == "shared"


def test_flow_inputs_are_checked_and_converted(tmp_path):
    f = Flow("inputs")
    f.output("y", f.step("y", "t_opt", f.input("x", int), f.input("y", int, default=1), scale=0.5))
    assert perflow.run(f, x=3)["y"] == 2.0
    assert perflow.run(f, {"x": 3, "y": 5})["y"] == 4.0
    with pytest.raises(ValidationError) as ei:
        perflow.run(f, xx=3, y="five")
    assert ei.value.problems == [
        "flow 'inputs' has no input 'xx'; did you mean 'x'? (inputs: x, y)",
        "flow input 'x' (int) is required",
        "flow input 'y' expects int, got str",
    ]
    g = Flow("pag")
    g.output("hot", g.step("hot", "t_hotspot", g.input("pag", perflow.PAG), k=2))
    path = perflow.synthetic.trace(nprocs=2, iterations=2).save(tmp_path / "t.pag")
    assert len(perflow.run(g, pag=str(path))["hot"]) == 2


def test_settings_override_and_invalid_overrides():
    f = wide_flow(2)
    assert perflow.run(f, x=0, settings={"sum0.offset": 100})["total"] == perflow.run(f, x=0)["total"] + 100
    with pytest.raises(
        ValidationError, match="steps.sum0.settings.offset: setting 'offset' of pass 't_add' expects int"
    ):
        perflow.run(f, x=0, settings={"sum0.offset": "many"})


def test_running_a_shipped_flow_by_name(tmp_path):
    path = perflow.synthetic.trace(nprocs=2, iterations=2).save(tmp_path / "t.pag")
    r = perflow.run("convert", data=path)
    assert isinstance(r["pag"], perflow.PAG) and r["pag"].n_vertices > 0


def test_scheduler_state_after_a_run():
    from perflow.flow.plan import FromTask, compile_flow
    from perflow.flow.scheduler import execute

    f = Flow()
    x = f.input("x", int)
    a = f.step("a", "t_inc", x)
    b = f.step("b", "t_inc", x)  # the same as a: merged
    f.step("bad", "t_fail", a)
    f.step("after", "t_inc", "bad")
    f.output("sum", f.step("sum", "t_add", a, b))
    plan = compile_flow(f)
    assert [t.key for t in plan.tasks] == ["a", "b", "bad", "after", "sum"]
    assert plan.tasks[1].same_as == 0 and plan.tasks[4].deps == {0}
    assert plan.outputs == {"sum": FromTask(4, "result")}
    r = execute(plan, {"x": 1}, jobs=1)
    assert r.status == {0: "done", 1: "shared", 2: "failed", 3: "skipped", 4: "done"}
    assert r.outputs == {"sum": 4} and r.data == {}  # every intermediate released
    assert set(r.times) == {0, 2, 4} and all(end >= start for start, end in r.times.values())
    assert list(r.errors) == [2] and r.errors[2].step == "bad"


def test_a_pass_calling_sys_exit_fails_its_step():
    @perflow.pass_(name="t_exit")
    def t_exit(x: int) -> int:
        raise SystemExit(3)

    f = Flow()
    f.step("e1", t_exit, f.step("c1", "t_const", value=1))
    f.step("e2", t_exit, f.step("c2", "t_const", value=2))
    for jobs in (1, 2):
        r = perflow.run(f, jobs=jobs)
        assert r.failed == ["e1", "e2"] and isinstance(r.errors["e1"].__cause__, SystemExit)


def test_the_executor_is_handed_in():
    """execute(..., submit=fn) runs ready tasks through fn (as Dask's get_async takes submit)."""
    from perflow.flow.plan import compile_flow
    from perflow.flow.scheduler import execute

    f = Flow()
    x = f.input("x", int)
    a, b = f.step("a", "t_inc", x), f.step("b", "t_inc", f.step("c", "t_add", x, x))
    f.output("sum", f.step("sum", "t_add", a, b))
    submitted = []

    def submit(fn, *args):  # one thread per task
        submitted.append(args[1])  # fn is the step's context's run, args[0] the work, args[1] the task
        threading.Thread(target=fn, args=args).start()

    r = execute(compile_flow(f), {"x": 1}, jobs=2, submit=submit)
    assert r.outputs == {"sum": 5} and not r.errors  # (1 + 1) + (1 + 1 + 1)
    # a and c could run together: both went to the executor; the rest ran alone, in the calling thread
    assert len(submitted) == 2
