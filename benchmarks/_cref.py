"""The C reference of the OTF2 benchmarks: ``otf2_count.c`` built and run, and CPU-time helpers.

``c_reader(anchor)`` builds ``benchmarks/otf2_count.c`` once (``cc -O2``, into a
cache folder outside the repository, keyed by the source's hash) and runs it:
the OTF2 C library reading every event of the archive, one thread, count only.
The library is the one perflow drives (the ``otf2`` wheel's bundled copy), or
otf2-tools' ``libopen-trace-format2`` when the wheel is absent.

``cpu_of(cmd)`` runs a command and returns its CPU seconds (user and system,
children included) from the operating system's accounting, optionally pinned
to one core with ``taskset``.
"""

from __future__ import annotations

import glob
import hashlib
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "otf2_count.c"


def system_library() -> str | None:
    """otf2-tools' OTF2 C library (``libopen-trace-format2``), when installed."""
    for pat in ("/usr/lib/*/libopen-trace-format2.so*", "/lib/*/libopen-trace-format2.so*", "/usr/lib/libotf2.so*"):
        hits = sorted(glob.glob(pat))
        if hits:
            return hits[0]
    return None


def otf2_library() -> str:
    """Path of the OTF2 C library perflow drives: the ``otf2`` wheel's, else otf2-tools'."""
    try:
        from _otf2.Config import lib_path

        return str(lib_path())
    except ImportError:
        pass
    lib = system_library()
    if lib is None:
        raise RuntimeError("no OTF2 C library: install the otf2 wheel or otf2-tools")
    return lib


def build() -> Path:
    """Compile otf2_count.c (once per source version); return the executable."""
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "perflow-bench"
    exe = cache / f"otf2_count-{digest}"
    if exe.exists():
        return exe
    cache.mkdir(parents=True, exist_ok=True)
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or "cc"
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        out = Path(tmp) / "otf2_count"
        subprocess.run([cc, "-O2", "-o", str(out), str(SOURCE), "-ldl"], check=True)
        os.replace(out, exe)
    return exe


def pinned(cmd: list[str], core: int | None) -> list[str]:
    """``cmd`` run on one core (``taskset -c core``) when ``core`` is given."""
    if core is None:
        return cmd
    if shutil.which("taskset") is None:
        raise RuntimeError("taskset (util-linux) is needed to pin to one core")
    return ["taskset", "-c", str(core), *cmd]


def c_reader(anchor: str, core: int | None = None, library: str | None = None) -> dict[str, float]:
    """The C library reading every event of ``anchor``: events, user, sys and CPU seconds, peak RSS MB."""
    exe = build()
    cmd = pinned([str(exe), library or otf2_library(), anchor], core)
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if p.returncode:
        raise RuntimeError(f"otf2_count failed: {p.stderr.strip()}")
    kv = dict(f.split("=") for f in p.stdout.split())
    user, sys_ = float(kv["cpu_user"]), float(kv["cpu_sys"])
    return {
        "events": int(kv["events"]),
        "user": user,
        "sys": sys_,
        "cpu": user + sys_,
        "rss_mb": int(kv["maxrss_kb"]) / 1024,
    }


def cpu_of(cmd: list[str], core: int | None = None, env: dict[str, str] | None = None) -> dict[str, float]:
    """Run ``cmd`` to completion; its CPU seconds (user, sys, total, children included) and stdout."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(pinned(cmd, core), capture_output=True, text=True, env=env, check=False)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode:
        sys.stderr.write(p.stderr[-4000:])
        raise RuntimeError(f"{' '.join(cmd[:3])} ... failed ({p.returncode})")
    user, sys_ = r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime
    return {"user": user, "sys": sys_, "cpu": user + sys_, "stdout": p.stdout, "maxrss_mb": r1.ru_maxrss / 1024}


def median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])
