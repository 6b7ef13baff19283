"""Extra-P performance models: worked fits, recovery of known models (exact, with noise), guards, two parameters."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perflow.errors import PassError
from perflow.passes.models import (
    LOG_EXPONENTS,
    POLY_EXPONENTS,
    _term_values,
    building_blocks,
    fit_models,
    term_text,
)

P5 = np.array([2.0, 4, 8, 16, 32])


def test_building_blocks_are_the_pmnf_sets() -> None:
    b = building_blocks()
    assert len(POLY_EXPONENTS) == 19 and LOG_EXPONENTS == (0, 1, 2)
    assert len(b) == 19 * 3 - 1  # every (i, j) but the constant
    assert [0.0, 0.0] not in b.tolist() and [3.0, 2.0] in b.tolist() and [1 / 3, 1.0] in b.tolist()
    neg = building_blocks(negative=True)
    assert len(neg) == len(b) + 18 and [-1.0, 0.0] in neg.tolist() and [-1.0, 1.0] not in neg.tolist()
    assert not (building_blocks(log_terms=False)[:, 1] > 0).any()


def test_term_text() -> None:
    assert term_text(np.array([[1.0, 1.0]]), ["p"]) == "p·log2(p)"
    assert term_text(np.array([[2 / 3, 0.0]]), ["p"]) == "p^(2/3)"
    assert term_text(np.array([[-1.0, 0.0]]), ["p"]) == "p^-1"
    assert term_text(np.array([[0.0, 2.0]]), ["p"]) == "log2(p)^2"
    assert term_text(np.array([[0.5, 0.0], [1.0, 0.0]]), ["p", "n"]) == "p^(1/2)·n"
    assert term_text(np.array([[0.0, 0.0]]), ["p"]) == "1"


def test_worked_examples() -> None:
    Y = np.array(
        [
            1 + P5,  # 1 + p
            np.full(5, 2.0),  # the constant 2
            1 + P5 * np.log2(P5),  # 1 + p·log2(p)
            3 + 0.5 * P5**1.5,
            5 * P5 ** (2 / 3),  # no constant
        ]
    )
    m = fit_models(P5, Y)
    assert m.text().tolist() == ["1 + 1·p", "2", "1 + 1·p·log2(p)", "3 + 0.5·p^(3/2)", "5·p^(2/3)"]
    assert m.lead().tolist() == ["p", "1", "p·log2(p)", "p^(3/2)", "p^(2/3)"]
    np.testing.assert_allclose(m.smape, 0.0, atol=1e-9)
    np.testing.assert_allclose(m.cv_smape, 0.0, atol=1e-9)
    assert m.ar2.tolist() == pytest.approx([1.0] * 5)  # exact fits (the constant: flat data)
    assert m.n_terms.tolist() == [1, 0, 1, 1, 1] and m.n_points.tolist() == [5] * 5
    np.testing.assert_allclose(m.evaluate([64.0])[:, 0], [65, 2, 1 + 64 * 6, 3 + 0.5 * 512, 5 * 16])
    df = m.frame()
    assert list(df.columns) == ["c0", "c1", "i1_p", "j1_p"]
    assert df.loc[2, "i1_p"] == 1 and df.loc[2, "j1_p"] == 1 and df.loc[2, "c1"] == pytest.approx(1.0)


def test_quality_of_a_hand_computed_fit() -> None:
    # y = [1, 3, 2] at p = 2, 4, 8: no term passes the t test with one degree of freedom, the constant 2 stays
    m = fit_models([2, 4, 8], [[1.0, 3.0, 2.0]])
    assert m.text()[0] == "2"
    # smape = mean(2|2-1|/3, 2|2-3|/5, 0) = (2/3 + 2/5) / 3
    assert m.smape[0] == pytest.approx(100 * (2 / 3 + 2 / 5) / 3)
    # leave-one-out: predictions 2.5, 1.5, 2 for 1, 3, 2
    loo = (2 * 1.5 / 3.5 + 2 * 1.5 / 4.5 + 0) / 3
    assert m.cv_smape[0] == pytest.approx(100 * loo)
    assert m.ar2[0] == 0.0 and m.rss[0] == pytest.approx(2.0)


def test_strong_scaling_needs_negative_exponents() -> None:
    y = 0.1 + 8 / P5
    assert fit_models(P5, y[None], negative=True).text()[0] == "0.1 + 8·p^-1"
    assert "p^-" not in fit_models(P5, y[None]).text()[0]  # the PMNF without them fits a decreasing term


_BLOCKS = building_blocks(negative=True)


@settings(max_examples=60, deadline=None)
@given(
    block=st.integers(0, len(_BLOCKS) - 1),
    c0=st.floats(0.05, 20.0),
    scale=st.floats(0.1, 10.0),
    sign=st.sampled_from([1.0, -1.0]),
)
def test_noise_free_models_are_recovered(block: int, c0: float, scale: float, sign: float) -> None:
    p = np.array([2.0, 4, 8, 16, 32, 64])
    t = _term_values(p, _BLOCKS[block : block + 1])[0]
    # a term that changes the value by at least 10 % of its mean over the points (smaller ones are noise)
    c1 = sign * scale * c0 / np.ptp(t)
    y = c0 + c1 * t
    if (y <= 0).any():
        y = y + 2 * abs(y.min()) + c0
    m = fit_models(p, y[None], negative=True)
    assert m.expo[0, 0, 0].tolist() == _BLOCKS[block].tolist(), m.text()[0]
    assert m.coef[0, 1] == pytest.approx(c1, rel=1e-6)


def test_models_are_recovered_with_little_noise() -> None:
    p = np.array([2.0, 4, 8, 16, 32, 64])
    T = _term_values(p, _BLOCKS)
    c1 = 8.0 / np.abs(T).max(axis=1)  # the term reaches 4x the constant 2
    Y = np.repeat(2.0 + c1[:, None] * T, 10, axis=0)
    Y = Y * np.random.default_rng(1).lognormal(0.0, 0.001, Y.shape)
    m = fit_models(p, Y, negative=True)
    hit = (m.expo[:, 0, 0] == np.repeat(_BLOCKS, 10, axis=0)).all(axis=1)
    assert hit.mean() >= 0.97  # 0.1 % noise: (nearly) every one of the 75 terms is told apart from its neighbours


@pytest.mark.parametrize(
    ("form", "f"),
    [
        ("1", lambda p: 3 + 0 * p),
        ("log2(p)", lambda p: 1 + np.log2(p)),
        ("p", lambda p: 1 + p),
        ("p·log2(p)", lambda p: 1 + p * np.log2(p)),
        ("p^2", lambda p: 1 + 0.1 * p**2),
        ("p^-1", lambda p: 0.1 + 1 / p),
    ],
)
def test_noisy_models_predict_well(form: str, f) -> None:  # noqa: ANN001
    """2 % timing noise at five scales: the model at twice the largest scale is within a few percent."""
    Y = f(P5)[None, :] * np.random.default_rng(7).lognormal(0.0, 0.02, (200, 5))
    m = fit_models(P5, Y, negative=True)
    err = np.abs(m.evaluate([64.0])[:, 0] / f(64.0) - 1)
    assert np.median(err) < 0.04 and np.quantile(err, 0.9) < 0.12
    if form in ("1", "log2(p)", "p^-1"):  # well separated from their neighbours: the form itself
        assert (m.lead() == form).mean() >= 0.9


def test_constant_data_with_noise_stays_constant() -> None:
    Y = 2.0 * np.random.default_rng(3).lognormal(0.0, 0.005, (500, 5))
    m = fit_models(P5, Y, negative=True)
    assert (m.n_terms == 0).mean() >= 0.98  # the guards (margin, t test, smallest variation) reject fits to noise
    m = fit_models(P5, Y, negative=True, margin=0.0, alpha=0.0, min_variation=0.0)
    assert (m.n_terms == 0).mean() < 0.9  # without them, some term always fits the noise a little better


def test_few_points() -> None:
    # three points: one term at most; two points: no model
    m = fit_models([2, 4, 8], [[3.0, 5.0, 9.0], [1.0, 2.0, np.nan]], max_terms=2)
    assert m.text().tolist() == ["1 + 1·p", ""] and m.n_terms.tolist() == [1, 0]
    assert m.n_points.tolist() == [3, 2] and np.isnan(m.smape[1]) and not m.fitted[1]
    assert m.ar2[0] == pytest.approx(1.0)  # 2 coefficients from 3 points leave one degree of freedom
    # a two-term model needs five points; with seven it is found
    p7 = 2.0 ** np.arange(1, 8)
    y = 1 + 0.5 * p7 + 2 * np.log2(p7) ** 2
    two = fit_models(p7, y[None], max_terms=2)
    assert two.n_terms[0] == 2 and two.smape[0] < 1e-9
    assert sorted(map(tuple, two.expo[0, :, 0].tolist())) == [(0.0, 2.0), (1.0, 0.0)]
    four = fit_models(p7[:4], y[None, :4], max_terms=2)
    assert four.n_terms[0] <= 1


def test_missing_points_and_grouping() -> None:
    """Rows with different measured points are fitted on their own points; the result does not depend on the batch."""
    Y = np.array([1 + P5, 1 + P5, 2 * P5, np.full(5, 4.0)])
    Y[1, 0] = np.nan
    Y[2, 4] = np.nan
    m = fit_models(P5, Y)
    assert m.text().tolist() == ["1 + 1·p", "1 + 1·p", "2·p", "4"]
    assert m.n_points.tolist() == [5, 4, 4, 5]
    for r in range(4):
        one = fit_models(P5, Y[r : r + 1])
        assert one.text()[0] == m.text()[r] and one.cv_smape[0] == pytest.approx(m.cv_smape[r], abs=1e-9)


def test_two_parameters() -> None:
    p = np.array([2.0, 4, 8, 16, 32])
    n = np.array([10.0, 20, 40, 80, 160])
    X = np.array([(a, b) for a in p for b in n])
    mult = 1 + 0.5 * X[:, 0] * X[:, 1]
    add = 2 + X[:, 0] + 0.01 * X[:, 1] ** 2
    only_n = 3 + 0.2 * X[:, 1] * np.log2(X[:, 1])
    m = fit_models(X, np.array([mult, add, only_n]), params=["p", "n"])
    assert m.text().tolist() == ["1 + 0.5·p·n", "2 + 1·p + 0.01·n^2", "3 + 0.2·n·log2(n)"]
    np.testing.assert_allclose(m.smape, 0.0, atol=1e-8)
    want = [1 + 0.5 * 64 * 320, 2 + 64 + 1024, 3 + 0.2 * 320 * np.log2(320)]
    np.testing.assert_allclose(m.evaluate([[64.0, 320.0]])[:, 0], want)
    assert m.frame().columns.tolist()[:6] == ["c0", "c1", "i1_p", "j1_p", "i1_n", "j1_n"]
    # a line of only two values along a parameter cannot be modelled
    with pytest.raises(PassError, match="parameter 'n'.*only 2 values"):
        fit_models(X[np.isin(X[:, 1], [10, 20])], mult[None, np.isin(X[:, 1], [10, 20])], params=["p", "n"])


def test_errors() -> None:
    with pytest.raises(PassError, match="positive"):
        fit_models([0, 2, 4], [[1, 2, 3]])
    with pytest.raises(PassError, match="3 parameter points but 2 measurements"):
        fit_models([1, 2, 4], [[1, 2]])
    with pytest.raises(PassError, match="1 or 2 parameters"):
        fit_models(np.ones((4, 3)), np.ones((1, 4)))
    with pytest.raises(PassError, match="max_terms must be 1 or 2"):
        fit_models(P5, np.ones((1, 5)), max_terms=3)
    with pytest.raises(PassError, match="alpha"):
        fit_models(P5, np.ones((1, 5)), alpha=1.5)


def test_values_below_one_drop_log_terms() -> None:
    x = np.array([0.25, 0.5, 1, 2, 4])
    m = fit_models(x, (1 + x)[None])
    assert m.text()[0] == "1 + 1·p"


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    n=st.integers(3, 7),
    block=st.integers(0, len(_BLOCKS) - 1),
)
def test_closed_form_leave_one_out_equals_refitting(seed: int, n: int, block: int) -> None:
    """The leverage formula gives exactly the predictions of refits without each point."""
    from perflow.passes._modelfit import _fit_batch
    from perflow.passes.models import smape

    rng = np.random.default_rng(seed)
    p = 2.0 ** np.arange(1, n + 1)
    A = np.column_stack([np.ones(n), _term_values(p, _BLOCKS[block : block + 1])[0]])
    Y = rng.uniform(0.5, 5.0, (4, n))
    _, err = _fit_batch(A[None], Y.T.copy(), cv=True, min_contribution=0.0, alpha=0.0, min_variation=0.0)
    want = np.zeros(4)
    for i in range(n):
        keep = np.arange(n) != i
        c = np.linalg.lstsq(A[keep], Y[:, keep].T, rcond=None)[0]  # (2, 4)
        want += smape(A[i] @ c, Y[:, i])
    np.testing.assert_allclose(err[0], want / n, rtol=1e-6, atol=1e-9)
