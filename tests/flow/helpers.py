"""Small passes for the flow tests (registered under names starting with ``t_``)."""

from __future__ import annotations

import threading
import weakref
from collections import Counter

import pandas as pd

from perflow.flow.registry import make_spec, pass_, register
from perflow.pag.pag import PAG

CALLS: Counter[str] = Counter()
_LOCK = threading.Lock()
EVENTS: dict[str, threading.Event] = {}
BOXES: list[weakref.ref] = []


def called(name: str) -> None:
    with _LOCK:
        CALLS[name] += 1


@pass_(name="t_const")
def const(*, value: int = 1) -> int:
    """A constant."""
    called("t_const")
    return value


@pass_(name="t_inc")
def inc(x: int, *, by: int = 1) -> int:
    """x + by."""
    called("t_inc")
    return x + by


@pass_(name="t_add")
def add(a: int, b: int, *, offset: int = 0) -> int:
    """a + b + offset."""
    called("t_add")
    return a + b + offset


@pass_(name="t_split", outputs={"quot": int, "rem": int})
def split(x: int, *, d: int = 2) -> dict:
    """Quotient and remainder."""
    called("t_split")
    return {"quot": x // d, "rem": x % d}


@pass_(name="t_fail")
def fail(x: int, *, message: str = "boom") -> int:
    """Always raises ValueError(message)."""
    called("t_fail")
    raise ValueError(message)


@pass_(name="t_frame")
def frame(x: int, *, n: int = 3) -> pd.DataFrame:
    """A small table from x."""
    called("t_frame")
    return pd.DataFrame({"i": range(n), "v": [x * i for i in range(n)]})


@pass_(name="t_text")
def text(table: pd.DataFrame, *, title: str = "report") -> str:
    """A text report of a table."""
    called("t_text")
    return f"{title}: {len(table)} rows, sum {int(table['v'].sum())}"


@pass_(name="t_need")
def need(x: int, *, mode: str) -> int:
    """A pass with a required setting."""
    return x


@pass_(name="t_opt")
def opt(x: int, y: int = 10, *, scale: float = 1.0, names: tuple[str, ...] = ()) -> float:
    """Optional input y, a float setting, a tuple setting."""
    called("t_opt")
    assert isinstance(names, tuple)
    return (x + y) * scale + len(names)


@pass_(name="t_wrong_keys", outputs={"a": int, "b": int})
def wrong_keys(x: int) -> dict:
    """Returns the wrong keys."""
    return {"a": 1}


@pass_(name="t_wrong_type")
def wrong_type(x: int) -> pd.DataFrame:
    """Returns an int where it promised a DataFrame."""
    return x


@pass_(name="t_wait")
def wait(x: int, *, event: str, timeout: float = 10.0) -> int:
    """Wait until EVENTS[event] is set (or time out and raise)."""
    if not EVENTS[event].wait(timeout):
        raise TimeoutError(f"event {event!r} was never set")
    return x


@pass_(name="t_signal")
def signal(x: int, *, event: str) -> int:
    """Set EVENTS[event]."""
    EVENTS[event].set()
    return x


class Box:
    """A weak-referenceable value."""

    def __init__(self, v: int) -> None:
        self.v = v


@pass_(name="t_box")
def box(x: int) -> Box:
    """Wrap x in a Box and remember a weak reference to it."""
    b = Box(x)
    BOXES.append(weakref.ref(b))
    return b


@pass_(name="t_unbox_next")
def unbox_next(b: Box, *, dead: int = -1) -> Box:
    """A new Box(b.v + 1); with dead=i, check BOXES[i] was released before this step ran."""
    import gc

    if dead >= 0:
        gc.collect()
        if BOXES[dead]() is not None:
            raise AssertionError(f"box {dead} is still alive")
    nb = Box(b.v + 1)
    BOXES.append(weakref.ref(nb))
    return nb


@pass_(name="t_hotspot")
def hotspot(pag: PAG, *, metric: str = "time_exc", k: int = 5) -> pd.DataFrame:
    """The k vertices with the most ``metric`` (summed over processes)."""
    called("t_hotspot")
    return pag.metric_frame([metric]).nlargest(k, metric)


@pass_(name="t_side", cacheable=False)
def side(x: int) -> int:
    """A pass with side effects (never cached)."""
    called("t_side")
    return x


def versioned(version: str) -> None:
    """(Re)register t_versioned with a version."""

    def t_versioned(x: int) -> int:
        called("t_versioned")
        return x * 2

    register(make_spec(t_versioned, name="t_versioned", version=version))


def plain(x: int, *, k: int = 2) -> int:
    """An unregistered function, reachable as tests.flow.helpers:plain."""
    called("plain")
    return x * k


versioned("1")


@pass_(name="t_total")
def total(values: list[int], *, scale: int = 1) -> int:
    """The sum of a list of values."""
    called("t_total")
    return scale * sum(values)


@pass_(name="t_names")
def names(named: dict[str, int]) -> str:
    """``key=value`` pairs, sorted by key."""
    return ",".join(f"{k}={v}" for k, v in sorted(named.items()))
