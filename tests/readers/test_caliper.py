"""Caliper reader: .cali (Caliper 2.2 annotation profile, spot scaling runs) and json-split."""

from __future__ import annotations

from pathlib import Path

import pytest

import perflow
from perflow.errors import FormatError
from tests.conftest import shared
from tests.readers.helpers import check_times, value


def test_cali_annotation_profile() -> None:
    pag = perflow.read(shared("caliper", "lulesh-cali", "lulesh-annotation-profile.cali"))
    assert pag.attrs["format"] == "caliper"
    assert pag.n_vertices == 19  # README
    assert pag.attrs["metadata"]["cali.caliper.version"] == "2.2.0-dev"
    # __rec=ctx,ref=155,...,data=0.000285=0.024836=0.025121=0.012561=2 : main's sum#time.duration
    assert value(pag, "main", "time_exc") == pytest.approx(0.025121)
    assert value(pag, "main", "count") == 2
    assert pag.vertex("main/lulesh.cycle").kind == "loop"
    # the record outside any region (ref=28, cali.channel only) is kept aside
    assert pag.attrs["outside_regions"]["sum#time.duration"] == pytest.approx(0.001297)
    check_times(pag)


def test_json_split_per_rank() -> None:
    pag = perflow.read(shared("caliper", "lulesh-json", "lulesh-annotation-profile.json"))
    assert pag.attrs["format"] == "caliper"
    assert list(pag.processes) == list(range(8))
    # data row [5882425.0, 0, 121489.0, 0]: node 0 (main), rank 0, microseconds
    assert value(pag, "main", "time_inc", 0) == pytest.approx(5.882425)
    assert value(pag, "main", "time_exc", 7) == pytest.approx(0.137098)
    check_times(pag, consistent=False)


def test_json_split_sampled_callpath() -> None:
    pag = perflow.read(shared("caliper", "cpi-json", "cpi-callpath-profile.json"))
    assert list(pag.processes) == [0, 1, 2, 3]
    # rows [62, 0, r, 3, 4, t]: 'main' (node 3) sampled on each rank; rank 3: 69 samples, 344782 us
    assert value(pag, "_start/__libc_start_main/main", "count", 3) == 69
    assert value(pag, "_start/__libc_start_main/main", "time_exc", 3) == pytest.approx(0.344782)
    check_times(pag)


@pytest.mark.parametrize("n", [27, 64, 125, 216, 343])
def test_scaling_runs(n: int) -> None:
    pag = perflow.read(shared("scaling", "lulesh-caliper", f"{n}_cores.cali"))
    assert pag.n_vertices == 45  # README
    assert pag.attrs["nprocs"] == n
    assert pag.n_processes == n
    assert pag.attrs["aggregated"] is True
    assert pag.attrs["jobsize"] == n
    assert pag.attrs["metadata"]["mpi.world.size"] == n
    assert {"time_inc", "time_exc", "time_inc_min", "time_inc_max", "time_inc_total"} <= set(pag.metric_names)
    main = pag.vertex("main").id
    row = pag.metrics.loc[(main, 0, 0)]
    assert row["time_inc_min"] <= row["time_inc"] <= row["time_inc_max"]
    assert row["time_inc_total"] == pytest.approx(row["time_inc"] * n, rel=1e-4)


def test_scaling_hand_checked() -> None:
    pag = perflow.read(shared("scaling", "lulesh-caliper", "27_cores.cali"))
    # __rec=ctx,ref=43=101,...,data=47.226995=47.248547=47.238297=1275.434023=27=1275.434023 (min, max, avg, ...)
    assert value(pag, "main", "time_inc") == pytest.approx(47.238297)
    assert value(pag, "main", "time_inc_max") == pytest.approx(47.248547)
    assert pag.metric_info["time_inc_total"].unit == "s"


def test_escapes_and_errors(tmp_path: Path) -> None:
    f = tmp_path / "a.cali"
    f.write_text(
        "__rec=node,id=12,attr=10,data=268,parent=3\n"
        "__rec=node,id=13,attr=8,data=region,parent=12\n"
        "__rec=node,id=14,attr=10,data=21,parent=5\n"
        "__rec=node,id=15,attr=8,data=sum#time.duration,parent=14\n"
        "__rec=node,id=16,attr=10,data=21,parent=1\n"
        "__rec=node,id=17,attr=8,data=mpi.rank,parent=16\n"
        "__rec=node,id=20,attr=13,data=a\\,b\\=c\n"
        "__rec=node,id=21,attr=13,data=inner,parent=20\n"
        "__rec=ctx,ref=21,attr=15=17,data=2.5=1\n"
        "__rec=ctx,ref=20,attr=15=17,data=1.0=1\n"
    )
    pag = perflow.read(f)
    assert sorted(pag.call_paths()) == ["a,b=c", "a,b=c/inner"]
    assert value(pag, "a,b=c", "time_inc", 1) == pytest.approx(3.5)
    f.write_text("__rec=node,id=12,attr=10,data=268,parent=3\n__rec=ctx,ref=99,attr=\n")
    with pytest.raises(FormatError, match=r"a\.cali"):
        perflow.read_caliper(f)
    f.write_text("__rec=node,id=x\n")
    with pytest.raises(FormatError, match=r"a\.cali \(line 1\): malformed node record"):
        perflow.read_caliper(f)
    f.write_text("")
    with pytest.raises(FormatError, match="empty file"):
        perflow.read_caliper(f)
    j = tmp_path / "b.json"
    j.write_text('{"data": [[1, 2]], "columns": ["a"], "nodes": []}')
    with pytest.raises(FormatError, match=r"data row 0 has 2 values, expected 1"):
        perflow.read_caliper(j)
    j.write_text('{"data": [[1, 2]], "columns": ["a"], "nod')
    with pytest.raises(FormatError, match=r"b\.json \(line 1, column 38\): invalid JSON \(Unterminated string"):
        perflow.read_caliper(j)
