"""perflow.units: the one formatter, aggregation labels and headers; CSV outputs of flows carry them."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

import perflow
from perflow.flow.outputs import write_value
from perflow.units import aggregate_label, column_label, column_labels, format_value


def test_format_value_is_the_one_time_formatter() -> None:
    assert [format_value(x, "s") for x in (1.5, 0.0123, 4.5e-6, 2e-9, 0.0, 0.99999)] == [
        "1.50 s",
        "12.3 ms",
        "4.50 us",
        "2.00 ns",
        "0 s",
        "1.00 s",
    ]
    from perflow.cli.info import _fmt_time
    from perflow.sdk.render import format_value as render_format

    assert render_format is format_value and _fmt_time(0.0123) == "12.3 ms"


def test_labels() -> None:
    assert aggregate_label("sum", 8) == "sum over 8 processes"
    assert aggregate_label("max", 8, 16) == "max over 16 threads of 8 processes"
    assert aggregate_label("mean", 1) == "mean over 1 process"
    assert (
        column_label("time_exc", "s", "sum over 8 processes", with_unit=True) == "time_exc (sum over 8 processes) [s]"
    )
    assert column_label("time_exc", "s", "sum over 8 processes") == "time_exc (sum over 8 processes)"
    df = pd.DataFrame({"name": ["a"], "bytes_sent": [1], "share": [0.5], "value": [1.0]})
    df.attrs["units"] = {"value": "s"}
    df.attrs["aggregates"] = {"value": "max over 2 processes"}
    assert column_labels(df, with_unit=True) == [
        "name",
        "bytes_sent [B]",
        "share [fraction]",
        "value (max over 2 processes) [s]",
    ]


def test_flow_csv_headers_carry_units_and_aggregation(tmp_path) -> None:
    from perflow.passes.hotspot import hotspot

    pag = perflow.load(Path(__file__).resolve().parents[1] / "examples" / "data" / "ring8.pag")
    p = write_value(hotspot(pag, metric="time_exc", k=2), tmp_path, "hot")
    head = p.read_text().splitlines()[0].split(",")
    assert "value (sum over 8 processes) [s]" in head and "max (max over 8 processes) [s]" in head
    assert "share [fraction]" in head
