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
    target, _, then = last.split("perflow info ", 1)[1].partition("; ")
    assert then == f"perflow run root_cause {out} -o {out}-report"
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


def test_cc_wrappers_add_instrumentation(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cc", "--compiler", "gcc", "--show", "--", "-O3", "-c", "a.c"]) == 0
    cmd = capsys.readouterr().out.split()
    assert cmd[0].endswith("gcc") and cmd[-3:] == ["-O3", "-c", "a.c"]
    assert "-finstrument-functions" in cmd and "-g" in cmd
    assert (
        "-finstrument-functions-exclude-file-list=/usr/include/,/usr/lib/gcc/,/usr/local/include/,/usr/lib/llvm-" in cmd
    )
    argv = ["cxx", "--compiler", "g++", "--show", "--exclude-function", "tiny", "--exclude-file", "vendor/"]
    assert main([*argv, "--", "-g", "-o", "app", "a.cpp"]) == 0
    cmd = capsys.readouterr().out.split()
    assert "-finstrument-functions-exclude-function-list=tiny" in cmd and cmd.count("-g") == 1
    files = "/usr/include/,/usr/lib/gcc/,/usr/local/include/,/usr/lib/llvm-,vendor/"
    assert f"-finstrument-functions-exclude-file-list={files}" in cmd
    # a link step, and sources outside --only, are passed through unchanged
    assert main(["fc", "--compiler", "gfortran", "--show", "--", "-o", "app", "a.o", "b.o"]) == 0
    assert "-finstrument" not in capsys.readouterr().out
    assert main(["cc", "--compiler", "gcc", "--only", "solver/*", "--show", "--", "-c", "io/read.c"]) == 0
    assert "-finstrument" not in capsys.readouterr().out
    assert (
        main(
            [
                "cc",
                "--",
            ]
        )
        == 2
    )
    assert "nothing to compile" in capsys.readouterr().err
    assert main(["cc", "--compiler", "no-such-cc-xyz", "--", "-c", "a.c"]) == 2
    assert "compiler not found: no-such-cc-xyz" in capsys.readouterr().err
    assert main(["cc", "--help"]) == 0
    assert "--exclude-function" in capsys.readouterr().out


@pytest.mark.mpi
def test_instrumented_program_on_the_command_line(
    toolchain, workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:  # noqa: ANN001
    """perflow cc, then perflow record (with and without the runtime filter), then info/run on the folder."""
    from perflow.trace.store import load_raw

    from .conftest import PROGRAMS
    from .otf2check import check_otf2

    monkeypatch.setenv("PERFLOW_RECORDER_CACHE", str(workdir / "libcache"))
    exe = tmp_path / "tiny_prog"
    assert main(["cc", "--", "-O2", "-o", str(exe), str(PROGRAMS / "tiny_calls.c")]) == 0
    counts = {}
    for label, extra in (("filtered", []), ("all", ["--min-call", "0"])):
        out = tmp_path / label
        assert (
            main(["-q", "record", "-n", "1", "-o", str(out), *extra, "--timeout", "120", "--", str(exe), "20000"]) == 0
        )
        raw = load_raw(out / "rawtrace.npz")
        check_otf2(out / "trace" / "traces.otf2")  # 40 000 user-function events and samples, in order
        ev = raw.table("region_events")
        names = raw.regions["name"].to_numpy()[ev.loc[ev["kind"] == 0, "region"]]
        counts[label] = {n: int((names == n).sum()) for n in ("tiny", "medium", "main")}
    assert counts["all"] == {"tiny": 20000, "medium": 5, "main": 1}
    assert counts["filtered"]["medium"] == 5 and counts["filtered"]["main"] == 1
    assert counts["filtered"]["tiny"] <= 5  # dropped (kept only when a sample fell inside one)
    capfd.readouterr()
    # the recording folder is an input for info and run
    assert main(["info", str(tmp_path / "filtered")]) == 0
    o = capfd.readouterr().out
    assert "(recording)" in o and "processes   1" in o and "main/medium" in o
    assert main(["run", "hotspot", "--input", str(tmp_path / "filtered")]) == 0
    assert "medium" in capfd.readouterr().out


def test_recording_folder_detection(tmp_path: Path) -> None:
    from perflow.errors import FormatError
    from perflow.readers import detect_format
    from perflow.readers.recording import detect, read

    assert not detect(tmp_path)
    (tmp_path / "raw").mkdir()
    assert not detect(tmp_path)
    with pytest.raises(FormatError, match="not a perflow recording: no run.pag, rawtrace.npz or trace/traces.otf2"):
        read(tmp_path)
    (tmp_path / "rawtrace.npz").write_bytes(b"")
    assert detect(tmp_path) and detect_format(tmp_path) == "recording"
