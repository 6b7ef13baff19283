"""Flow YAML is bounded: an alias bomb, deep nesting or a huge file fails fast with one clear problem.

The hole (issue 18): a 688-byte YAML alias bomb drove ``perflow validate``
past 2 GB and 35 s (every alias was expanded into a fresh copy).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perflow.errors import FlowError
from perflow.flow.loader import load_flow
from perflow.flow.yaml_io import MAX_FLOW_BYTES, MAX_FLOW_DEPTH, loads, parse

ROOT = Path(__file__).resolve().parents[2]


def bomb(levels: int = 10, width: int = 10) -> str:
    """Nested aliases: ``width ** levels`` strings once expanded (10**10 here)."""
    lines = ["perflow: 1", "name: bomb", "a0: &a0 [" + ",".join(["lol"] * width) + "]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * width) + "]")
    lines.append(f"steps:\n  s: {{pass: t_const, settings: {{value: *a{levels - 1}}}}}")
    return "\n".join(lines) + "\n"


def test_the_alias_bomb_fails_fast_within_bounds(tmp_path: Path) -> None:
    text = bomb()
    assert len(text) < 1000
    f = tmp_path / "bomb.yaml"
    f.write_text(text)
    limit = 1 << 30  # 1 GiB of address space: the unbounded expansion needed more than 2 GB

    def bounded() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "perflow", "validate", str(f)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=bounded,
    )
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    seconds = time.perf_counter() - t0
    assert proc.returncode == 2, err
    assert "once its YAML aliases are expanded (nested aliases multiply: an alias bomb?)" in err
    assert "line " in err and "MemoryError" not in err and "Traceback" not in err
    assert seconds < 20  # about 1 s (imports included); the expansion alone took more than 35 s


def test_the_node_budget_counts_expanded_aliases() -> None:
    data, _, problems = parse(bomb(levels=5, width=10))  # 10**5 strings: just over the budget
    assert data is None and len(problems) == 1 and "alias bomb" in problems[0].message
    data, _, problems = parse(bomb(levels=4, width=10))  # 10**4: fine
    assert problems == [] and len(data["a3"]) == 10


def test_ordinary_aliases_still_work() -> None:
    f = loads(
        """perflow: 1
name: shared
steps:
  a: {pass: t_const, settings: &s {value: 3}}
  b: {pass: t_const, settings: *s}
outputs: {a: a, b: b}
""",
        validate=False,
    )
    assert f.steps["a"].settings == f.steps["b"].settings == {"value": 3}


@pytest.mark.parametrize("open_, close", [("[", "]"), ("{a: ", "}")])
def test_deep_nesting_is_a_problem_not_a_recursion_error(open_: str, close: str) -> None:
    text = "perflow: 1\nx: " + open_ * 5000 + "1" + close * 5000 + "\n"
    data, _, problems = parse(text)
    assert data is None and len(problems) == 1
    assert f"values are nested more than {MAX_FLOW_DEPTH} deep" in problems[0].message and problems[0].line == 2
    ok = "perflow: 1\nx: " + open_ * 20 + "1" + close * 20 + "\n"
    assert parse(ok)[2] == []


def test_huge_flow_files_are_refused_without_reading_them(tmp_path: Path) -> None:
    f = tmp_path / "huge.yaml"
    with open(f, "w") as fh:
        fh.write("perflow: 1\n# " + "x" * (MAX_FLOW_BYTES + 10) + "\n")
    with pytest.raises(FlowError, match=r"huge.yaml: the flow file is larger than the 2,097,152 bytes allowed"):
        load_flow(f)
    _, _, problems = parse("#" * (MAX_FLOW_BYTES + 1))
    assert "more than the 2,097,152 allowed" in problems[0].message
