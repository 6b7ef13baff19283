"""The scaling_models pass: known models over PAG runs, two parameters, errors, the figure, the LULESH runs."""

from __future__ import annotations

import numpy as np
import pytest

import perflow
from perflow.errors import PassError
from perflow.passes.scalability import scaling_data
from perflow.passes.scalability_models import run_parameters, scaling_models

from .profile_data import read_shared

SCALES = [2, 4, 8, 16, 32]


def run(P: int, size: float = 1.0) -> perflow.PAG:
    """Per process: ``solve`` 8/P (strong scaling), ``reduce`` 0.01·P·log2(P), ``io`` 0.5·size."""
    children = [
        {"name": "solve", "metrics": {"time_exc": [8.0 / P] * P}},
        {"name": "reduce", "metrics": {"time_exc": [0.01 * P * np.log2(P)] * P}},
        {"name": "io", "metrics": {"time_exc": [0.5 * size] * P}},
    ]
    lit = {"name": "main", "metrics": {"time_exc": [0.0] * P}, "children": children}
    return perflow.PAG.from_literal(lit, attrs={"nprocs": P, "size": size, "source": f"run-{P}-{size:g}"})


@pytest.fixture(scope="module")
def runs() -> list[perflow.PAG]:
    return [run(P) for P in SCALES]


def test_known_models(runs: list[perflow.PAG]) -> None:
    df = scaling_models(runs[::-1], negative=True).set_index("name")  # the order of the runs does not matter
    assert df.loc["solve", "model"] == "8·p^-1"
    assert df.loc["reduce", "model"] == "0.01·p·log2(p)"
    assert df.loc["io", "model"] == "0.5" and df.loc["io", "lead"] == "1"
    assert "main" not in df.index  # no time in any run: no model
    assert df.loc["reduce", "predicted"] == pytest.approx(0.01 * 64 * 6)  # target: twice the largest scale
    assert df.loc["reduce", "growth"] == pytest.approx(64 * 6 / (32 * 5))
    assert df.loc["solve", "growth"] == pytest.approx(0.5)
    assert not df["poor_fit"].any() and (df["n_points"] == 5).all()
    assert df.loc["reduce", "T@2"] == pytest.approx(0.02) and df.loc["reduce", "T@32"] == pytest.approx(1.6)
    assert df.loc["reduce", "i1_p"] == 1 and df.loc["reduce", "j1_p"] == 1
    assert df.index.tolist()[0] == "reduce"  # the largest prediction first
    assert df.attrs["scales"] == SCALES and df.attrs["params"] == ["p"] and df.attrs["target"] == 64
    assert "0 of 3 fits are poor" in df.attrs["note"]
    assert df.attrs["units"]["smape"] == "%"


def test_two_parameters_and_constant_parameters() -> None:
    runs = [run(P, size) for P in (2, 4, 8) for size in (1, 2, 4)]
    df = scaling_models(runs, params=["size"], negative=True).set_index("name")
    assert df.loc["io", "model"] == "0.5·size"
    assert df.loc["solve", "model"] == "8·p^-1"
    assert df.attrs["params"] == ["p", "size"] and "T@p=8,size=4" in df.columns
    # the same size everywhere: the parameter is dropped, with a note
    same = scaling_models([run(P, 2.0) for P in SCALES], params=["size"])
    assert same.attrs["params"] == ["p"] and "parameter 'size' is 2 in every run" in same.attrs["note"]


def test_run_parameters_errors(runs: list[perflow.PAG]) -> None:
    order, X, names, notes = run_parameters(runs[::-1])
    assert X[:, 0].tolist() == SCALES and names == ["p"] and order.tolist() == [4, 3, 2, 1, 0]
    with pytest.raises(PassError, match="run-2-1: the run has no attribute 'problem'"):
        run_parameters(runs, params=["problem"])
    bad = run(4)
    bad.attrs["size"] = "large"
    with pytest.raises(PassError, match="run-4-1: run attribute 'size' is 'large', not a number"):
        run_parameters([bad], params=["size"])
    with pytest.raises(PassError, match="three or more scales, got 2"):
        scaling_models(runs[:2])
    with pytest.raises(PassError, match="three or more distinct process counts"):
        scaling_models(runs[:3], scales=[4, 4, 8])


def test_figure_draws_the_models(runs: list[perflow.PAG]) -> None:
    from perflow.passes.plot_scaling import plot_scaling

    table = scaling_models(runs, negative=True)
    fig = plot_scaling(scaling_data(runs), table, label="label", k=3)
    lines = {ln.get_label(): ln for ln in fig.axes[0].get_lines()}
    assert {"reduce: 0.01·p·log2(p)", "solve: 8·p^-1", "io: 0.5"} <= set(lines)
    x, y = np.asarray(lines["reduce fit"].get_xdata()), np.asarray(lines["reduce fit"].get_ydata())
    np.testing.assert_allclose(y, 0.01 * x * np.log2(x))  # the model, on a fine grid up to the target
    assert len(x) > 10 and x.max() == 64
    assert lines["reduce @ P=64"].get_ydata()[0] == pytest.approx(0.01 * 64 * 6)


LULESH = ["27_cores.cali", "64_cores.cali", "125_cores.cali", "216_cores.cali", "343_cores.cali"]


def test_lulesh_caliper_runs() -> None:
    runs = [read_shared("scaling", "lulesh-caliper", f, format="caliper") for f in LULESH]
    df = scaling_models(runs, params=["problem_size"]).set_index("call_path")
    assert df.attrs["scales"] == [27, 64, 125, 216, 343] and (df["n_points"] == 5).all()
    assert len(df) == 45  # every call path has time
    assert "parameter 'problem_size' is 30 in every run" in df.attrs["note"]  # weak scaling: size per rank fixed
    # the compute kernels of a weak-scaling run are flat; the start-up communicator split grows
    force = "main/lulesh.cycle/LagrangeLeapFrog/LagrangeNodal/CalcForceForNodes/CalcVolumeForceForElems"
    kernels = df[df.index.str.startswith(force + "/")]
    assert len(kernels) >= 2 and (kernels["lead"] == "1").any()
    assert df.loc["MPI_Comm_split", "lead"] == "p^(7/4)" and df.loc["MPI_Comm_split", "growth"] > 3
    # the noisy time-step reduction: a constant, flagged as a poor fit
    ar = df.loc["main/lulesh.cycle/TimeIncrement/MPI_Allreduce"]
    assert ar["model"] == "11.62" and bool(ar["poor_fit"]) and ar["smape"] > 10
    assert 15 <= int(df["poor_fit"].sum()) <= 25
