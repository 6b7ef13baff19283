"""The command line as a user starts it: global options anywhere, shell completion, progress on a terminal."""

from __future__ import annotations

import io
import os
import pty
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from perflow import progress
from perflow.cli.main import build_parser, main

REPO = Path(__file__).resolve().parents[2]
RING8 = REPO / "examples" / "data" / "ring8" / "traces.otf2"
PERFLOW = [sys.executable, "-m", "perflow"]


# ------------------------------------------------------------------ global options
@pytest.mark.parametrize(
    ("argv", "quiet", "verbose", "debug"),
    [
        (["passes"], False, False, False),
        (["-q", "passes"], True, False, False),
        (["passes", "-q"], True, False, False),
        (["passes", "--quiet", "hotspot"], True, False, False),
        (["-v", "run", "x"], False, True, False),
        (["run", "x", "--verbose"], False, True, False),
        (["--debug", "run", "x", "-q"], True, False, True),  # one before, one after: both count
        (["run", "x", "--debug"], False, False, True),
        (["info", "x", "-v"], False, True, False),
        (["flows", "-q", "mpi_profiler"], True, False, False),
    ],
)
def test_global_options_before_or_after_the_subcommand(argv, quiet, verbose, debug) -> None:
    args = build_parser().parse_args(argv)
    assert (args.quiet, args.verbose, args.debug) == (quiet, verbose, debug)


def test_quiet_after_the_subcommand_silences_the_summary(capsys) -> None:
    assert main(["run", "mpi_profiler", "--input", str(RING8)]) == 0
    loud = capsys.readouterr()
    assert "perflow: flow 'mpi_profiler'" in loud.err
    assert main(["run", "mpi_profiler", "--input", str(RING8), "-q"]) == 0
    quiet = capsys.readouterr()
    assert quiet.err == "" and quiet.out == loud.out


def test_unknown_option_is_one_line_usage_error(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["passes", "--quietly"])
    assert exc.value.code == 2
    assert "perflow: error: unrecognized arguments: --quietly" in capsys.readouterr().err


def test_version_and_help_do_not_load_the_analysis_stack() -> None:
    code = (
        "import sys\n"
        "from perflow.cli.main import main\n"
        "try:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('pandas', 'numpy', 'numba', 'matplotlib', 'scipy') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.splitlines()[0] == "perflow 0.1.0"
    assert out.stdout.splitlines()[-1] == "[]"


# ------------------------------------------------------------------ completion
def _complete(line: str, tmp_path: Path) -> list[str]:
    """What argcomplete answers the shell for ``line`` (the protocol its scripts use)."""
    out = tmp_path / "completions"
    env = {
        **os.environ,
        "_ARGCOMPLETE": "1",
        "_ARGCOMPLETE_SHELL": "bash",
        "_ARGCOMPLETE_IFS": "\n",
        "COMP_LINE": line,
        "COMP_POINT": str(len(line)),
        "_ARGCOMPLETE_STDOUT_FILENAME": str(out),
    }
    subprocess.run([*PERFLOW], env=env, capture_output=True, text=True, timeout=120, check=True)
    return sorted(w.strip() for w in out.read_text().split("\n") if w.strip())


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("perflow ru", ["run"]),
        ("perflow pa", ["passes"]),
        ("perflow run mpi_", ["mpi_profiler"]),
        ("perflow run wait", ["wait_states"]),
        ("perflow flows crit", ["critical_path"]),
        ("perflow passes hotsp", ["hotspot", "hotspot_set"]),
        ("perflow passes plot_b", ["plot_breakdown"]),
        ("perflow completion ", ["bash", "fish", "zsh"]),
        ("perflow run --eng", ["--engine"]),
        ("perflow run x --engine ", ["dask", "local"]),
    ],
)
def test_completion_of_subcommands_flows_passes_options(line, expected, tmp_path) -> None:
    assert _complete(line, tmp_path) == expected


def test_completion_of_flow_files(tmp_path) -> None:
    (tmp_path / "mine.yaml").write_text("")
    (tmp_path / "notes.txt").write_text("")
    got = _complete(f"perflow run {tmp_path}/m", tmp_path)
    assert got == [f"{tmp_path}/mine.yaml"]


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_script(shell, capsys) -> None:
    assert main(["completion", shell]) == 0
    script = capsys.readouterr().out
    assert "perflow" in script and "_ARGCOMPLETE" in script
    exe = shutil.which(shell)
    if exe is None:
        pytest.skip(f"{shell} is not installed")
    check = [exe, "--no-execute", "-c", script] if shell == "fish" else [exe, "-n", "-c", script]
    res = subprocess.run(check, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr


def test_bash_completes_with_the_script(tmp_path) -> None:
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash is not installed")
    script = tmp_path / "complete.sh"
    script.write_text(
        'source <("$@" completion bash)\n'
        'COMP_LINE="perflow passes wait_state"; COMP_POINT=${#COMP_LINE}\n'
        "COMP_WORDS=(perflow passes wait_state); COMP_CWORD=2\n"
        "_python_argcomplete perflow wait_state passes\n"
        "printf '%s\\n' \"${COMPREPLY[@]}\"\n"
    )
    bindir = tmp_path / "bin"
    bindir.mkdir()
    shim = bindir / "perflow"  # the script runs `perflow`: this interpreter's
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m perflow "$@"\n')
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}
    res = subprocess.run([bash, str(script), "perflow"], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert sorted(w.strip() for w in res.stdout.splitlines()) == ["wait_state_summary", "wait_states"]


# ------------------------------------------------------------------ progress
def _on_a_terminal(work, monkeypatch) -> str:
    """Run ``work()`` with progress enabled on a pseudo-terminal; return what the terminal showed."""
    master, slave = pty.openpty()
    stream = io.TextIOWrapper(io.FileIO(slave, "w", closefd=False), write_through=True)
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    monkeypatch.setattr(progress, "DELAY", 0.05)
    progress.enable(stream)
    try:
        work()
    finally:
        progress.disable()
        stream.flush()
        os.close(slave)
        reader.join(timeout=5)
        os.close(master)
    return b"".join(chunks).decode(errors="replace")


def test_progress_shows_on_a_terminal(monkeypatch) -> None:
    def work() -> None:
        with progress.task("decoding big.otf2"):
            with progress.task("running the flow", total=4, unit="step") as t:
                for _ in range(4):
                    time.sleep(0.1)
                    t.advance()
            progress.notice("compiling analysis kernels (first run only, ~5 s)...")
            time.sleep(0.2)

    shown = _on_a_terminal(work, monkeypatch)
    assert "decoding big.otf2" in shown and "running the flow" in shown
    assert "/4 steps" in shown
    assert "perflow: compiling analysis kernels (first run only, ~5 s)..." in shown


def test_progress_is_silent_when_not_a_terminal(monkeypatch, caplog) -> None:
    monkeypatch.setattr(progress, "DELAY", 0.0)
    stream = io.StringIO()
    progress.enable(stream)
    try:
        with progress.task("reading", total=2) as t:
            time.sleep(0.1)
            t.advance(2)
        progress.notice("compiling analysis kernels (first run only, ~5 s)...")
    finally:
        progress.disable()
    assert stream.getvalue() == ""
    assert not progress.enabled()


def test_flow_run_reports_steps_to_the_display(monkeypatch) -> None:
    seen: list[tuple[str, object]] = []

    class Recorder:
        def __init__(self, description, total, unit) -> None:
            seen.append(("task", (description, total, unit)))

        def describe(self, text) -> None:
            seen.append(("describe", text))

        def advance(self, n=1) -> None:
            seen.append(("advance", n))

    import contextlib

    @contextlib.contextmanager
    def task(description, total=None, unit=""):
        yield Recorder(description, total, unit)

    monkeypatch.setattr(progress, "task", task)
    assert main(["run", "mpi_profiler", "--input", str(RING8), "-q"]) == 0
    assert ("task", ("running the flow", 7, "step")) in seen  # the figure step is not needed for the report
    assert ("task", ("reading traces.otf2", None, "")) in seen
    assert sum(1 for k, _ in seen if k == "advance") == 7
    assert ("describe", "step callsites (hotspot)") in seen


# ------------------------------------------------------------------ what a run computes
def test_run_without_output_computes_only_the_report(tmp_path) -> None:
    code = (
        "import sys\n"
        "from perflow.cli.main import main\n"
        f"status = main(['run', 'mpi_profiler', '--input', {str(RING8)!r}])\n"
        "print(status, sorted(m for m in ('matplotlib', 'scipy', 'numba', 'networkx') if m in sys.modules))\n"
    )
    env = {**os.environ, "PERFLOW_JIT": "auto"}  # as a user runs it (the test suite compiles every kernel)
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[-1] == "0 []"  # a small run needs no compiler, no plotting library
    assert "# perflow: MPI profile" in res.stdout
    assert "7 done, 1 unneeded" in res.stderr
    assert "outputs callsites, imbalance, breakdown, figure, communication not shown" in res.stderr


def test_run_with_output_computes_everything(tmp_path, capsys) -> None:
    assert main(["run", "mpi_profiler", "--input", str(RING8), "-o", str(tmp_path)]) == 0
    assert "8 done" in capsys.readouterr().err
    assert (tmp_path / "figure.png").stat().st_size > 1000


def test_api_selects_outputs() -> None:
    import perflow

    pag = perflow.read(RING8)
    res = perflow.run("mpi_profiler", pag=pag, outputs=["callsites"])
    assert list(res.outputs) == ["callsites"]
    status = res.steps["status"].to_dict()
    assert status["callsites"] == "done" and status["breakdown_figure"] == "unneeded" and status["report"] == "unneeded"
    with pytest.raises(perflow.FlowError, match="flow 'mpi_profiler' has no output 'nope'"):
        perflow.run("mpi_profiler", pag=pag, outputs=["nope"])
