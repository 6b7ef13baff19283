"""The fast OTF2 decoder called from several threads at once, as the Dask engine's threaded workers call it.

Before, two threads loading the skip counters for the first time each compiled
them: the second engine replaced the first, whose code was unmapped when it
was dropped, and a decoder forked while the address table still held the
first engine's addresses died of SIGSEGV on its first skipped record (2 of 8
cold two-thread decodes of ``omp_imbalance`` at load ~18; "the OTF2 library
crashed reading ... killed by signal 11 ...: corrupt trace data"). And a child
forked by one thread inherited another thread's pipe, so that thread waited
for the other's child to end.
"""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

pytest.importorskip("llvmlite", reason="the skip counters are compiled with llvmlite")


def _mapped(address: int) -> bool:
    with open("/proc/self/maps") as f:
        for line in f:
            lo, hi = (int(v, 16) for v in line.split()[0].split("-"))
            if lo <= address < hi:
                return True
    return False


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/self/maps")
def test_skip_counters_compile_once_when_threads_race(monkeypatch: pytest.MonkeyPatch) -> None:
    import llvmlite.binding as llvm

    from perflow.readers.otf2 import _callbacks as cb

    monkeypatch.setattr(cb, "_skip_addresses", {})  # a process that has not compiled them yet
    monkeypatch.setattr(cb, "_skip_engine", None)
    made = []
    create = llvm.create_mcjit_compiler

    def slow_create(*args: object) -> object:  # both threads inside the compile at once
        made.append(threading.get_ident())
        time.sleep(0.2)
        return create(*args)

    monkeypatch.setattr(llvm, "create_mcjit_compiler", slow_create)
    got: list[dict[str, int]] = []
    start = threading.Barrier(2)

    def load() -> None:
        start.wait()
        got.append(dict(cb._skip_counters()))

    threads = [threading.Thread(target=load) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(made) == 1, "each racing thread compiled its own engine"
    assert got[0] == got[1] == cb._skip_addresses
    assert len(got[0]) == len(cb.L.SKIPPED_EVENTS)
    assert all(_mapped(a) for a in got[0].values()), "an address of a dropped engine (unmapped code)"


def _written_pipes() -> set[str]:
    """The pipes this process holds open for writing (``pipe:[inode]``)."""
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
            with open(f"/proc/self/fdinfo/{fd}") as f:
                flags = int(next(line for line in f if line.startswith("flags:")).split()[1], 8)
        except (OSError, StopIteration):
            continue
        if target.startswith("pipe:") and flags & os.O_ACCMODE != os.O_RDONLY:
            out.add(target)
    return out


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/self/fd")
def test_a_forked_child_holds_no_other_threads_pipe() -> None:
    """Two threads forking decoders at once: each child holds the write end of its own pipe only.

    Before, a child forked by one thread could inherit the write end of the other thread's pipe, so that
    thread saw its child's result only when this child ended (and blamed a hang of it on its own).
    """
    from perflow.readers.otf2._forked import run_forked

    before = _written_pipes()
    held: list[set[str]] = []
    start = threading.Barrier(2)

    def run() -> None:
        start.wait()
        for _ in range(2):
            held.extend(run_forked([(_written_pipes, ())] * 4, time.monotonic() + 60))

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(held) == 16
    assert [len(h - before) for h in held] == [1] * 16
