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


def _sleep(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def test_a_forked_child_holds_no_other_threads_pipe() -> None:
    """A thread's quick children report at once while another thread's children run long."""
    from perflow.readers.otf2._forked import run_forked

    done: dict[str, float] = {}

    def run(name: str, seconds: float, n: int) -> None:
        t = time.monotonic()
        assert run_forked([(_sleep, (seconds,))] * n, time.monotonic() + 60) == [seconds] * n
        done[name] = time.monotonic() - t

    slow = threading.Thread(target=run, args=("slow", 2.0, 4))
    quick = threading.Thread(target=run, args=("quick", 0.0, 4))
    slow.start()
    quick.start()
    quick.join()
    slow.join()
    assert done["quick"] < 1.6, done  # before: it waited for the slow thread's children (2 s)
