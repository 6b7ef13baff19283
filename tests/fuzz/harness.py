"""A bounded, seeded fuzz harness over every reader.

Each case copies a pristine sample (:mod:`tests.fuzz.targets`), damages the copy
with one mutator (:mod:`tests.fuzz.mutators`) chosen by a seeded generator, and
reads it with the public reader (``perflow.read(path, format=...)``) in a forked
child whose address space is capped (``RLIMIT_AS``) and whose run time is
bounded. The outcome of a case is one of

* ``parsed``: a PAG came back and passed the structural checks;
* ``format_error``: a :class:`~perflow.errors.FormatError` that names the file;
* ``unexpected``: any other exception, a FormatError that does not name the
  file, or one the reader entry point made from an unexpected exception;
* ``hang``: the child did not finish within the time limit;
* ``memory``: a MemoryError (the cap was hit) or a peak resident-memory growth
  beyond the budget;
* ``crash``: the child died without reporting (a signal);
* ``corrupt``: a PAG came back but is structurally wrong (a call path deeper
  than the input could describe, non-finite metric values), holds values no
  run can have (:func:`value_problems`: negative or non-finite times, counts
  or bytes, instances outside the trace's span or ending before they start,
  a child instance outside its parent, a parent cycle), or the mutation must
  be refused (a cycle, a truncated record, extra data) and was not.

The last five are failures. :func:`campaign` runs many cases and counts the
outcomes per target; :func:`run_case` runs one.
"""

from __future__ import annotations

import json
import os
import random
import resource
import selectors
import shutil
import signal
import time
import traceback
import zlib
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

OUTCOMES = ("parsed", "format_error", "unexpected", "hang", "memory", "crash", "corrupt")
FAILURES = frozenset({"unexpected", "hang", "memory", "crash", "corrupt"})

#: Address space a case may add to what the harness process already maps.
AS_HEADROOM = 3 << 30
#: Peak resident-memory growth over which a case is a memory blow-up (plus ``RSS_PER_BYTE`` x input size).
RSS_BUDGET = 400 << 20
RSS_PER_BYTE = 100
#: Deepest call path a parsed PAG may have.
MAX_DEPTH = 5_000


@dataclass
class Sample:
    """A writable copy of a sample: ``read_path`` is what the reader gets, ``mutable`` the files mutators damage."""

    root: Path
    read_path: Path
    mutable: list[Path]
    text_files: frozenset[Path] = frozenset()
    must_fail: bool = False
    #: metric values must be finite: not for a saved PAG, whose derived metrics may hold NaN (and whose
    #: Parquet pages carry no checksum, so a damaged value cannot be told from a real one)
    finite_values: bool = True

    def is_text(self, f: Path) -> bool:
        return f in self.text_files


@dataclass
class Target:
    """One row of the fuzz table: a format, how to build its pristine sample, the mutators to apply."""

    name: str
    format: str
    build: Callable[[Path], Sample]
    mutators: list[Callable[[Sample, random.Random], str]]
    #: options for perflow.read
    options: dict = field(default_factory=dict)


@dataclass
class Case:
    target: str
    seed: int
    mutation: str
    outcome: str
    detail: str
    seconds: float

    @property
    def failed(self) -> bool:
        return self.outcome in FAILURES


def _vm_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _causes(exc: BaseException) -> Iterable[BaseException]:
    seen = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


def _input_bytes(p: Path) -> int:
    if p.is_file():
        return p.stat().st_size
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def classify(fmt: str, sample: Sample, options: dict) -> tuple[str, str]:
    """Read the sample in this process and name the outcome (used inside the forked child)."""
    import numpy as np

    import perflow
    from perflow.errors import FormatError
    from perflow.readers import detect_format

    base = _rss_bytes()
    budget = RSS_BUDGET + RSS_PER_BYTE * _input_bytes(sample.root)
    try:
        detect_format(sample.read_path)  # any answer will do, or a FormatError: never another exception
    except FormatError:
        pass
    except Exception as exc:  # noqa: BLE001
        return "unexpected", f"format detection: {type(exc).__name__}: {str(exc)[:300]}"
    try:
        pag = perflow.read(sample.read_path, format=fmt, **options)
    except FormatError as exc:
        chain = list(_causes(exc))
        if any(isinstance(e, MemoryError) for e in chain):
            return "memory", f"FormatError from MemoryError: {exc}"
        if getattr(exc, "unexpected", False):
            cause = exc.__cause__
            return "unexpected", f"{type(cause).__name__} turned into a FormatError: {exc}"
        if str(sample.root) not in str(exc) and sample.read_path.name not in str(exc):
            return "unexpected", f"FormatError does not name the file: {exc}"
        try:
            str(exc).encode("utf-8")
        except UnicodeEncodeError:
            return "unexpected", "the FormatError's message cannot be printed (lone surrogates)"
        return "format_error", str(exc)
    except MemoryError as exc:
        return "memory", f"MemoryError: {exc}"
    except Exception as exc:  # noqa: BLE001 - the point is to report it
        tb = traceback.extract_tb(exc.__traceback__)[-1]
        return "unexpected", f"{type(exc).__name__}: {str(exc)[:300]} (at {Path(tb.filename).name}:{tb.lineno})"
    grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base
    if grew > budget:
        return "memory", f"parsed, but the peak resident memory grew by {grew >> 20} MiB"
    depth = int(pag.vertex_table["depth"].max()) if pag.n_vertices else 0
    if depth > MAX_DEPTH:
        return "corrupt", f"call path {depth} deep"
    try:
        "".join(map(str, pag.vertex_table["name"])).encode("utf-8")
    except UnicodeEncodeError:
        return "corrupt", "a vertex name cannot be printed (lone surrogates)"
    m = pag.metrics.to_numpy(dtype=np.float64, na_value=np.nan) if pag.metrics.shape[1] else np.zeros(0)
    if sample.finite_values and m.size and not np.isfinite(m).all():
        return "corrupt", "non-finite metric values"
    # a saved PAG's Parquet pages carry no checksum: a flipped bit in a value cannot be told from a real one
    problem = value_problems(pag, finite=sample.finite_values, values=sample.finite_values)
    if problem:
        return "corrupt", problem
    if sample.must_fail:
        return "corrupt", "read without an error or a warning"
    return "parsed", f"{pag.n_vertices} vertices"


_SIGNED_UNITS = {"s", "count", "bytes", "b"}
#: Largest plausible time of a row or instance (ten years), as the readers' value checks define it.
MAX_SECONDS = 10 * 365.25 * 86400.0


def value_problems(pag, *, finite: bool = True, values: bool = True) -> str:  # type: ignore[no-untyped-def]
    """What is wrong with the values of a parsed PAG ("" when nothing): the silent wrong answers of issue 25.

    Flags negative, non-finite or absurd times, counts and bytes in the metrics; exclusive over inclusive
    time; a parent cycle or a wrong depth in the tree; instances with leave < enter, outside the trace's span
    (a span over ten years) or outside their parent instance; messages with negative bytes or non-finite times.
    """
    import numpy as np

    info = pag.metric_info
    m = pag.metrics
    for c in m.columns if values else ():
        mi = info.get(c)
        unit = (getattr(mi, "unit", "") or "").lower()
        name = str(c).lower()
        signed = unit in _SIGNED_UNITS or name in ("time_inc", "time_exc", "visits") or "bytes" in name
        if not signed or not len(m):
            continue
        a = m[c].to_numpy(dtype=np.float64, na_value=np.nan)
        if finite and not np.isfinite(a).all():
            return f"metric {c}: non-finite value"
        if (a < 0).any():
            return f"metric {c}: negative value {float(a[a < 0][0])!r}"
        if unit == "s" and (a > MAX_SECONDS).any():
            return f"metric {c}: {float(a.max())!r} s (over ten years)"
    if values and "time_inc" in m.columns and "time_exc" in m.columns and len(m):
        inc, exc = m["time_inc"].to_numpy(np.float64), m["time_exc"].to_numpy(np.float64)
        over = exc > inc * (1 + 1e-6) + 1e-9
        if over.any():
            return f"time_exc {float(exc[over][0])!r} over time_inc {float(inc[over][0])!r}"
    parent = pag.vertex_table["parent"].to_numpy(np.int64)
    depth = pag.vertex_table["depth"].to_numpy(np.int64)
    if len(parent):
        if ((parent < -1) | (parent >= len(parent))).any():
            return "a vertex parent out of range"
        ok = parent >= 0
        if (depth[ok] != depth[parent[ok]] + 1).any() or (depth[~ok] != 0).any():
            return "depths do not follow the parents (a cycle or a re-parented tree)"
    tr = pag.trace
    if tr is None or not len(tr.intervals):
        return ""
    iv = tr.intervals
    enter, leave = iv["enter"].to_numpy(np.float64), iv["leave"].to_numpy(np.float64)
    if not (np.isfinite(enter).all() and np.isfinite(leave).all()):
        return "an instance with a non-finite time"
    if (leave < enter).any():
        return "an instance that ends before it starts"
    if float(leave.max() - enter.min()) > MAX_SECONDS:
        return f"a trace spanning {float(leave.max() - enter.min())!r} s"
    ip = iv["parent"].to_numpy(np.int64)
    has = ip >= 0
    if has.any():
        eps = 1e-9 + 1e-12 * np.abs(leave[ip[has]])
        if ((enter[has] < enter[ip[has]] - eps) | (leave[has] > leave[ip[has]] + eps)).any():
            return "an instance outside its parent instance"
    msg = tr.messages
    if len(msg):
        if (msg["bytes"].to_numpy() < 0).any():
            return "a message with negative bytes"
        for c in ("send_time", "recv_time"):
            if not np.isfinite(msg[c].to_numpy(np.float64)).all():
                return f"a message with a non-finite {c}"
    return ""


def _child(fmt: str, sample: Sample, options: dict, fd: int) -> None:  # pragma: no cover - runs in the child
    try:
        try:
            import logging

            logging.disable(logging.CRITICAL)
            cap = _vm_bytes() + AS_HEADROOM
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
            out = classify(fmt, sample, options)
        except BaseException as exc:  # noqa: BLE001
            out = ("unexpected", f"harness: {type(exc).__name__}: {exc}")
        os.write(fd, json.dumps(out).encode())
    finally:
        os._exit(0)


def read_capped(sample: Sample, fmt: str, options: dict | None = None, *, timeout: float = 30.0) -> tuple[str, str]:
    """(outcome, detail) of reading ``sample`` in a forked child with a capped address space and a time limit."""
    t0 = time.monotonic()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        os.close(r)
        _child(fmt, sample, options or {}, w)
    os.close(w)
    buf = b""
    sel = selectors.DefaultSelector()
    sel.register(r, selectors.EVENT_READ)
    outcome: tuple[str, str] | None = None
    try:
        while True:
            left = t0 + timeout - time.monotonic()
            if left <= 0 or not sel.select(timeout=left):
                os.kill(pid, signal.SIGKILL)
                outcome = ("hang", f"no result after {timeout:.0f} s")
                break
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            buf += chunk
    finally:
        sel.close()
        os.close(r)
        _, status = os.waitpid(pid, 0)
    if outcome is None:
        if buf:
            outcome = tuple(json.loads(buf))  # type: ignore[assignment]
        else:
            sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
            outcome = ("crash", f"child died (signal {sig})" if sig else f"child exited with {status >> 8}")
    return outcome


def run_case(target: Target, seed: int, workdir: Path, *, timeout: float = 30.0) -> Case:
    """Build, mutate and read one case in a forked child; return its outcome."""
    rng = random.Random(seed)
    root = workdir / f"{target.name}-{seed}"
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    sample = target.build(root)
    mut = rng.choice(target.mutators)
    try:
        what = f"{mut.__name__}: {mut(sample, rng)}"
    except Exception as exc:  # noqa: BLE001 - a mutator that cannot apply leaves the sample as it is
        what = f"{mut.__name__}: not applicable ({type(exc).__name__}: {exc})"
    t0 = time.monotonic()
    outcome = read_capped(sample, target.format, target.options, timeout=timeout)
    shutil.rmtree(root, ignore_errors=True)
    return Case(target.name, seed, what, outcome[0], outcome[1], time.monotonic() - t0)


def warm_up(target: Target, workdir: Path) -> None:
    """Read the pristine sample in this process: it must parse, and compiled kernels are then inherited by children."""
    import perflow

    root = workdir / f"{target.name}-pristine"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    sample = target.build(root)
    perflow.read(sample.read_path, format=target.format, **target.options)
    shutil.rmtree(root, ignore_errors=True)


def campaign(
    targets: Iterable[Target],
    n_cases: int,
    workdir: Path,
    *,
    seed: int = 0,
    timeout: float = 30.0,
    on_case: Callable[[Case], None] | None = None,
) -> dict[str, Counter]:
    """Run ``n_cases`` cases per target; return the outcome counts per target."""
    counts: dict[str, Counter] = {}
    for t in targets:
        warm_up(t, workdir)
        c: Counter = Counter()
        for i in range(n_cases):
            case = run_case(
                t, seed * 1_000_003 + i * 7919 + zlib.crc32(t.name.encode()) % 997, workdir, timeout=timeout
            )
            c[case.outcome] += 1
            if on_case:
                on_case(case)
        counts[t.name] = c
    return counts
