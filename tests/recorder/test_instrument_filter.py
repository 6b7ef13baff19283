"""Compiler instrumentation a user can afford: filter files, ``perflow score``, one vertex per function.

The program (``programs/inst_filter.cpp``): a std:: container loop, an
accessor inlined from a header, recursion, a short hot function and a function
that calls MPI; built with what ``perflow cxx`` runs and recorded at 2 ranks.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perflow.errors import FormatError
from perflow.recorder.filters import (
    DEFAULT_FILTER,
    Filter,
    Rule,
    base_name,
    compile_time_lists,
    glob_escape,
    parse_filter,
)

from .conftest import PROGRAMS, site_line

STEPS, TINY = 10, 20000  # tiny() is called STEPS * TINY times per rank


# ----------------------------------------------------------------------------- the filter-file parser


def test_filter_file_syntax_and_last_rule_wins() -> None:
    flt = parse_filter(
        """# everything but the solver
SCOREP_REGION_NAMES_BEGIN
  EXCLUDE *
  INCLUDE main solve*   # a comment ends the line
          step\\ one      # an escaped blank
  EXCLUDE MANGLED _ZN6Domain1xEi
  EXCLUDE tiny\\*
SCOREP_REGION_NAMES_END
SCOREP_FILE_NAMES_BEGIN
  EXCLUDE */include/*
  INCLUDE */include/mine.h
SCOREP_FILE_NAMES_END
""",
        "f.filter",
    )
    assert [(r.include, r.pattern, r.mangled, r.line) for r in flt.names] == [
        (False, "*", False, 3),
        (True, "main", False, 4),
        (True, "solve*", False, 4),
        (True, "step one", False, 5),
        (False, "_ZN6Domain1xEi", True, 6),
        (False, "tiny\\*", False, 7),
    ]
    assert not flt.excludes("main") and not flt.excludes("solve_it(int)") and not flt.excludes("step one")
    assert flt.excludes("other(int)") and flt.excludes("stepone")
    assert parse_filter("SCOREP_REGION_NAMES_BEGIN EXCLUDE tiny\\* SCOREP_REGION_NAMES_END").excludes("tiny*")
    assert not parse_filter("SCOREP_REGION_NAMES_BEGIN EXCLUDE tiny\\* SCOREP_REGION_NAMES_END").excludes("tinyx")
    assert flt.excludes("main", mangled="_ZN6Domain1xEi")  # the MANGLED rule comes last
    assert flt.excludes("main", file="/usr/include/x.h") and not flt.excludes("main", file="/p/include/mine.h")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("EXCLUDE foo\n", "line 1: 'EXCLUDE' outside a block"),
        ("SCOREP_REGION_NAMES_BEGIN\n  EXCLUDE foo\n", "line 1: block not closed: SCOREP_REGION_NAMES_END missing"),
        ("SCOREP_REGION_NAMES_BEGIN\n  foo\nSCOREP_REGION_NAMES_END\n", "line 2: 'foo': expected INCLUDE or EXCLUDE"),
        (
            "SCOREP_REGION_NAMES_BEGIN\n  EXCLUDE\n  INCLUDE x\nSCOREP_REGION_NAMES_END\n",
            "line 2: EXCLUDE without a pattern",
        ),
        (
            "SCOREP_FILE_NAMES_BEGIN\n  EXCLUDE MANGLED x\nSCOREP_FILE_NAMES_END\n",
            "line 2: MANGLED applies to region names, not in a SCOREP_FILE_NAMES block",
        ),
        (
            "SCOREP_REGION_NAMES_BEGIN\nSCOREP_FILE_NAMES_BEGIN\n",
            "line 2: SCOREP_FILE_NAMES_BEGIN inside the block opened at line 1",
        ),
        (
            "SCOREP_REGION_NAMES_BEGIN\n EXCLUDE a\nSCOREP_FILE_NAMES_END\n",
            "line 3: SCOREP_FILE_NAMES_END but the block opened at line 1 is a names block",
        ),
        ("\n\nSCOREP_REGION_NAMES_END\n", "line 3: SCOREP_REGION_NAMES_END but no block is open"),
    ],
)
def test_bad_filter_files_name_the_line(text: str, message: str) -> None:
    with pytest.raises(FormatError) as exc:
        parse_filter(text, "bad.filter")
    assert str(exc.value).startswith(f"bad.filter ({message.split(':')[0]})") and message.split(": ", 1)[1] in str(
        exc.value
    )


def test_bad_filter_file_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``perflow record`` and ``perflow cc`` reject a bad filter file before running anything, naming its line."""
    from perflow.cli.main import main

    bad = tmp_path / "x.filter"
    bad.write_text("SCOREP_REGION_NAMES_BEGIN\n  EXCLUDE\nSCOREP_REGION_NAMES_END\n")
    for argv in (["record", "--filter", str(bad), "--", "true"], ["cxx", "--filter", str(bad), "--", "-c", "x.cpp"]):
        assert main(argv) != 0
        err = capsys.readouterr().err
        assert f"{bad} (line 2): EXCLUDE without a pattern" in err and err.count("\n") == 1
    assert main(["record", "--filter", str(tmp_path / "missing.filter"), "--", "true"]) != 0
    assert "missing.filter: cannot read the filter file" in capsys.readouterr().err


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab*?[]\\ #(),&:<>x"), min_size=1, max_size=12))
def test_written_filters_read_back_exactly(name: str) -> None:
    """A name written by ``perflow score`` (escaped) excludes that name and no other."""
    flt = Filter(names=[Rule(include=False, pattern=glob_escape(name))])
    back = parse_filter(flt.text("header"))
    assert back.excludes(name)
    assert not back.excludes(name + "x") and not back.excludes("x" + name)


def test_compile_time_lists_are_what_gcc_can_express() -> None:
    flt = parse_filter(
        """SCOREP_REGION_NAMES_BEGIN
  EXCLUDE Domain::x(int) *tiny*
  EXCLUDE MANGLED _Z3fooi
  EXCLUDE solve*
SCOREP_REGION_NAMES_END
SCOREP_FILE_NAMES_BEGIN
  EXCLUDE */vendor/* /opt/*/include/*
SCOREP_FILE_NAMES_END
""",
        "c.filter",
    )
    files, funcs, skipped = compile_time_lists(DEFAULT_FILTER + flt)
    assert files == ["/usr/include/", "/usr/lib/gcc/", "/usr/local/include/", "/usr/lib/llvm-", "/vendor/"]
    assert funcs == ["Domain::x", "tiny"]  # GCC matches the qualified name without parameters, as a substring
    text = "\n".join(skipped)
    assert "c.filter:3: region pattern '_Z3fooi' (MANGLED names are matched at run time)" in text
    assert "c.filter:4: region pattern 'solve*' (GCC cannot anchor a name prefix" in text
    assert "c.filter:7: file pattern '/opt/*/include/*' (wildcards inside the pattern)" in text
    assert "'std::*'" in text  # the default's namespace prefixes: at run time only
    fortran = parse_filter("SCOREP_REGION_NAMES_BEGIN EXCLUDE solver::step tiny SCOREP_REGION_NAMES_END")
    assert compile_time_lists(fortran, fortran=True)[1] == ["step", "tiny"]  # gfortran: the procedure's name
    assert base_name("double* Allocate<double>(unsigned long)") == "Allocate<double>"
    assert base_name("Domain::x(int) const") == "Domain::x" and base_name("main") == "main"


# ----------------------------------------------------------------------------- the recorded program


@pytest.fixture(scope="module")
def first(recorded):  # noqa: ANN001, ANN201
    return recorded("inst_filter.cpp", str(STEPS), str(TINY), n=2, instrument=True)


def _user(raw):  # noqa: ANN001, ANN202
    r = raw.regions
    return r[r["paradigm"] == "user"].iloc[1:]  # without the program's root region


def test_one_vertex_per_function_with_its_own_file_and_line(first) -> None:  # noqa: ANN001
    from perflow.trace.build import build_pag

    u = _user(first.raw)
    assert not u["name"].duplicated().any(), u["name"][u["name"].duplicated()].tolist()
    at = u[u["name"] == "Field::at(int)"]
    assert len(at) == 1 and Path(at["file"].iloc[0]).name == "inst_filter.h"
    assert int(at["line"].iloc[0]) == site_line("inst_filter.h", "field_at")
    tiny = u[u["name"] == "tiny(double)"]
    assert len(tiny) == 1 and int(tiny["line"].iloc[0]) == site_line("inst_filter.cpp", "tiny")
    # std:: code is not instrumented: it shows in samples only, never as an instrumented call
    calls = first.raw.attrs["function_calls"]
    names = first.raw.regions["name"].to_numpy()[[row[1] for row in calls["rows"]]]
    assert not any(n.startswith(("std::", "__gnu_cxx::")) for n in names)
    # the hooks' clock reads are never a frame
    assert not first.raw.regions["name"].str.contains(r"vdso|clock_gettime").any()
    # recursion shows as descend/descend/...; never a second main below main
    paths = list(build_pag(first.raw).call_paths())
    assert all(p.split("/").count("main") <= 1 for p in paths)
    deep = [p for p in paths if p.count("descend(Field&, int)") == 5]
    assert deep and all("/main/descend(Field&, int)/descend(Field&, int)/" in p for p in deep)


def test_score_counts_every_call_and_filters_the_short_ones(first, tmp_path: Path) -> None:  # noqa: ANN001
    from perflow.recorder.score import CALL_COST, apply_filter, score, score_filter, score_text

    sc = score(first.raw)
    t = sc.table.set_index("region")
    assert t.loc["tiny(double)", "visits"] == 2 * STEPS * TINY  # counted by the hooks, though never recorded
    assert t.loc["tiny(double)", "events"] == 2 * 2 * STEPS * TINY
    assert t.loc["tiny(double)", "bytes"] == 48 * 2 * 2 * STEPS * TINY
    assert t.loc["tiny(double)", "overhead"] == pytest.approx(2 * STEPS * TINY * CALL_COST)
    assert t.loc["tiny(double)", "type"] == "USR" and t.loc["tiny(double)", "time_per_visit"] < 1e-5
    assert t.loc["exchange(double)", "type"] == "COM" and t.loc["main", "type"] == "COM"
    assert t.loc["MPI_Allreduce", "type"] == "MPI" and t.loc["MPI_Allreduce", "visits"] == 2 * STEPS
    assert t.loc["descend(Field&, int)", "visits"] == 2 * STEPS * 5
    flt = score_filter(sc)
    excluded = {r.pattern for r in flt.names}
    assert {"tiny(double)", "Field::at(int)"} <= excluded
    assert not excluded & {"main", "exchange(double)", "descend(Field&, int)", "sweep(Field&, long)"}
    apply_filter(sc, flt)
    text = score_text(sc)
    assert "flt type       visits" in text and "with the filter (flt '-'" in text
    row = next(line for line in text.splitlines() if line.endswith("tiny(double)"))
    assert row.split()[:3] == ["-", "USR", f"{2 * STEPS * TINY:,}"]


def test_filtered_recording_and_build(first, recorded, build, toolchain, tmp_path: Path) -> None:  # noqa: ANN001
    from perflow.recorder.instrument import InstrumentOptions, instrumented_argv
    from perflow.recorder.score import score, score_filter

    path = tmp_path / "perflow.filter"
    path.write_text(score_filter(score(first.raw)).text())
    # run time: the same build recorded with the filter records neither tiny nor Field::at
    again = recorded("inst_filter.cpp", str(STEPS), str(TINY), n=2, instrument=True, filter=str(path))
    entered = set(again.raw.regions["name"].to_numpy()[np.unique(again.raw.region_events["region"])])
    assert "tiny(double)" not in entered and "Field::at(int)" not in entered  # (samples may still show them)
    assert {"descend(Field&, int)", "exchange(double)", "main"} <= entered
    calls = again.raw.attrs["function_calls"]
    assert again.raw.attrs["filter_excluded"] >= 2
    offs = {row[-1] for row in calls["rows"]}
    assert 2 in offs  # excluded by the filter file: counted, never recorded
    # file rules at run time: the functions defined in the header, by the debug information
    from perflow.recorder.filtermap import map_filter

    exe = build("inst_filter.cpp", instrument=True)
    fm = map_filter(parse_filter("SCOREP_FILE_NAMES_BEGIN EXCLUDE */inst_filter.h SCOREP_FILE_NAMES_END"), str(exe))
    names = {n for m in fm.excluded.values() for n in m.values()}
    assert "Field::at(int)" in names and "Field::Field(int)" in names
    assert not names & {"tiny(double)", "main", "descend(Field&, int)"}
    # compile time: what GCC can express is not instrumented at all
    cxx = toolchain.mpicc.replace("mpicc", "mpicxx")
    obj = tmp_path / "f.o"
    argv = instrumented_argv(
        [cxx],
        ["-O2", "-c", "-o", str(obj), str(PROGRAMS / "inst_filter.cpp")],
        InstrumentOptions(filter=score_filter(score(first.raw))),
    )
    assert any(a.startswith("-finstrument-functions-exclude-function-list=") and "tiny" in a for a in argv)
    subprocess.run(argv, check=True, capture_output=True, timeout=120)
    dis = subprocess.run(["objdump", "-dr", "--no-show-raw-insn", str(obj)], capture_output=True, text=True).stdout
    bodies = dict(part.split(">:\n", 1) for part in dis.split("\n\n") if ">:\n" in part)
    hooked = {k.split("<", 1)[1] for k, v in bodies.items() if "__cyg_profile_func_enter" in v}
    assert "_Z4tinyd" not in hooked and "_Z7descendR5Fieldi" in hooked


def test_score_command(first, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    """``perflow score RUN`` prints the table and writes a filter that ``perflow cxx --filter`` accepts."""
    from perflow.cli.main import main

    run = first.result.outdir
    out = tmp_path / "lean.filter"
    assert main(["score", str(run), "-g", str(out), "--top", "0"]) == 0
    text = capsys.readouterr().out
    assert "region" in text.splitlines()[4] and f"filter written to {out}" in text
    assert "tiny(double)" in out.read_text() and "SCOREP_REGION_NAMES_BEGIN" in out.read_text()
    assert main(["score", str(run), "-f", str(out)]) == 0  # shows what that filter excludes
    assert any(
        line.split()[:1] == ["-"] and line.endswith("tiny(double)") for line in capsys.readouterr().out.splitlines()
    )
    assert main(["cxx", "--compiler", "g++", "--show", "--filter", str(out), "--", "-c", "x.cpp"]) == 0
    cmd = capsys.readouterr().out
    assert "-finstrument-functions-exclude-function-list=" in cmd and "tiny" in cmd
    assert main(["score", str(tmp_path / "nothing")]) != 0
    assert "no rawtrace.npz" in capsys.readouterr().err
