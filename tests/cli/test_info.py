"""`perflow info` and the CLI's error handling."""

import subprocess
import sys
from pathlib import Path

import pytest

from perflow.cli.main import main

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "data" / "ring8.pag"


def test_info_on_the_shipped_sample(capsys):
    assert main(["info", str(SAMPLE)]) == 0
    out = capsys.readouterr().out
    assert "processes   8" in out
    assert "640 messages" in out
    lines = [ln for ln in out.splitlines() if "main/timestep/compute" in ln]
    assert lines and lines[0].split()[0].endswith("%")


def test_info_top_option(capsys):
    assert main(["info", str(SAMPLE), "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert "top 2 by time_exc" in out
    assert len([ln for ln in out.splitlines() if "main/" in ln]) == 2


def test_errors_are_one_line_with_status_2(tmp_path, capsys):
    assert main(["info", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("perflow: error:") and "no such file" in err[0]
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x00\x01garbage")
    assert main(["info", str(junk)]) == 2
    assert "cannot tell the format" in capsys.readouterr().err
    assert main(["info", str(junk), "--format", "otf9"]) == 2
    assert "unknown format" in capsys.readouterr().err


def test_debug_shows_the_traceback(tmp_path, capsys):
    assert main(["--debug", "info", str(tmp_path / "nothing")]) == 2
    assert "Traceback" in capsys.readouterr().err


def test_usage_errors(capsys):
    with pytest.raises(SystemExit) as e:
        main(["info"])
    assert e.value.code == 2
    assert main([]) == 2


def test_console_entry_point_runs_as_module():
    r = subprocess.run(
        [sys.executable, "-m", "perflow", "info", str(SAMPLE), "--top", "1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert "top 1 by time_exc" in r.stdout
