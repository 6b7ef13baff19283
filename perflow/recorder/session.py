"""Run a program under the recorder and turn what it left into a trace and a PAG.

:func:`record` is what ``perflow record`` calls: it builds (or reuses) the
interposition library, launches the program with the MPI launcher, waits for it
(with an optional time limit), assembles the per-rank data into a
:class:`~perflow.trace.raw.RawTrace` and writes ``rawtrace.npz``, an OTF2 trace
and a saved PAG (when the writer and the builder are available) into the
output directory.
"""

from __future__ import annotations

import datetime
import logging
import os
import platform
import shlex
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import PerflowError, RecordError
from ..trace.build import build_pag
from ..trace.raw import RawTrace
from ..trace.store import save_raw
from ..writers.otf2 import write_otf2
from .assemble import load_recording
from .binding import check_bindings, check_openmp, program_binding
from .filtermap import map_filter
from .filters import DEFAULT_FILTER, Filter, read_filter
from .launch import is_python, launch_command, python_command, python_mpi
from .toolchain import Toolchain, build_library, find_toolchain, program_mpi
from .watchdog import Watchdog, stop_ranks

__all__ = [
    "record",
    "RecordResult",
    "is_python",
    "python_command",
    "launch_command",
    "program_binding",
    "DEFAULT_SAMPLE_RATE",
    "SAMPLE_CLOCKS",
]

log = logging.getLogger(__name__)
_PYRT = str(Path(__file__).resolve().parent / "pyrt")  # holds the top-level package perflow_pyrec


#: samples per second by default: a few hundred per rank-second of computation even on a loaded machine, at
#: about 2% of the run time on the development machine, whose timer interrupts cost 30 us (docs/recording.md,
#: "Overhead")
DEFAULT_SAMPLE_RATE = 500
#: clocks the sampling timer can run on (see :func:`record`)
SAMPLE_CLOCKS = ("wall", "cpu")


@dataclass
class RecordResult:
    """What :func:`record` produced.

    Attributes
    ----------
    status : int
        The program's exit status (as the launcher reported it; 128+N when killed by signal N).
    outdir : pathlib.Path
    raw : RawTrace or None
        The assembled trace (None when the program left no usable data).
    files : dict of str to pathlib.Path
        ``"rawtrace"``, ``"otf2"``, ``"pag"``: what was written.
    notes : list of str
        What could not be done (e.g. no OTF2 writer available).
    elapsed : float
        Wall time of the program run, in seconds.
    """

    status: int
    outdir: Path
    raw: RawTrace | None = None
    files: dict[str, Path] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    elapsed: float = 0.0


class _Stopped(Exception):
    """perflow record itself was asked to stop (SIGTERM, SIGHUP) while the program ran."""

    def __init__(self, sig: int) -> None:
        super().__init__(signal.Signals(sig).name)
        self.sig = sig


def _kill_group(proc: subprocess.Popen, rawdir: Path | None = None) -> None:
    """Stop the ranks (each flushing first), then the launcher and its process group: SIGTERM, then SIGKILL.

    A second Ctrl-C meanwhile is ignored: interrupting this would leave the ranks running or unflushed.
    """
    main = threading.current_thread() is threading.main_thread()
    old = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        _stop_group(proc, rawdir)
    finally:
        if main:
            signal.signal(signal.SIGINT, old)


def _stop_group(proc: subprocess.Popen, rawdir: Path | None) -> None:
    stop_ranks(rawdir)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue


def _run(
    argv: list[str], env: dict, timeout: float | None, stdout: Any = None, stderr: Any = None, salvage: Any = None
) -> tuple[int, str]:
    """Run the launcher in its own process group; (exit status, why it was stopped: "" when it was not).

    The launcher and its ranks are stopped when the time limit passes, on
    Ctrl-C, and when perflow record receives SIGTERM or SIGHUP; a watchdog
    process (:mod:`perflow.recorder.watchdog`) stops them, and assembles what
    they recorded, when perflow record is killed outright (SIGKILL).
    ``salvage``: (output folder, attributes) for the watchdog.
    """
    log.debug("running %s", " ".join(argv))
    try:
        proc = subprocess.Popen(argv, env=env, start_new_session=True, stdout=stdout, stderr=stderr)
    except OSError as exc:
        raise RecordError(f"cannot start {argv[0]}: {exc}") from None

    rawdir = Path(salvage[0]) / "raw" if salvage and salvage[0] else None
    try:
        dog = Watchdog.start(proc.pid, *(salvage or (None, None)))
    except BaseException:  # Ctrl-C while the watchdog starts: the launcher runs in a session of its own
        _kill_group(proc, rawdir)
        raise

    def stop(sig: int, frame: Any) -> None:
        raise _Stopped(sig)

    old = {}
    if threading.current_thread() is threading.main_thread():
        old = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGHUP)}
    why = ""
    try:
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc, rawdir)
            rc, why = 124, f"the program did not finish within {timeout:g} s and was killed"
        except KeyboardInterrupt:
            _kill_group(proc, rawdir)
            rc, why = 130, "perflow record was interrupted (Ctrl-C); the program was stopped"
        except _Stopped as exc:
            _kill_group(proc, rawdir)
            rc, why = 128 + exc.sig, f"perflow record received {exc}; the program was stopped"
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        dog.release()  # this process assembles the recording itself
    if not why and rc < 0:
        rc = 128 - rc
    return rc, why


def _default_outdir(program: list[str]) -> Path:
    name = Path(program[1] if is_python(program) and len(program) > 1 else program[0]).stem or "program"
    return Path(f"perflow-{name}-{datetime.datetime.now():%Y%m%d-%H%M%S}")


def record(
    program: list[str],
    nprocs: int = 1,
    mpirun: str | None = None,
    sample_rate: int = DEFAULT_SAMPLE_RATE,
    min_call: float | None = None,
    outdir: str | os.PathLike[str] | None = None,
    timeout: float | None = None,
    cache: str | os.PathLike[str] | None = None,
    outputs: tuple[str, ...] = ("otf2", "pag"),
    stdout: Any = None,
    stderr: Any = None,
    sample_clock: str = "wall",
    filter: str | os.PathLike[str] | None = None,  # noqa: A002 - the option's name
) -> RecordResult:
    """Record a run of ``program`` on ``nprocs`` MPI ranks.

    Parameters
    ----------
    program : list of str
        The command: an MPI executable (C, C++, Fortran; not recompiled) or a
        Python program (``python script.py ...``, ``script.py``, ``python -m mod``).
    nprocs : int
        Number of ranks.
    mpirun : str, optional
        Launcher command line (default: the implementation's ``mpirun``).
    sample_rate : int
        Samples per second (0 disables sampling; default :data:`DEFAULT_SAMPLE_RATE`).
    min_call : float, optional
        Programs built with ``perflow cc``/``cxx``/``fc``: calls of
        instrumented functions shorter than this (seconds) with nothing
        recorded inside are dropped (default 1e-5; 0 keeps every call).
    outdir : path, optional
        Output directory (default ``perflow-<program>-<date-time>``).
    timeout : float, optional
        Kill the run after this many seconds.
    cache : path, optional
        Where to cache the compiled library.
    outputs : tuple of str
        Besides ``rawtrace.npz``: ``"otf2"`` and/or ``"pag"``.
    stdout, stderr : file, optional
        Where the program's output goes (default: this process's).
    sample_clock : {"wall", "cpu"}
        Native programs: the clock of the sampling timer. ``"wall"`` (a timer
        on the monotonic clock) samples at the rate asked for whether the
        thread runs or not, so that time off the CPU is measured where it
        happened; ``"cpu"`` (a timer on the thread's CPU time) interrupts
        only a running thread, at most at the kernel's tick rate.
    filter : path, optional
        A filter file (Score-P syntax, :mod:`perflow.recorder.filters`):
        programs built with ``perflow cc``/``cxx``/``fc`` do not record the
        functions it excludes.

    Returns
    -------
    RecordResult

    Raises
    ------
    RecordError
        When the library cannot be built, the program cannot be started, the
        run times out, or a successful run left no usable data.
    """
    if not program:
        raise RecordError("no program to record")
    if nprocs < 1:
        raise RecordError(f"the number of ranks must be at least 1, not {nprocs}")
    if sample_clock not in SAMPLE_CLOCKS:
        raise RecordError(f"the sampling clock must be one of {', '.join(SAMPLE_CLOCKS)}, not {sample_clock!r}")
    exe = shutil.which(program[0]) or (program[0] if Path(program[0]).is_file() else None)
    if exe is None:
        raise RecordError(f"program not found: {program[0]}")
    out = Path(outdir) if outdir else _default_outdir(program)
    if out.exists() and not out.is_dir():
        raise RecordError(f"output directory {out} exists and is not a directory")
    rawdir = out / "raw"
    if rawdir.exists():
        shutil.rmtree(rawdir)
    rawdir.mkdir(parents=True)
    env = {
        "PERFLOW_RECORD_DIR": str(rawdir.resolve()),
        "PERFLOW_RECORD_HZ": str(int(sample_rate)),
        "PERFLOW_RECORD_CLOCK": sample_clock,
    }
    if min_call is not None:
        if min_call < 0:
            raise RecordError(f"the shortest recorded call must be >= 0 seconds, not {min_call}")
        env["PERFLOW_RECORD_MIN_CALL"] = repr(float(min_call))
    fmap = None
    if filter is not None and is_python(program):
        raise RecordError("--filter applies to programs built with perflow cc/cxx/fc, not to Python programs")
    if filter is not None:
        # the default's name rules first (std::, ...; its file rules act at compile time), the file's decide
        fmap = map_filter(Filter(names=list(DEFAULT_FILTER.names)) + read_filter(filter), exe)
        mapped = rawdir / "filter.map"
        mapped.write_text(fmap.text(), encoding="utf-8")
        env["PERFLOW_RECORD_FILTER"] = str(mapped.resolve())
    if is_python(program):
        python = shutil.which(program[0]) if not program[0].endswith(".py") else None
        try:
            tc = find_toolchain(python_mpi(python), mpirun)
        except RecordError:
            if nprocs > 1 or mpirun:
                raise
            # one Python process without any MPI installed: run it directly
            tc = Toolchain("none", "", [], "direct")
            env["PERFLOW_RECORD_ALL"] = "1"
        cmd = python_command(program)
        orig = os.environ.get("PYTHONPATH")
        env["PYTHONPATH"] = _PYRT + (os.pathsep + orig if orig else "")
        env["PERFLOW_RECORD_PYTHONPATH_ADDED"] = _PYRT
        if orig is not None:
            env["PERFLOW_RECORD_ORIG_PYTHONPATH"] = orig
    else:
        tc = find_toolchain(program_mpi(exe), mpirun)
        lib = build_library(tc, cache)
        pre = os.environ.get("LD_PRELOAD")
        env["LD_PRELOAD"] = str(lib) + (":" + pre if pre else "")
        cmd = list(program)
    argv, run_env = launch_command(tc, nprocs, cmd, env)
    t = time.perf_counter()
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    attrs = {
        "command": list(program),
        # scalar run information (lists do not reach the PAG's attributes): for ensembles' metadata tables
        "command_line": shlex.join(str(a) for a in program),
        "date": started,
        "host": platform.node(),
        "ranks_requested": nprocs,
        "mpi": tc.impl,
    }
    if fmap is not None:
        attrs["filter"] = str(Path(filter).resolve())  # type: ignore[arg-type]
        attrs["filter_excluded"] = fmap.n_excluded
    status, why = _run(argv, run_env, timeout, stdout, stderr, salvage=(out, {**attrs, "outputs": list(outputs)}))
    result = RecordResult(status=status, outdir=out, elapsed=time.perf_counter() - t)
    attrs["exit_status"] = status
    if why:
        attrs["stopped"] = why
    try:
        assemble_outputs(result, attrs, outputs, nprocs)
    except RecordError:
        if not why:
            raise
        result.notes.append(f"no trace assembled from {rawdir}")
    if not is_python(program) and result.raw is not None:
        check_bindings(result, exe, tc.impl)
        check_openmp(result, exe)
    if why:  # the folder is readable all the same: say so, and stop as asked
        kept = f"; what it recorded until then is in {out}" if result.raw is not None else ""
        if status == 130:
            log.warning("%s%s", why, kept)
            raise KeyboardInterrupt
        raise RecordError(f"{why}{kept}")
    return result


def assemble_outputs(result: RecordResult, attrs: dict, outputs: tuple[str, ...], nprocs: int) -> None:
    """Assemble ``<outdir>/raw`` into ``result.raw`` and write ``rawtrace.npz`` and the outputs.

    Also what the watchdog does for a perflow record that was killed
    (:mod:`perflow.recorder.watchdog`). A run that left nothing usable is a
    RecordError when it exited normally, a note otherwise.
    """
    rawdir = result.outdir / "raw"
    try:
        result.raw = load_recording(rawdir, attrs=attrs)
    except PerflowError as exc:
        if result.status == 0 and "stopped" not in attrs:
            raise RecordError(f"the run left no usable data in {rawdir}: {exc}") from exc
        result.notes.append(f"no trace assembled: {exc}")
        if "stopped" in attrs:
            raise RecordError(f"no trace assembled: {exc}") from exc
        return
    ranks = int(result.raw.locations["process"].nunique())  # (a rank's OpenMP threads are locations too)
    if ranks < nprocs:
        result.notes.append(f"data for {ranks} of {nprocs} ranks only")
    result.files["rawtrace"] = save_raw(result.raw, result.outdir / "rawtrace.npz")
    _write_outputs(result, outputs)


def _write_outputs(result: RecordResult, outputs: tuple[str, ...]) -> None:
    raw, out = result.raw, result.outdir
    if "otf2" in outputs:
        path = out / "trace"
        if (path / "traces.otf2").is_file():  # ours, from an earlier recording into this directory
            shutil.rmtree(path)
        try:
            result.files["otf2"] = Path(write_otf2(raw, path))
        except (PerflowError, OSError, ValueError) as exc:
            log.warning("OTF2 trace not written: %s", exc)
            result.notes.append(f"OTF2 trace not written: {exc}")
    if "pag" in outputs:
        path = out / "run.pag"
        try:
            result.files["pag"] = build_pag(raw).save(path)
        except (PerflowError, OSError, ValueError) as exc:
            log.warning("PAG not saved: %s", exc)
            result.notes.append(f"PAG not saved: {exc}")
