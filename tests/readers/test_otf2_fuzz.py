"""Fuzzing: mutated copies of real and generated OTF2 archives decode correctly or raise FormatError.

Each case truncates a file or flips/overwrites bytes in one file of a copy
of an archive, then decodes it with the fast decoder (in a worker process)
and, for some cases, with the bindings decoder. The outcome must be a valid
RawTrace or a FormatError, within the test timeout.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from perflow.errors import FormatError
from perflow.readers.otf2 import decode

from .test_otf2_errors import copy_archive

FILES = ["traces.otf2", "traces.def", "traces/0.def", "traces/0.evt", "traces/1.evt"]
N_CASES = 12


def mutate(root: Path, rng: random.Random) -> str:
    rel = rng.choice(FILES)
    f = root / rel
    data = bytearray(f.read_bytes())
    mode = rng.choice(["truncate", "flip", "overwrite"])
    if mode == "truncate" or not data:
        data = data[: rng.randrange(max(len(data), 1))]
    elif mode == "flip":
        for _ in range(rng.randint(1, 3)):
            k = rng.randrange(len(data))
            data[k] ^= 1 << rng.randrange(8)
    else:
        k = rng.randrange(len(data))
        data[k : k + 8] = bytes(rng.randrange(256) for _ in range(8))
    f.write_bytes(bytes(data))
    return f"{rel} {mode}"


def check(anchor: Path, engine: str) -> str:
    try:
        raw = decode(anchor, decoder=engine, jobs=1)
    except FormatError as e:
        assert str(anchor.parent) in e.path, e  # the message names a file of this archive
        return "error"
    raw.validate()
    return "ok"


def _run(src: Path, tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    import perflow.readers.otf2._workers as w

    # some corrupted anchors make the C library grind for many seconds before it gives up:
    # with a short watchdog they end as "did not finish in time" FormatErrors instead
    monkeypatch.setattr(w, "WATCHDOG_SECONDS", 8.0)
    rng = random.Random(seed)
    outcomes = []
    for case in range(N_CASES):
        root = copy_archive(src, tmp_path / f"case{case}")
        what = mutate(root, rng)
        engines = ["fast", "bindings"] if case % 3 == 0 else ["fast"]
        outcomes.append((what, [check(root / "traces.otf2", e) for e in engines]))
    assert any("error" in o for _, o in outcomes), outcomes  # the mutations do break things


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name,seed", [("ping-pong", 11), ("ping-pong-papi", 12)])
def test_fuzz_samples(otf2_sample, tmp_path, name, seed, monkeypatch):
    _run(otf2_sample(name), tmp_path, seed, monkeypatch)


@pytest.mark.timeout(60)
def test_fuzz_generated(small_trace, tmp_path, monkeypatch):
    _, anchor = small_trace
    _run(anchor.parent, tmp_path, 13, monkeypatch)
