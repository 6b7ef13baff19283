"""The CPU-profile formats (Hatchet JSON, pyinstrument, gprof, gprof2dot, timemory) are told by content, by one reader each."""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path

import pytest

from perflow.readers import READER_MODULES, detect_format
from tests.conftest import shared

DATA = Path(__file__).resolve().parents[1] / "data"
SAMPLES = [
    ("hatchet/hatchet-graph-literal.json", "hatchet"),
    ("pyinstrument/work.pyinstrument.json", "pyinstrument"),
    ("pyinstrument/work.pyisession", "pyinstrument"),
    ("pyinstrument/pyinstrument-hatchet-profile.json", "pyinstrument"),
    ("gprof/cg.gprof.txt", "gprof"),
    ("gprof/cg.gprof-brief.txt", "gprof"),
    ("gprof2dot/cg.dot", "gprof2dot"),
    ("gprof2dot/callgrind-cpi.dot", "gprof2dot"),
    ("timemory/wall.tree.json", "timemory"),
]


def _claims(path: Path) -> list[str]:
    return [f for f, mod in READER_MODULES.items() if importlib.import_module(mod).detect(path)]


@pytest.mark.parametrize(("name", "fmt"), SAMPLES, ids=[s for s, _ in SAMPLES])
def test_by_content_not_name(name: str, fmt: str, tmp_path: Path) -> None:
    src = DATA / name
    assert detect_format(src) == fmt
    assert _claims(src) == [fmt]
    renamed = tmp_path / "data.out"  # no telling extension
    shutil.copy(src, renamed)
    assert detect_format(renamed) == fmt


@pytest.mark.parametrize(
    "parts",
    [
        ("caliper", "cpi-json", "cpi-callpath-profile.json"),
        ("cprofile", "cprofile-cycle.pstats"),
        ("cube", "scorep-cpi", "profile.cubex"),
        ("tau", "cpi-mpi", "profile.2.0.0"),
    ],
)
def test_new_readers_leave_the_others_alone(parts: tuple[str, ...]) -> None:
    new = {"hatchet", "pyinstrument", "gprof", "gprof2dot", "timemory", "scorep"}
    assert not new & set(_claims(shared(*parts)))
