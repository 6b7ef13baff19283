"""The command line: perflow run / validate / passes / flows, exit statuses and outputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import perflow
from perflow.cli.main import main

from . import helpers  # noqa: F401

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples" / "data" / "ring8.pag"

REPORT = textwrap.dedent(
    """\
    perflow: 1
    name: report
    description: A table, a text and a number.
    inputs:
      x: {type: int, doc: a number}
    steps:
      table: {pass: t_frame, inputs: {x: input:x}, settings: {n: 3}}
      text: {pass: t_text, inputs: {table: table}}
      parts: {pass: t_split, inputs: {x: input:x}}
    outputs:
      table: table
      text: text
      parts: parts.quot
    """
)


@perflow.pass_(name="t_plot")
def plot(x: int) -> matplotlib.figure.Figure:  # noqa: F821
    """A small figure."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(2, 2))
    fig.add_subplot().plot(range(x))
    return fig


@pytest.fixture
def report(tmp_path) -> Path:
    p = tmp_path / "report.yaml"
    p.write_text(REPORT)
    return p


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_run_writes_outputs_and_prints_reports(capsys, report, tmp_path):
    out_dir = tmp_path / "out"
    code, out, err = cli(capsys, "run", report, "--input", "x=4", "--output", out_dir)
    assert code == 0, err
    assert sorted(os.listdir(out_dir)) == ["index.html", "parts.json", "table.csv", "text.txt"]
    assert (out_dir / "text.txt").read_text() == "report: 3 rows, sum 12\n"
    assert ">table</h2>" in (out_dir / "index.html").read_text()  # the page of the run
    assert (out_dir / "table.csv").read_text().splitlines() == ["i,v", "0,0", "1,4", "2,8"]
    assert json.loads((out_dir / "parts.json").read_text()) == 2
    # a flow with a text report shows only its report(s) on the terminal; everything is in --output
    assert out == "report: 3 rows, sum 12\n"
    assert "flow 'report': 3 done" in err and f"outputs written to {out_dir}" in err
    code, out, err = cli(capsys, "run", report, "--input", "x=4")
    assert out == "report: 3 rows, sum 12\n" and "outputs table, parts not shown; use --output DIR" in err


def test_single_input_flows_take_a_bare_input_and_set_parses_yaml(capsys, report):
    code, out, err = cli(capsys, "-q", "run", report, "--input", "5", "--set", "table.n=2", "--set", "text.title=sum")
    assert code == 0, err
    assert "sum: 2 rows, sum 5" in out and err == ""


def test_inputs_are_also_positional_before_or_after_the_options(capsys, report, tmp_path):
    # `perflow run FLOW PATH`, as users type it; words argparse leaves over after an option are inputs too
    code, out, err = cli(capsys, "-q", "run", report, "5", "--set", "table.n=2")
    assert code == 0 and "report: 2 rows, sum 5" in out, err
    code, out2, err = cli(capsys, "-q", "run", report, "--set", "table.n=2", "5")
    assert code == 0 and out2 == out, err
    code, out, err = cli(capsys, "-q", "run", report, "--set", "table.n=2", "x=6")
    assert code == 0 and "report: 2 rows, sum 6" in out, err
    code, out, err = cli(capsys, "-q", "run", report, "5", "--input", "x=6")
    assert code == 2 and "--input x is given twice" in err
    with pytest.raises(SystemExit) as exc:  # an unknown option is still argparse's usage error
        cli(capsys, "run", report, "5", "--no-such-option")
    assert exc.value.code == 2 and "unrecognized arguments: --no-such-option" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:  # a command without inputs takes no extra words
        cli(capsys, "validate", report, "extra")
    assert exc.value.code == 2 and "unrecognized arguments: extra" in capsys.readouterr().err


def test_run_a_shipped_flow_on_the_sample(capsys, tmp_path):
    code, out, err = cli(capsys, "run", "convert", "--input", SAMPLE, "--output", tmp_path / "o")
    assert code == 0, err
    pag = perflow.load(tmp_path / "o" / "pag.pag")
    assert pag.n_vertices == perflow.load(SAMPLE).n_vertices
    code, out, err = cli(capsys, "run", "convert", "--input", f"data={SAMPLE}")
    assert code == 0 and "output pag not shown; use --output DIR to save every output" in err


def test_the_python_shipped_flow_overview(capsys, tmp_path):
    code, out, err = cli(capsys, "run", "overview", "--input", SAMPLE, "-o", tmp_path)
    assert code == 0, err
    assert out.startswith("# perflow overview\n") and "MPI_Allreduce" in out
    assert (tmp_path / "report.md").read_text() == out  # a Markdown report is saved as .md
    code, out, err = cli(capsys, "flows", "overview")
    assert code == 0 and "    pass: tree_text\n" in out and "        'Calling-context tree: inclusive time" in out


def test_unreadable_input_data_is_a_usage_error(capsys, tmp_path):
    code, out, err = cli(capsys, "run", "convert", "--input", tmp_path / "missing.otf2")
    assert code == 2
    assert "perflow: error: step 'read' (pass 'read') failed: FileNotFoundError:" in err and "missing.otf2" in err
    (tmp_path / "junk.bin").write_bytes(b"\x00" * 10)
    code, out, err = cli(capsys, "run", "convert", "--input", tmp_path / "junk.bin")
    assert code == 2 and "failed: FormatError:" in err and "cannot tell the format" in err


def test_figures_become_png(capsys, tmp_path):
    flow = tmp_path / "plot.yaml"
    flow.write_text("perflow: 1\ninputs: {x: int}\nsteps:\n  fig: {pass: t_plot, inputs: {x: input:x}}\n")
    code, out, err = cli(capsys, "run", flow, "-i", "3", "-o", tmp_path / "o")
    assert code == 0, err
    assert (tmp_path / "o" / "fig.png").read_bytes()[:4] == b"\x89PNG"


def test_a_failing_step_gives_exit_status_1_and_one_line(capsys, tmp_path):
    flow = tmp_path / "fail.yaml"
    flow.write_text(
        "perflow: 1\nsteps:\n  c: {pass: t_const}\n  bad: {pass: t_fail, inputs: {x: c}}\n"
        "  ok: {pass: t_inc, inputs: {x: c}}\n"
    )
    code, out, err = cli(capsys, "run", flow, "-j", "1")
    assert code == 1
    assert out == "2\n"
    assert "perflow: error: step 'bad' (pass 't_fail') failed: ValueError: boom" in err
    assert err.count("boom") == 1 and "Traceback" not in err
    code, out, err = cli(capsys, "--debug", "run", flow)
    assert code == 1 and "Traceback" in err and "raise ValueError(message)" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "table.n=many"], "steps.table.settings.n"),
        (["--set", "nope.n=1"], "--set: cannot set 'nope.n': flow 'report' has no step 'nope'"),
        (["--set", "=1"], "--set '=1': expected SETTING=VALUE or STEP.SETTING=VALUE"),
        (["--set", "tablen=1"], "settings.tablen: flow setting 'tablen' is not a setting of any step"),
        (["--set", "table.m=1"], "pass 't_frame' has no setting 'm'"),
        ([], "missing --input x (a number)"),
        (["--input", "x=4", "--input", "x=5"], "--input x is given twice"),
        (["--input", "x=4", "--jobs", "0"], "--jobs must be at least 1"),
        (["--input", "x=four"], "flow input 'x' expects int, got str"),
    ],
)
def test_usage_errors_give_exit_status_2(capsys, report, args, message):
    code, out, err = cli(capsys, "run", report, *args)
    assert code == 2
    assert message in err and "Traceback" not in err


def test_invalid_flows_give_exit_status_2_with_locations(capsys, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("perflow: 1\nsteps:\n  a:\n    pass: t_inc\n    settings: {by: x}\n")
    for cmd in ("run", "validate"):
        code, out, err = cli(capsys, cmd, bad)
        assert code == 2
        assert f"perflow: error: {bad}: flow is invalid (2 problems):" in err
        assert "steps.a.inputs (line 3, column 3): missing input 'x' (int) of pass 't_inc'" in err
        assert "steps.a.settings.by (line 5, column 16): setting 'by' of pass 't_inc' expects int, got str 'x'" in err
    code, out, err = cli(capsys, "run", "no_such_flow")
    assert code == 2 and "no_such_flow: no such flow file, and no shipped flow of that name" in err
    multi = tmp_path / "multi.yaml"
    multi.write_text(
        "perflow: 1\ninputs: {a: int, b: int}\nsteps:\n  s: {pass: t_add, inputs: {a: input:a, b: input:b}}\n"
    )
    code, out, err = cli(capsys, "run", multi, "--input", "3")
    assert code == 2 and "--input '3' has no NAME=; flow 'multi' has the inputs a, b" in err


def test_allow_import(capsys, tmp_path):
    flow = tmp_path / "dotted.yaml"
    flow.write_text(
        "perflow: 1\nsteps:\n  c: {pass: t_const}\n  p: {pass: 'tests.flow.helpers:plain', inputs: {x: c}}\n"
    )
    code, out, err = cli(capsys, "validate", flow)
    assert code == 2 and "steps.p.pass (line 4, column 7): pass 'tests.flow.helpers:plain' names code to import" in err
    code, out, err = cli(capsys, "run", flow, "--allow-import")
    assert code == 0 and out == "2\n"


def test_validate_a_good_flow(capsys, report):
    code, out, err = cli(capsys, "validate", report)
    assert code == 0
    assert out == f"{report}: valid flow 'report': 3 steps (3 tasks); inputs: x (int); outputs: table, text, parts\n"


def test_cache_and_progress(capsys, report, tmp_path):
    args = ["run", report, "-i", "x=2", "--cache", tmp_path / "cache", "--progress", "-j", "1"]
    code, out, err = cli(capsys, *args)
    assert code == 0 and "[1/3] table (t_frame) done in" in err and "3 done" in err
    code, out2, err = cli(capsys, *args)
    assert code == 0 and out2 == out and "3 cached" in err and "[1/3] table (t_frame) cached" in err


def test_passes_lists_and_describes(capsys):
    code, out, err = cli(capsys, "passes")
    assert code == 0 and any(line.startswith("read ") for line in out.splitlines())
    code, out, err = cli(capsys, "passes", "--tag", "io")
    assert code == 0 and "read" in out and "t_text" not in out
    code, out, err = cli(capsys, "passes", "t_opt")
    assert code == 0
    assert out.splitlines()[:2] == ["t_opt (version 1)", "  Optional input y, a float setting, a tuple setting."]
    assert (
        "  x: int\n  y: int = 10\n" in out and "  scale: float = 1.0\n" in out and "names: tuple[str, ...] = ()" in out
    )
    code, out, err = cli(capsys, "passes", "save_pag")
    assert "  path: str (required)  -- Where to save it" in out and "not cached across runs" in out
    code, out, err = cli(capsys, "passes", "t_txt")
    assert code == 2 and "unknown pass 't_txt'; did you mean 't_text'?" in err


def test_flows_lists_and_prints(capsys):
    code, out, err = cli(capsys, "flows")
    rows: dict[str, str] = {}  # other shipped flows may be listed too; long descriptions go on, indented
    name = ""
    for line in out.splitlines():
        if line.startswith(" "):
            rows[name] += " " + line.strip()
        else:
            name, text = line.split(None, 1)
            rows[name] = text
    assert code == 0 and rows["convert"] == "Read performance data in any supported format and save it as a PAG."
    assert rows["overview"] == "A Markdown overview of a run: where the time goes in the calling-context tree."
    code, out, err = cli(capsys, "flows", "convert")
    assert code == 0 and out.startswith("perflow: 1\nname: convert\n")
    code, out, err = cli(capsys, "flows", "convrt")
    assert code == 2 and "no shipped flow 'convrt'; did you mean 'convert'?" in err


def test_the_console_entry_point_runs_in_a_subprocess():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    p = subprocess.run(
        [sys.executable, "-m", "perflow", "flows"], capture_output=True, text=True, timeout=120, env=env, cwd=REPO
    )
    assert p.returncode == 0, p.stderr
    assert "convert" in p.stdout
    p = subprocess.run(
        [sys.executable, "-m", "perflow", "validate", "nope.yaml"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=REPO,
    )
    assert p.returncode == 2
    assert (
        p.stderr
        == "perflow: error: nope.yaml: no such flow file, and no shipped flow of that name (see `perflow flows`)\n"
    )
