"""The public construction path for PAGs whose tables live elsewhere (LazyTables), and PAG subclasses."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import perflow
from perflow.errors import MetricError, PAGError
from perflow.pag.pag import PAG, LazyTables


class Counted:
    """LazyTables over an eager PAG, counting what is materialised."""

    def __init__(self, pag: PAG) -> None:
        self.pag = pag
        self.asked: list[str] = []

    def metric_names(self) -> list[str]:
        return self.pag.metric_names

    def metric_info(self) -> dict:
        return self.pag.metric_info

    def metrics(self) -> pd.DataFrame:
        self.asked.append("metrics")
        return self.pag.metrics

    def trace(self):  # type: ignore[no-untyped-def]
        self.asked.append("trace")
        return self.pag.trace

    def locations(self) -> pd.DataFrame:
        return self.pag.locations


@pytest.fixture(scope="module")
def eager() -> PAG:
    return perflow.PAG.from_literal(
        [
            {
                "name": "main",
                "metrics": {"time_inc": 3.0, "time_exc": 1.0},
                "children": [{"name": "solve", "metrics": {"time_inc": 2.0, "time_exc": 2.0}}],
            }
        ],
        attrs={"source": "literal"},
    )


def test_lazy_tables_are_asked_for_on_first_use(eager: PAG) -> None:
    tables = Counted(eager)
    assert isinstance(tables, LazyTables)
    lazy = PAG(eager.vertex_table, tables=tables, attrs=eager.attrs)
    assert lazy.lazy and not eager.lazy
    assert lazy.metric_names == eager.metric_names and lazy.n_vertices == 2
    lazy.check_metric("time_exc")
    with pytest.raises(MetricError, match="unknown metric 'time_ex'; did you mean 'time_exc'"):
        lazy.check_metric("time_ex")
    assert lazy.locations.equals(eager.locations)
    assert tables.asked == []  # listings and checks materialise nothing
    pd.testing.assert_series_equal(lazy.aggregate("time_inc"), eager.aggregate("time_inc"))
    assert tables.asked == ["metrics"]
    assert lazy.trace is None and tables.asked == ["metrics", "trace"]


def test_a_lazy_pag_has_the_content_and_fingerprint_of_the_eager_one(eager: PAG) -> None:
    from perflow.flow.fingerprint import fingerprint

    lazy = PAG(eager.vertex_table, tables=Counted(eager), attrs=eager.attrs)
    assert [n for n, _ in lazy.content()] == ["vertices", "metrics", "metric_info"]
    assert fingerprint(lazy) == fingerprint(eager)
    assert fingerprint(lazy.vertices) == fingerprint(eager.vertices)


def test_tables_come_one_way(eager: PAG) -> None:
    with pytest.raises(PAGError, match="either as frames or from LazyTables, not both"):
        PAG(eager.vertex_table, eager.metrics, tables=Counted(eager))
    with pytest.raises(PAGError, match="int is not LazyTables"):
        PAG(eager.vertex_table, tables=3)  # type: ignore[arg-type]
    with pytest.raises(PAGError, match="needs a metrics table"):
        PAG(eager.vertex_table)


def test_a_pag_subclass_is_a_pag_everywhere(eager: PAG, tmp_path: Path) -> None:
    """No dispatch on class names: a subclass is saved as a PAG, fingerprinted as one, shown as one."""
    from perflow.flow.fingerprint import fingerprint
    from perflow.flow.outputs import write_value
    from perflow.flow.types import describe_value

    class MyPAG(PAG):
        pass

    mine = MyPAG(eager.vertex_table, eager.metrics, metric_info=eager.metric_info, attrs=eager.attrs)
    assert write_value(mine, tmp_path, "out") == tmp_path / "out.pag"
    assert fingerprint(mine) == fingerprint(eager)
    assert describe_value(mine) == "MyPAG (2 vertices)"
