"""The fast CSV writer of ``--output`` tables writes what ``DataFrame.to_csv`` writes, byte for byte."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from perflow.flow import csvtext
from perflow.flow.csvtext import csv_columns, write_csv

TEXT = st.text(alphabet=st.sampled_from(list('ab ,"\n;é_-x0')), max_size=6)
FLOATS = st.floats(allow_nan=True, allow_infinity=True, width=64) | st.sampled_from(
    [0.0, -0.0, 1e16, 1e15, 1e-5, 1e-4, 0.1, 5e-324, 1.7976931348623157e308, 123456789012345678.0, 3.526e-06]
)


@st.composite
def tables(draw: st.DrawFn) -> pd.DataFrame:
    n = draw(st.integers(0, 30))
    cols: dict[str, object] = {}
    for j in range(draw(st.integers(2, 5))):
        kind = draw(st.sampled_from(["int", "bigint", "uint8", "float", "float32", "bool", "cat", "str"]))
        name = draw(st.sampled_from(["start [s]", "a,b", 'q"t', "process", "x"])) + f"{j}"
        if kind == "int":
            v: object = np.array(draw(st.lists(st.integers(0, 70_000), min_size=n, max_size=n)), dtype=np.int64)
        elif kind == "bigint":
            v = np.array(draw(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=n, max_size=n)), dtype=np.int64)
        elif kind == "uint8":
            v = np.array(draw(st.lists(st.integers(0, 255), min_size=n, max_size=n)), dtype=np.uint8)
        elif kind == "float":
            v = np.array(draw(st.lists(FLOATS, min_size=n, max_size=n)), dtype=np.float64)
        elif kind == "float32":
            v = np.array(draw(st.lists(st.floats(width=32, allow_nan=True), min_size=n, max_size=n)), dtype=np.float32)
        elif kind == "bool":
            v = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
        elif kind == "cat":
            v = pd.Categorical(draw(st.lists(st.none() | TEXT, min_size=n, max_size=n)))
        else:
            v = pd.array(draw(st.lists(st.none() | TEXT, min_size=n, max_size=n)), dtype="str")
        cols[name] = v
    return pd.DataFrame(cols)


@settings(max_examples=60, deadline=None)
@given(tables())
def test_same_text_as_pandas(df: pd.DataFrame) -> None:
    cols = csv_columns(df)
    assert cols is not None  # every column kind drawn here is formatted by the fast writer
    buf = io.StringIO()
    csvtext._write_fast(df, cols, buf)
    assert buf.getvalue() == df.to_csv(index=False)


def test_chunks_and_the_default_threshold(tmp_path, monkeypatch) -> None:
    n = csvtext.FAST_MIN_ROWS
    rng = np.random.default_rng(3)
    df = pd.DataFrame(
        {
            "process": rng.integers(0, 64, n),
            "start [s]": rng.random(n) * 10.0 ** rng.integers(-9, 3, n),
            "interval": rng.integers(0, 2**40, n),
            "name": pd.Categorical(rng.choice(["main", "MPI_Send", "f<int, int>"], n)),
        }
    )
    monkeypatch.setattr(csvtext, "CHUNK_ROWS", 7_000)  # several chunks, the last one short
    assert write_csv(df, tmp_path / "fast.csv", index=False)
    df.to_csv(tmp_path / "pandas.csv", index=False)
    assert (tmp_path / "fast.csv").read_bytes() == (tmp_path / "pandas.csv").read_bytes()
    assert not write_csv(df.head(10), tmp_path / "small.csv", index=False)  # small: pandas writes it


def test_what_pandas_writes_instead(tmp_path) -> None:
    base = {"a": np.arange(3), "b": [1.5, 2.5, np.nan]}
    cases = {
        "an index": (pd.DataFrame(base, index=[5, 6, 7]), True),
        "one column": (pd.DataFrame({"a": np.arange(3)}), False),
        "objects": (pd.DataFrame({**base, "c": [1, "x", None]}), False),
        "nullable integers": (pd.DataFrame({**base, "c": pd.array([1, None, 3], dtype="Int64")}), False),
        "a carriage return": (pd.DataFrame({**base, "c": pd.array(["x\ry", "z", "w"], dtype="str")}), False),
        "dates": (pd.DataFrame({**base, "c": pd.to_datetime(["2024-01-01"] * 3)}), False),
    }
    for what, (df, index) in cases.items():
        assert not write_csv(df, tmp_path / "x.csv", index=index, fast=True), what
        df.to_csv(tmp_path / "y.csv", index=index)
        assert (tmp_path / "x.csv").read_bytes() == (tmp_path / "y.csv").read_bytes(), what
