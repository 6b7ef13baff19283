"""The profile-analysis pass library as a whole: registration and documentation of every pass."""

from __future__ import annotations

import pytest

from perflow.flow.registry import all_passes

MODULES = (
    "perflow.passes.select",
    "perflow.passes.hotspot",
    "perflow.passes.imbalance",
    "perflow.passes.breakdown",
    "perflow.passes.differential",
    "perflow.passes.scalability",
    "perflow.passes.scalability_models",
    "perflow.passes.scalability_scalana",
    "perflow.passes.backtrack",
    "perflow.passes.comm",
    "perflow.passes.similarity",
    "perflow.passes.contention",
)
EXPECTED = {
    "filter_vertices", "query_vertices", "sort_vertices", "top_vertices", "set_union", "set_intersection", "set_difference",
    "set_symmetric_difference", "ancestors", "descendants", "subgraph", "parallel_vertices", "backward_slice",
    "forward_slice", "hotspot", "hotspot_set", "imbalance", "imbalanced_vertices", "imbalance_outliers",
    "outlier_vertices", "breakdown", "differential", "difference", "scalability", "non_scalable_vertices", "scaling_data",
    "scaling_models", "non_scalable_paths", "causal_paths",
    "backtrack", "comm_matrix", "message_sizes", "comm_over_time", "comm_summary", "comm_pattern",
    "process_similarity", "contention", "trace_contention",
}  # fmt: skip


@pytest.fixture(scope="module")
def specs() -> dict:
    return {n: s for n, s in all_passes().items() if s.module in MODULES}


def test_every_pass_is_registered(specs: dict) -> None:
    assert set(specs) == EXPECTED


def test_every_pass_is_documented(specs: dict) -> None:
    for name, spec in specs.items():
        assert spec.summary, name
        assert spec.version.isdigit() and int(spec.version) >= 1, name  # bumped when the output changes
        for s in spec.settings:
            assert s.doc, f"{name}: setting {s.name!r} has no documentation"
            assert not s.required, f"{name}: setting {s.name!r} has no default"
