"""``perflow record`` on the command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from perflow.cli.main import main


def test_record_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["record"]) == 2
    assert "perflow: error: no program given; usage: perflow record" in capsys.readouterr().err
    assert main(["record", "--", "/no/such/program"]) == 2
    assert "perflow: error: program not found: /no/such/program" in capsys.readouterr().err
    assert main(["record", "--sample-rate", "-5", "--", "true"]) == 2
    assert "--sample-rate must be >= 0" in capsys.readouterr().err


@pytest.mark.mpi
def test_record_cli_run(
    build, workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:  # noqa: ANN001
    monkeypatch.setenv("PERFLOW_RECORDER_CACHE", str(workdir / "libcache"))
    out = tmp_path / "run"
    argv = ["record", "-n", "2", "-o", str(out), "--timeout", "120", "--", str(build("pingpong.c")), "3", "100"]
    assert main(argv) == 0
    o, e = capfd.readouterr()
    assert o == "pingpong: 3 round trips of 100 bytes, counter 3\n"  # the program's output, nothing else
    assert "ranks: 2" in e and "messages: 6 (600 bytes)" in e
    assert (out / "rawtrace.npz").is_file()
    last = e.strip().splitlines()[-1]
    assert last.startswith("analyse further: perflow info ")
    target = last.split("perflow info ", 1)[1]
    assert main(["info", target]) == 0
    assert "processes   2" in capfd.readouterr().out


@pytest.mark.mpi
def test_record_cli_exit_status(
    build, workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:  # noqa: ANN001
    monkeypatch.setenv("PERFLOW_RECORDER_CACHE", str(workdir / "libcache"))
    argv = [
        "-q",
        "record",
        "-n",
        "4",
        "-o",
        str(tmp_path / "r"),
        "--timeout",
        "120",
        "--",
        str(build("subcomm.c")),
        "3",
    ]
    assert main(argv) == 3
    assert "the program exited with status 3" in capfd.readouterr().err
