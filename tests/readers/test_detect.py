"""perflow.read picks the right reader for every shared sample; readers do not claim other formats."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import perflow
from perflow.errors import FormatError
from perflow.readers import detect_format
from tests.conftest import shared

SAMPLES = [
    (("cube", "scorep-cpi", "profile.cubex"), "cube"),
    (("hpctoolkit", "cpi-xml"), "hpctoolkit"),
    (("hpctoolkit", "ping-pong-v4"), "hpctoolkit"),
    (("caliper", "cpi-json", "cpi-callpath-profile.json"), "caliper"),
    (("caliper", "lulesh-json", "lulesh-annotation-profile.json"), "caliper"),
    (("caliper", "lulesh-cali", "lulesh-annotation-profile.cali"), "caliper"),
    (("scaling", "lulesh-caliper", "64_cores.cali"), "caliper"),
    (("tau", "cpi-mpi"), "tau"),
    (("tau", "cpi-mpi", "profile.2.0.0"), "tau"),
    (("cprofile", "cprofile-cycle.pstats"), "cprofile"),
]
MINE = ["cube", "hpctoolkit", "caliper", "tau", "cprofile", "chrome"]
DATA = Path(__file__).resolve().parents[1] / "data" / "chrome"


@pytest.mark.parametrize(("parts", "fmt"), SAMPLES, ids=["/".join(p) for p, _ in SAMPLES])
def test_detected(parts: tuple[str, ...], fmt: str) -> None:
    assert detect_format(shared(*parts)) == fmt


@pytest.mark.parametrize(("parts", "fmt"), SAMPLES, ids=["/".join(p) for p, _ in SAMPLES])
def test_only_one_reader_claims_it(parts: tuple[str, ...], fmt: str) -> None:
    path = shared(*parts)
    claims = [m for m in MINE if importlib.import_module(f"perflow.readers.{m}").detect(path)]
    assert claims == [fmt]


@pytest.mark.parametrize("name", ["viztracer.json", "pytorch.json", "perfflow.pfw", "per-rank"])
def test_chrome_detected(name: str) -> None:
    assert detect_format(DATA / name) == "chrome"
    claims = [m for m in MINE if importlib.import_module(f"perflow.readers.{m}").detect(DATA / name)]
    assert claims == ["chrome"]


def test_otf2_not_claimed() -> None:
    for p in (shared("otf2", "ping-pong", "traces.otf2"), shared("otf2", "ping-pong")):
        assert [m for m in MINE if importlib.import_module(f"perflow.readers.{m}").detect(p)] == []


def test_read_format_functions() -> None:
    assert perflow.read_tau(shared("tau", "cpi-mpi")).attrs["format"] == "tau"
    assert perflow.read_cube(shared("cube", "scorep-cpi", "profile.cubex")).n_vertices == 10


def test_unknown_file(tmp_path: Path) -> None:
    f = tmp_path / "notes.txt"
    f.write_text("hello")
    with pytest.raises(FormatError, match="cannot tell the format"):
        perflow.read(f)


@pytest.mark.parametrize(
    ("parts", "fmt"), SAMPLES[:3] + SAMPLES[5:6], ids=["/".join(p) for p, _ in SAMPLES[:3] + SAMPLES[5:6]]
)
def test_saved_and_loaded(parts: tuple[str, ...], fmt: str, tmp_path: Path) -> None:
    pag = perflow.read(shared(*parts))
    back = perflow.load(pag.save(tmp_path / "x.pag"))
    assert back.n_vertices == pag.n_vertices
    assert back.attrs["format"] == fmt
    assert back.metric_names == pag.metric_names
