"""The ScalAna paradigm: scaling loss, non-scalable paths, causal paths and the scalana flow on runs with a known cause."""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import pytest

import perflow
from perflow.errors import PassError
from perflow.passes.backtrack import backtrack
from perflow.passes.scalability_scalana import causal_paths, non_scalable_paths, scaling_loss

from .profile_data import read_shared


def test_scaling_loss_worked_example() -> None:
    """The module docstring's example: strong scaling at P = 2, 4, 8, target 16."""
    s = np.array([2.0, 4, 8])
    times = np.array([[0.4, 0.2, 0.1], [0.08, 0.16, 0.32], [np.nan, 0.1, 0.1]])
    d = scaling_loss(s, times, 16.0, np.array([0.05, 0.64, 0.1]), "strong")
    np.testing.assert_allclose(d["ideal"], [0.1, 0.02, 0.05])  # the third from its first scale, 4
    np.testing.assert_allclose(d["loss"], [0.0, 0.30, 0.05], atol=1e-12)
    np.testing.assert_allclose(d["ideal_target"], [0.05, 0.01, 0.025])
    np.testing.assert_allclose(d["model_loss"], [0.0, 0.63, 0.075], atol=1e-12)
    w = scaling_loss(s, times, 16.0, np.array([0.05, 0.64, 0.1]), "weak")
    np.testing.assert_allclose(w["loss"], [-0.3, 0.24, 0.0], atol=1e-12)
    with pytest.raises(PassError, match="mode must be one of strong, weak"):
        scaling_loss(s, times, 16.0, np.zeros(3), "linear")


def profile_run(P: int) -> perflow.PAG:
    """A profile at P processes: ``work`` 0.4/P everywhere, ``serial`` 0.04·P on rank 0 only, ``wait`` on the others."""
    serial = 0.04 * P
    lit = {
        "name": "main",
        "metrics": {"time_exc": [0.001] * P},
        "children": [
            {"name": "work", "metrics": {"time_exc": [0.4 / P] * P}},
            {"name": "serial", "metrics": {"time_exc": [serial] + [0.0] * (P - 1)}},
            {"name": "MPI_Bcast", "metrics": {"time_exc": [0.0] + [serial] * (P - 1)}},
        ],
    }
    return perflow.PAG.from_literal(lit, attrs={"nprocs": P})


def test_non_scalable_paths_on_profiles() -> None:
    runs = [profile_run(P) for P in (2, 4, 8)]
    res = non_scalable_paths(runs)
    t = res["table"].set_index("name")
    assert t.index.tolist() == ["MPI_Bcast", "serial"]  # the same loss; ties by call path
    # serial: 0.08, 0.16, 0.32; ideal at 8 = 0.08 * 2 / 8 = 0.02: loss 0.30 s
    assert t.loc["serial", "loss"] == pytest.approx(0.30)
    assert t.loc["serial", "model"] == "0.04·p" and t.loc["serial", "lead"] == "p"
    assert t.loc["serial", "model_loss"] == pytest.approx(0.64 - 0.01)
    assert bool(t.loc["serial", "by_loss"]) and bool(t.loc["serial", "by_model"])
    # run time of the largest run: the slowest process, rank 0: 0.001 + 0.05 + 0.32
    assert res["table"].attrs["run_time"] == pytest.approx(0.371)
    assert t.loc["serial", "share"] == pytest.approx(0.30 / 0.371)
    m = res["models"].set_index("name")
    assert m.loc["work", "model"] == "0.4·p^-1" and not m.loc["work", "non_scalable"]
    assert m.loc["work", "loss"] == pytest.approx(0.0, abs=1e-12)
    assert res["largest"] is runs[2] and res["vertices"].names() == ["MPI_Bcast", "serial"]
    # weak scaling: the ideal is constant, the strong-scaling part is no longer ideal
    weak = non_scalable_paths(runs, mode="weak")["models"].set_index("name")
    assert weak.loc["work", "loss"] == pytest.approx(0.05 - 0.2)
    assert weak.loc["serial", "loss"] == pytest.approx(0.24)
    # a larger share: no measured loss reaches 90 % of the run, the predicted one (0.63 s at P = 16) does
    big = non_scalable_paths(runs, min_share=0.9)["table"]
    assert len(big) == 2 and big["by_model"].all() and not big["by_loss"].any()
    with pytest.raises(PassError, match="mode must be one of strong, weak"):
        non_scalable_paths(runs, mode="amdahl")
    with pytest.raises(PassError, match="min_share"):
        non_scalable_paths(runs, min_share=1.5)


@functools.cache
def serial_rank0_traces() -> tuple[perflow.PAG, ...]:
    """Synthetic runs at 4, 8, 16 ranks, strong scaling: compute 0.04/P per iteration, plus 4 ms on rank 0."""
    out = []
    for P in (4, 8, 16):
        c = 0.04 / P
        pag = perflow.synthetic.trace(
            nprocs=P, iterations=20, compute_time=c, slow_rank=0, slow_factor=1 + 0.004 / c, noise=0.01, seed=P
        )
        pag.attrs["nprocs"] = P
        out.append(pag)
    return tuple(out)


def test_scalana_flow_names_the_known_cause() -> None:
    res = perflow.run("scalana", runs=list(serial_rank0_traces()), jobs=1)
    res.raise_for_status()
    ns = res["non_scalable"]
    assert set(ns["name"]) == {"MPI_Allreduce", "MPI_Waitall", "compute"}
    comp = ns.set_index("name").loc["compute"]
    assert comp["model"].endswith("·p^-1")  # 20 x (0.004 + 0.04 / p): the serial part is the constant
    assert float(comp["model"].split(" + ")[0]) == pytest.approx(0.08, rel=0.05)
    causes = res["causes"]
    assert len(causes) == 3
    assert (causes["cause"] == "compute").all() and (causes["cause_process"] == 0).all()
    assert (causes["source"] == "synthetic.c:50").all()
    walk = causes.set_index("call_path").loc["main/timestep/MPI_Allreduce", "walk"]
    assert walk.startswith("MPI_Allreduce (rank ") and "<-collective- MPI_Allreduce" in walk
    assert walk.endswith("<-program- compute (rank 0)")
    report = res["report"]
    assert "# perflow: scalana" in report and "synthetic.c:50" in report and "compute" in report
    assert res["figure"] is not None and isinstance(res["models"], pd.DataFrame)


def test_causal_paths_joins_symptoms_and_causes() -> None:
    runs = [profile_run(P) for P in (2, 4, 8)]
    ns = non_scalable_paths(runs)
    walk = backtrack(ns["largest"], ns["vertices"])
    cp = causal_paths(ns["table"], walk["root_causes"], walk["paths"]).set_index("call_path")
    # a profile has no communication edges: the serial part on rank 0 is its own cause (only rank 0 runs it)
    assert cp.loc["main/serial", "cause"] == "serial" and cp.loc["main/serial", "cause_process"] == 0
    assert cp.loc["main/serial", "walk"] == "serial (rank 0)" and cp.loc["main/serial", "steps"] == 0
    assert cp.loc["main/serial", "loss"] == pytest.approx(0.30)
    assert "traced back to a root cause" in cp.attrs["note"]
    with pytest.raises(PassError, match="causal_paths: paths lacks the column\\(s\\) via"):
        causal_paths(ns["table"], walk["root_causes"], walk["paths"].drop(columns="via"))


def test_scalana_on_the_lulesh_profiles() -> None:
    """Caliper profiles (aggregated over ranks by Caliper, weak scaling): models and losses, no parallel view to walk."""
    from tests.conftest import shared

    d = shared("scaling", "lulesh-caliper")
    res = perflow.run("scalana", runs=[str(d)], settings={"paths.mode": "weak"}, jobs=1)
    res.raise_for_status()
    ns = res["non_scalable"]
    assert ns.attrs["mode"] == "weak" and ns.attrs["scales"] == [27, 64, 125, 216, 343]
    # the time-step reduction loses the most: 7.9 s at 27 ranks, 16.4 s at 343
    top = ns.iloc[0]
    assert top["call_path"] == "main/lulesh.cycle/TimeIncrement/MPI_Allreduce"
    assert top["loss"] == pytest.approx(16.423965 - 7.861510, rel=1e-5)
    assert bool(top["by_loss"]) and not bool(top["by_model"])  # its model is a poor fit
    assert set(res["causes"]["cause"]) == {""}  # one process per profile: nothing stands out to backtrack to
    assert "Scaling of the non-scalable call paths" in res["report"]


def test_lulesh_profiles_by_reading() -> None:
    runs = [read_shared("scaling", "lulesh-caliper", f"{n}_cores.cali", format="caliper") for n in (27, 125, 343)]
    ns = non_scalable_paths(runs, mode="weak")
    assert ns["largest"].attrs["nprocs"] == 343 and len(ns["vertices"]) == len(ns["table"])


def cg_run(P: int, init: float) -> perflow.PAG:
    """NPB CG's profile shape at P ranks: ``MPI_Init`` as measured (0.35/0.36/0.64 s), ``conj_grad`` 2.4/P s."""
    lit = {
        "name": "cg",
        "metrics": {"time_exc": [0.001] * P},
        "children": [
            {"name": "MPI_Init", "metrics": {"time_exc": [init] * P}},
            {"name": "conj_grad", "metrics": {"time_exc": [2.4 / P] * P}},
        ],
    }
    return perflow.PAG.from_literal(lit, attrs={"nprocs": P})


def test_an_extrapolation_from_a_poor_fit_is_marked_not_ranked() -> None:
    """The issue's case: NPB CG at 2/4/8 ranks, MPI_Init 0.35, 0.36, 0.64 s.

    The best of the 75 one-term shapes through three points is
    ``0.3467 + 6.362e-05·p^3·log2(p)^2`` (SMAPE 0.55 %, adjusted R² 0.9994),
    which predicts 4.516 s at 16 ranks. Leave-one-out, by hand: without P=8
    the shape t = p^3 log2(p)^2 (t = 8, 256 at P = 2, 4) through 0.35, 0.36
    gives c1 = 0.01 / 248 and predicts 0.35 + 0.01 (4608 - 8) / 248 = 0.5355 s
    at P = 8 against 0.64: SMAPE 2·0.1045 / 1.1755 = 17.78 % (extrap_smape).
    Without P=4: 0.35 + 0.29 (256 - 8) / 4600 = 0.36563 against 0.36 (1.55 %);
    without P=2: 0.36 - 0.28 (256 - 8) / 4352 = 0.34404 against 0.35 (1.72 %);
    cv_smape = (17.78 + 1.55 + 1.72) / 3 = 7.02 %.
    """
    runs = [cg_run(P, t) for P, t in ((2, 0.35), (4, 0.36), (8, 0.64))]
    res = non_scalable_paths(runs)
    m = res["models"].set_index("name")
    init = m.loc["MPI_Init"]
    assert init["model"] == "0.3467 + 6.362e-05·p^3·log2(p)^2"
    assert init["smape"] == pytest.approx(0.5507, abs=1e-3) and init["ar2"] > 0.999  # a "good" fit by both
    pred8 = 0.35 + 0.01 * (4608 - 8) / 248
    assert init["extrap_smape"] == pytest.approx(100 * 2 * (0.64 - pred8) / (0.64 + pred8), rel=1e-9)
    by_hand = [
        2 * abs(0.35 + 0.29 * 248 / 4600 - 0.36) / (0.35 + 0.29 * 248 / 4600 + 0.36),
        2 * abs(0.36 - 0.28 * 248 / 4352 - 0.35) / (0.36 - 0.28 * 248 / 4352 + 0.35),
        2 * (0.64 - pred8) / (0.64 + pred8),
    ]
    assert init["cv_smape"] == pytest.approx(100 * np.mean(by_hand), rel=1e-9)
    assert bool(init["poor_fit"]) and init["fit"] == "extrapolation error 17.8 % > 10 %"
    assert init["predicted"] == pytest.approx(4.516, abs=1e-3)  # what is no longer reported as a prediction
    assert init["extrapolation"] == "poor fit: extrapolation error 17.8 % > 10 %"
    assert not bool(init["by_model"])  # the 4.4 s "loss at 16 ranks" selects nothing ...
    # ... and ranks nothing: MPI_Init is non-scalable by its measured loss alone (0.64 - 0.35·2/8 = 0.5525 s)
    assert bool(init["by_loss"]) and init["loss"] == pytest.approx(0.5525)
    work = m.loc["conj_grad"]
    assert work["model"] == "2.4·p^-1" and not bool(work["poor_fit"]) and work["fit"] == ""
    assert work["extrap_smape"] == pytest.approx(0.0, abs=1e-9)
    # the flow's text table shows the marked extrapolation, not a predicted loss
    from perflow.passes.report import render_table

    text = render_table(res["table"], format="text", columns=["call_path", "extrapolation", "loss"])
    assert "poor fit: extrapolation error 17.8 % > 10 %" in text and "4.4" not in text


def test_the_figure_names_why_a_fit_is_poor() -> None:
    from perflow.passes.plot_scaling import plot_scaling
    from perflow.passes.scalability import scaling_data

    runs = [cg_run(P, t) for P, t in ((2, 0.35), (4, 0.36), (8, 0.64))]
    res = non_scalable_paths(runs)
    fig = plot_scaling(scaling_data(runs), res["models"], label="name")
    labels = [ln.get_label() for ax in fig.axes for ln in ax.get_lines()]
    assert any("MPI_Init" in lb and "poor fit, extrapolation error 17.8 % > 10 %" in lb for lb in labels), labels
