"""OTF2 archive integrity: each hole that used to lose data silently, reproduced and closed.

* local definitions missing, empty or corrupt: every message of the location
  was dropped (its communicator mapping was lost), now a FormatError naming
  the ``.def`` file;
* a corrupt global definitions file could read as an empty trace, now the
  definitions are counted against the anchor file's declaration;
* an event file whose records the library stopped reading early decoded as
  a shorter trace, now decoded counts are compared with the declared ones;
* an exception in a forked decoder process kept no traceback, now the
  child's traceback is the ``__cause__`` of the re-raised exception.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
import traceback

import pytest

from perflow.errors import FormatError
from perflow.readers.otf2 import decode
from perflow.readers.otf2._forked import ChildTraceback, run_forked
from perflow.trace.build import build_pag

DECODERS = ["fast", "bindings"]


@pytest.fixture
def pingpong(otf2_sample, tmp_path):
    src = otf2_sample("ping-pong")
    dst = tmp_path / "pp"
    shutil.copytree(src, dst)
    for root, dirs, files in os.walk(dst):
        for f in dirs + files:
            os.chmod(os.path.join(root, f), 0o755)
    return dst


def _poke(path, pos: int, value: int) -> None:
    b = bytearray(path.read_bytes())
    b[pos] = value
    path.write_bytes(bytes(b))


@pytest.mark.parametrize("decoder", DECODERS)
def test_intact_sample_keeps_its_messages(pingpong, decoder):
    pag = build_pag(decode(pingpong, decoder=decoder))
    assert len(pag.trace.messages) == 16


@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda p: p.unlink(), "local definitions of location 1 are missing"),
        (lambda p: p.write_bytes(b""), "local definitions of location 1 are empty"),
        (
            lambda p: p.write_bytes(b"\xff" * 40 + p.read_bytes()[40:]),
            "local definitions of location 1 are not readable",
        ),
    ],
    ids=["missing", "empty", "corrupt"],
)
def test_damaged_local_definitions(pingpong, decoder, damage, message):
    """Before: 0 of 16 messages matched (location 1's communicator ids went unmapped), exit 0."""
    target = pingpong / "traces" / "1.def"
    damage(target)
    with pytest.raises(FormatError, match=message) as e:
        decode(pingpong, decoder=decoder)
    assert e.value.path == str(target)


def test_archive_without_local_definitions_is_fine(tmp_path):
    """Writers that never write local definitions (none for any location) are still read."""
    from tests.otf2kit import CArchive

    a = CArchive(tmp_path / "a")
    a.local_defs = False
    main = a.region("main")
    loc = a.location("t", a.location_group("p"))
    a.call(loc, 0, 10, main)
    raw = decode(a.close(), decoder="fast")
    assert len(raw.region_events["time"]) == 2


@pytest.mark.parametrize("decoder", DECODERS)
def test_corrupt_global_definitions_counted_against_the_anchor(pingpong, decoder):
    """Before: one damaged byte made the library stop at once: 0 locations, 0 regions, an empty trace, exit 0."""
    _poke(pingpong / "traces.def", 4930, 0)
    with pytest.raises(FormatError, match=r"holds \d+ global definitions, the anchor file declares 533") as e:
        decode(pingpong, decoder=decoder)
    assert e.value.path.endswith("traces.def")


@pytest.mark.parametrize("decoder", DECODERS)
def test_event_records_counted_against_the_declaration(pingpong, decoder):
    """Before: a damaged chunk made the library stop reading location 1 without an error: 0 of 60 events."""
    _poke(pingpong / "traces" / "1.evt", 18, 2)
    with pytest.raises(FormatError, match="holds 0 event records, the definitions declare 60 for location 1") as e:
        decode(pingpong, decoder=decoder)
    assert e.value.path.endswith(os.path.join("traces", "1.evt"))


def test_more_events_than_declared_is_a_warning(tmp_path, caplog):
    """Nothing is lost when a location holds more records than declared: every one is read, with a warning."""
    from tests.otf2kit import CArchive

    a = CArchive(tmp_path / "a")
    main = a.region("main")
    loc = a.location("t", a.location_group("p"))
    a.call(loc, 0, 10, a.region("f"))
    a.call(loc, 10, 20, main)
    anchor = a.close(declared={loc: 3})
    for decoder in DECODERS:
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="perflow.readers.otf2"):
            raw = decode(anchor, decoder=decoder)
        assert len(raw.region_events["time"]) == 4
        assert "location 0 holds 4 event records, its definition declares 3 (all were read)" in caplog.text


def _fails_deep() -> None:
    def inner_helper_in_child() -> None:
        raise ValueError("boom in the child")

    inner_helper_in_child()


def _format_error_in_child() -> None:
    raise FormatError("some/file.evt", "broken here")


def test_child_traceback_is_kept():
    with pytest.raises(ValueError, match="boom in the child") as e:
        run_forked([(_fails_deep, ())], deadline=time.monotonic() + 60)
    cause = e.value.__cause__
    assert isinstance(cause, ChildTraceback)
    assert "inner_helper_in_child" in cause.text
    shown = "".join(traceback.format_exception(e.value))
    assert "In the forked child process" in shown and "inner_helper_in_child" in shown
    with pytest.raises(FormatError, match="broken here") as e2:
        run_forked([(_format_error_in_child, ())], deadline=time.monotonic() + 60)
    assert "_format_error_in_child" in e2.value.__cause__.text


def test_cli_debug_shows_the_child_traceback(pingpong, capsys):
    from perflow.cli.main import main

    _poke(pingpong / "traces" / "1.evt", 18, 2)
    assert main(["--debug", "info", str(pingpong)]) != 0
    err = capsys.readouterr().err
    assert "In the forked child process" in err and "_check_event_counts" in err
    assert "perflow: error:" in err and "1.evt" in err
    assert main(["info", str(pingpong)]) != 0
    err = capsys.readouterr().err
    assert "In the forked child process" not in err and "1.evt" in err
