"""Scalability pass: the worked fits, ranking, settings, the LULESH scaling runs."""

from __future__ import annotations

import numpy as np
import pytest

import perflow
from perflow.errors import PassError
from perflow.passes.scalability import (
    fit_loglog,
    non_scalable_vertices,
    read_runs,
    scalability,
    scaling_data,
    short_labels,
)

from .profile_data import read_shared

SCALES = [4, 8, 16, 32]


def run(P: int, a: float, b: float, c: float) -> perflow.PAG:
    children = [
        {"name": "halving", "metrics": {"time_exc": [a] * P}},
        {"name": "growing", "metrics": {"time_exc": [b] * P}},
        {"name": "flat", "metrics": {"time_exc": [c] * P}},
    ]
    lit = {"name": "main", "metrics": {"time_exc": [0.0] * P}, "children": children}
    return perflow.PAG.from_literal(lit, attrs={"nprocs": P})


@pytest.fixture(scope="module")
def runs() -> list[perflow.PAG]:
    vals = zip(SCALES, [8, 4, 2, 1], [0.5, 0.6, 0.7, 0.8], [2, 2, 2, 2])
    return [run(P, a, b, c) for P, a, b, c in vals]


def test_fit_worked_examples() -> None:
    fit = fit_loglog(np.array(SCALES), np.array([[8, 4, 2, 1], [0.5, 0.6, 0.7, 0.8], [2, 2, 2, 2]]))
    assert fit["slope"] == pytest.approx([-1.0, 0.2257, 0.0], abs=1e-4)
    pred = np.exp2(fit["intercept"] + fit["slope"] * np.log2(64))
    assert pred == pytest.approx([0.5, 0.947, 2.0], abs=1e-3)
    assert fit["r2"][0] == pytest.approx(1.0) and fit["n_points"].tolist() == [4, 4, 4]


def test_fit_skips_zero_times() -> None:
    fit = fit_loglog(np.array(SCALES), np.array([[0, 4, 2, 0], [0, 0, 0, 3]]))
    assert fit["slope"][0] == pytest.approx(-1.0) and fit["n_points"][0] == 2
    assert np.isnan(fit["slope"][1]) and fit["n_points"][1] == 1


def test_scalability_pass(runs: list[perflow.PAG]) -> None:
    df = scalability(runs, target=64, all_vertices=True).set_index("name")
    assert df.loc["halving", "slope"] == pytest.approx(-1.0)
    assert df.loc["halving", "predicted"] == pytest.approx(0.5)
    assert df.loc["growing", "slope"] == pytest.approx(0.2257, abs=1e-4)
    assert df.loc["growing", "predicted"] == pytest.approx(0.947, abs=1e-3)
    assert df.loc["flat", "slope"] == pytest.approx(0.0, abs=1e-12)
    assert df.loc["growing", "T@4"] == 0.5 and df.loc["growing", "T@32"] == 0.8
    assert df.loc["growing", "growth"] == pytest.approx(0.947 / 0.8, abs=1e-3)
    assert "main" not in df.index  # zero time everywhere: no fit
    assert df.attrs["scales"] == SCALES and df.attrs["target"] == 64
    # only non-scalable (slope > 0): the growing one; order of the input runs does not matter
    ns = scalability(runs[::-1], target=64)
    assert ns["name"].tolist() == ["growing"] and bool(ns["non_scalable"].iloc[0])
    assert scalability(runs).attrs["target"] == 64  # default: twice the largest scale
    assert scalability(runs)["predicted"].iloc[0] == pytest.approx(0.947, abs=1e-3)


def test_scaling_data(runs: list[perflow.PAG]) -> None:
    df = scaling_data(runs[::-1])
    assert list(df.columns) == ["call_path", "name", "label", "nprocs", "time"]
    g = df[df["name"] == "growing"]
    assert g["nprocs"].tolist() == SCALES and g["time"].tolist() == [0.5, 0.6, 0.7, 0.8]
    assert len(df) == 4 * 4


def test_short_labels() -> None:
    labels = short_labels(["main/a/MPI_Send", "main/b/MPI_Send", "main/c", "x/main/c", "main"])
    assert labels.tolist() == ["a/MPI_Send", "b/MPI_Send", "main/c", "x/main/c", "main"]


def test_read_runs(runs: list[perflow.PAG], tmp_path) -> None:  # noqa: ANN001
    for i, r in enumerate(runs):
        r.save(tmp_path / f"run{i}.pag")
    again = read_runs([str(tmp_path)], pattern="*.pag")
    assert [r.attrs["nprocs"] for r in again] == SCALES
    assert read_runs([runs[0], tmp_path / "run1.pag"])[0] is runs[0]
    with pytest.raises(PassError, match="no runs matching '\\*.cali'"):
        read_runs(tmp_path, pattern="*.cali")
    with pytest.raises(PassError, match="no such file or directory"):
        read_runs([tmp_path / "missing"])


def test_ranking_and_thresholds(runs: list[perflow.PAG]) -> None:
    df = scalability(runs, slope_threshold=-0.5, target=64)
    assert df["name"].tolist() == ["flat", "growing"]  # predicted 2.0 > 0.947
    assert scalability(runs, slope_threshold=-0.5, rank_by="slope")["name"].tolist() == ["growing", "flat"]
    assert scalability(runs, slope_threshold=-2, k=1)["name"].tolist() == ["flat"]
    vs = non_scalable_vertices(runs, slope_threshold=-0.5)
    assert vs.pag is runs[-1] and vs.names() == ["flat", "growing"]


def test_scales_setting(runs: list[perflow.PAG]) -> None:
    df = scalability(runs, scales=[1, 2, 4, 8], target=16, all_vertices=True).set_index("name")
    assert df.loc["halving", "slope"] == pytest.approx(-1.0)
    assert df.loc["halving", "predicted"] == pytest.approx(0.5)
    for r, n in zip(runs, [10, 20, 40, 80]):
        r.attrs["ranks_used"] = n
    df = scalability(runs, scale_key="ranks_used", target=160, all_vertices=True).set_index("name")
    assert df.loc["halving", "predicted"] == pytest.approx(0.5)


def test_errors(runs: list[perflow.PAG]) -> None:
    with pytest.raises(PassError, match="needs runs at two or more scales, got 1"):
        scalability(runs[:1])
    with pytest.raises(PassError, match="at least two distinct process counts"):
        scalability(runs[:2], scales=[8, 8])
    with pytest.raises(PassError, match="3 scales given for 4 runs"):
        scalability(runs, scales=[1, 2, 3])
    with pytest.raises(PassError, match="run has no attribute 'cores'"):
        scalability(runs, scale_key="cores")
    with pytest.raises(PassError, match="rank_by must be one of"):
        scalability(runs, rank_by="r2")


def test_zero_times() -> None:
    # "gone" has no time at the two smallest scales: fitted on the other two, or skipped with complete_only
    pags = []
    for P, t in zip(SCALES, [0.0, 0.0, 1.0, 2.0]):
        lit = {
            "name": "main",
            "metrics": {"time_exc": [1.0] * P},
            "children": [{"name": "gone", "metrics": {"time_exc": [t] * P}}],
        }
        pags.append(perflow.PAG.from_literal(lit, attrs={"nprocs": P}))
    df = scalability(pags, all_vertices=True).set_index("name")
    assert df.loc["gone", "n_points"] == 2 and df.loc["gone", "slope"] == pytest.approx(1.0)
    assert "gone" not in scalability(pags, all_vertices=True, complete_only=True)["name"].tolist()


def test_process_count_from_data() -> None:
    # no nprocs attribute: the number of processes with data is the scale
    pags = [perflow.PAG.from_literal({"name": "f", "metrics": {"time_exc": [t] * P}}) for P, t in ((2, 4.0), (4, 2.0))]
    df = scalability(pags, all_vertices=True)
    assert df["slope"].iloc[0] == pytest.approx(-1.0) and df.attrs["scales"] == [2, 4]


LULESH = ["27_cores.cali", "64_cores.cali", "125_cores.cali", "216_cores.cali", "343_cores.cali"]


def test_lulesh_caliper_runs() -> None:
    runs = [read_shared("scaling", "lulesh-caliper", f, format="caliper") for f in LULESH]
    df = scalability(runs, all_vertices=True, target=512)
    assert df.attrs["scales"] == [27, 64, 125, 216, 343]
    assert len(df) > 10
    assert df["n_points"].max() == 5
    ns = scalability(runs, target=512)
    assert ns["non_scalable"].all() and (ns["slope"] > 0).all()


def test_fit_quality_worked_example() -> None:
    # log2 T = [0, 2, 0, 2] at log2 P = [2, 3, 4, 5]: b = 0.4, a = -0.4, fit [0.4, 0.8, 1.2, 1.6],
    # SSR 3.2, SST 4: r2 = 0.2; the worst point is P = 16 where T_fit / T = 2^1.2
    fit = fit_loglog(np.array(SCALES), np.array([[1, 4, 1, 4], [8, 4, 2, 1]]))
    assert fit["slope"][0] == pytest.approx(0.4) and fit["intercept"][0] == pytest.approx(-0.4)
    assert fit["r2"][0] == pytest.approx(0.2)
    assert fit["rel_error"][0] == pytest.approx(2**1.2 - 1)
    assert fit["rel_error"][1] == pytest.approx(0.0, abs=1e-12) and fit["r2"][1] == pytest.approx(1.0)


def test_poor_fits_are_flagged_in_table_and_report() -> None:
    vals = zip(SCALES, [8, 4, 2, 1], [1, 4, 1, 4], [0.5, 0.6, 0.7, 0.8])
    runs = [run(P, a, b, c) for P, a, b, c in vals]  # "growing" is now the zig-zag, "flat" the steady growth
    df = scalability(runs, target=64).set_index("name")
    assert list(df.index) == ["growing", "flat"]  # both have slope > 0
    assert bool(df.loc["growing", "poor_fit"]) and df.loc["growing", "r2"] == pytest.approx(0.2)
    assert not bool(df.loc["flat", "poor_fit"]) and df.loc["flat", "r2"] > 0.95
    assert df.attrs["min_r2"] == 0.8
    note = df.attrs["note"]
    assert "1 of 2 fits are poor: main/growing (r2 0.20)" in note
    # the rendered table (what the flow's report prints) carries the note
    from perflow.passes.report import render_table

    text = render_table(scalability(runs, target=64), columns=["call_path", "slope", "r2", "poor_fit"])
    assert "poor_fit" in text.splitlines()[0] and "1 of 2 fits are poor" in text
    # a looser threshold accepts the zig-zag
    assert not scalability(runs, target=64, min_r2=0.1)["poor_fit"].any()
    # two runs: fits are exact, quality cannot be judged, nothing flagged
    two = scalability(runs[:2], target=64, all_vertices=True)
    assert not two["poor_fit"].any() and "cannot be judged" in two.attrs["note"]


def test_figure_shows_the_flagged_call_paths() -> None:
    from perflow.passes.plot_scaling import plot_scaling

    vals = zip(SCALES, [8, 4, 2, 1], [1, 4, 1, 4], [0.5, 0.6, 0.7, 0.8])
    runs = [run(P, a, b, c) for P, a, b, c in vals]
    table = scalability(runs, target=64)  # flags growing and flat; "halving" has the most time at P = 4
    fig = plot_scaling(scaling_data(runs), table, label="label", k=6)
    labels = [ln.get_label() for ln in fig.axes[0].get_lines() if not ln.get_label().startswith("_")]
    measured = [lab for lab in labels if not lab.endswith(" fit") and "@" not in lab]
    assert measured == ["growing (poor fit, r2 0.20)", "flat"]
    # without the table: the costliest at the largest scale, as before
    fig = plot_scaling(scaling_data(runs), label="label", k=1)
    assert [ln.get_label() for ln in fig.axes[0].get_lines()][0] == "growing"
