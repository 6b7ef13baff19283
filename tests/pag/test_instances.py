"""Row helpers of the instance tables (perflow.pag.instances)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from perflow.pag.instances import stack_rows, take_or, take_rows


def test_take_or_gathers_and_fills_minus_one() -> None:
    vals = np.array([10, 20, 30], dtype=np.int64)
    out = take_or(vals, np.array([2, -1, 0, 0]), -1)
    assert out.dtype == np.int64
    assert out.tolist() == [30, -1, 10, 10]


def test_take_or_nan_fill_makes_floats() -> None:
    out = take_or(np.array([1.5, 2.5]), np.array([-1, 1]), np.nan)
    assert np.isnan(out[0]) and out[1] == 2.5
    ints = take_or(np.array([3, 4], dtype=np.int32), np.array([-1, 1]), np.nan)
    assert ints.dtype.kind == "f" and np.isnan(ints[0]) and ints[1] == 4.0


def test_take_or_empty_values_all_missing() -> None:
    out = take_or(np.zeros(0, dtype=np.int64), np.array([-1, -1]), -1)
    assert out.tolist() == [-1, -1]
    assert take_or(np.zeros(0), np.zeros(0, dtype=np.int64), np.nan).shape == (0,)


def test_stack_and_take_rows_copy_columns_in_order() -> None:
    a = pd.DataFrame({"x": [1, 2], "y": [0.5, 1.5]})
    b = pd.DataFrame({"x": [3], "y": [2.5]})
    st = stack_rows([a, b], ["x", "y"], order=np.array([2, 0, 1]))
    assert st["x"].tolist() == [3, 1, 2] and st["y"].tolist() == [2.5, 0.5, 1.5]
    assert list(st.index) == [0, 1, 2]
    tk = take_rows(st, np.array([1]), ["y"])
    assert list(tk.columns) == ["y"] and tk["y"].tolist() == [0.5]
