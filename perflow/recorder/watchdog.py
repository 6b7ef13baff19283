"""The watchdog of ``perflow record``: no orphaned ranks, and a readable folder, when perflow record is killed.

``perflow record`` runs the launcher in a process group of its own and stops
it itself on a time limit, Ctrl-C, SIGTERM or SIGHUP. A SIGKILL leaves it no
chance: so it starts this watchdog, a separate process in its own session,
holding the read end of a pipe whose write end only perflow record holds.
When perflow record finishes it writes ``done`` and the watchdog exits. When
the pipe reaches its end without ``done`` (perflow record died: the kernel
closed its end), the watchdog stops the launcher's process group (SIGTERM,
then SIGKILL: mpirun and every rank) and assembles what the ranks recorded
into the output folder (``rawtrace.npz``, the OTF2 trace, the saved PAG),
so that ``perflow info`` can read it and says the run was stopped.

Run as ``python -m perflow.recorder.watchdog FD PGID OUTDIR ATTRS_JSON``.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Watchdog", "main", "stop_ranks"]

log = logging.getLogger(__name__)


@dataclass
class Watchdog:
    """perflow record's end of the watchdog: :meth:`release` when the run is handled here."""

    proc: subprocess.Popen | None
    fd: int

    @classmethod
    def start(cls, pgid: int, outdir: Path | None, attrs: dict[str, Any] | None) -> Watchdog:
        """Start the watchdog of the launcher's process group ``pgid`` (``outdir``: where to assemble)."""
        r, w = os.pipe()
        os.set_inheritable(r, True)
        argv = [sys.executable, "-m", "perflow.recorder.watchdog", str(r), str(pgid), str(outdir or ""),
                json.dumps(attrs or {}, default=str)]  # fmt: skip
        try:
            proc = subprocess.Popen(
                argv,
                pass_fds=(r,),
                start_new_session=True,  # Ctrl-C and a closing terminal do not reach it
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                env={**os.environ, "PYTHONPATH": _pythonpath()},
            )
        except OSError as exc:  # pragma: no cover - the recording goes on without one
            log.warning("no watchdog for the run (%s): a SIGKILL of perflow record would orphan the ranks", exc)
            proc = None
        os.close(r)
        return cls(proc, w)

    def release(self) -> None:
        """perflow record handles the end of the run itself: the watchdog exits."""
        try:
            os.write(self.fd, b"done")
        except OSError:
            pass
        os.close(self.fd)
        if self.proc is not None:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # pragma: no cover
                self.proc.kill()


def _pythonpath() -> str:
    """A PYTHONPATH under which ``import perflow`` finds this perflow."""
    here = str(Path(__file__).resolve().parents[2])
    orig = os.environ.get("PYTHONPATH")
    return here + (os.pathsep + orig if orig else "")


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover
        return True
    return True


def _stop(pgid: int) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        for _ in range(50):
            time.sleep(0.1)
            if not _alive(pgid):
                return


def stop_ranks(rawdir: Path | None, grace: float = 3.0) -> None:
    """SIGTERM to each recorded rank still running, and a moment for its crash handler to flush.

    The ranks are the processes that write ``rawdir/p<pid>.*`` (checked by
    their environment); asked first, each flushes what it recorded before the
    launcher, noticing, kills the others without warning.
    """
    if rawdir is None or not rawdir.is_dir():
        return
    mark = f"PERFLOW_RECORD_DIR={rawdir.resolve()}".encode()
    pids = []
    for f in rawdir.glob("p*.txt"):
        try:
            pid = int(f.stem[1:])
            if mark in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                os.kill(pid, signal.SIGTERM)
                pids.append(pid)
        except (ValueError, OSError):
            continue
    t0 = time.monotonic()
    while pids and time.monotonic() - t0 < grace:
        pids = [p for p in pids if Path(f"/proc/{p}").exists() and not _zombie(p)]
        time.sleep(0.05)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return True


def main(argv: list[str]) -> int:
    fd, pgid, outdir, attrs = int(argv[0]), int(argv[1]), argv[2], json.loads(argv[3])
    data = b""
    while True:
        try:
            chunk = os.read(fd, 64)
        except InterruptedError:  # pragma: no cover
            continue
        if not chunk:
            break
        data += chunk
    if b"done" in data:
        return 0
    stop_ranks(Path(outdir) / "raw" if outdir else None)  # perflow record died: the ranks flush and stop,
    _stop(pgid)  # then the launcher and whatever is left of its process group
    if not outdir:
        return 0
    # the assembly (numpy, pandas, the OTF2 writer) is imported on this path only: the watchdog
    # starts with every `perflow record` and must start fast (stdlib only, see the module docstring)
    from .session import RecordResult, assemble_outputs

    attrs["stopped"] = "perflow record was killed; the watchdog stopped the program and assembled what it recorded"
    outputs = tuple(attrs.pop("outputs", ("otf2", "pag")))
    result = RecordResult(status=137, outdir=Path(outdir))
    try:
        assemble_outputs(result, {**attrs, "exit_status": 137}, outputs, int(attrs.get("ranks_requested", 1)))
    except Exception as exc:  # noqa: BLE001 - nobody is listening: leave a note beside the data
        (Path(outdir) / "watchdog.log").write_text(f"could not assemble the recording: {exc}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
