"""OTF2 global definitions -> perflow's definition tables.

Both decoders read the (small) global definitions through the ``otf2``
Python bindings and map them with this module, so that they agree on every
id. The event decoders only need the lookup arrays of :class:`Defs`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ...errors import FormatError
from ._contexts import read_contexts

__all__ = ["Defs", "read_definitions", "enum_name", "patch_bindings"]

# OTF2 enum values used here (OTF2 3.x numbering).
_LG_PROCESS = 1
_LG_ACCELERATOR = 2
_LT_NAMES = {0: "cpu", 1: "cpu", 2: "gpu", 3: "metric"}
_GT_COMM_LOCATIONS = 4
_GT_COMM_GROUP = 5
_GT_COMM_SELF = 6
_GT_COMM_LOCATION_GROUPS = 7
_PARADIGM_MPI = 4


def _gtype(g: Any) -> int:
    return int(getattr(g.group_type, "value", g.group_type))


def patch_bindings() -> None:
    """Teach the ``otf2`` bindings' definition reader OTF2 3's ``COMM_LOCATION_GROUPS`` groups.

    The bindings (3.2) raise ``TypeError: Unknown group_type`` on such a group
    (Score-P 8+ lists an MPI world's processes as one), and resolve the
    members of a ``COMM_GROUP`` (ranks) only through a ``COMM_LOCATIONS``
    group. Here a ``COMM_LOCATION_GROUPS`` group's members are its location
    groups, and a ``COMM_GROUP`` whose paradigm's base group is one has the
    location groups at its ranks as members. Everything else is left to the
    bindings. Idempotent; only runs in the child processes that read archives.
    """
    from otf2 import definitions as D
    from otf2.enums import GroupType

    if getattr(D.Group, "_perflow_patched", False):
        return
    original = D.Group._construct.__func__

    def bare(cls: Any, registry: Any, ref: int, name: Any, gtype: Any, par: Any, flags: Any, members: tuple) -> Any:
        g = cls.__new__(cls)  # Group.__init__ would look for a COMM_LOCATIONS group: set the fields directly
        super(D.Group, g).__init__(registry._registry_for_type(cls), ref, registry.strings[name], gtype, par, flags,
                                   members)  # fmt: skip
        return g

    def construct(cls: Any, registry: Any, ref: int, name: Any, gtype: Any, par: Any, flags: Any, refs: Any) -> Any:
        t = int(getattr(gtype, "value", gtype))
        if t == _GT_COMM_LOCATION_GROUPS:
            members = tuple(registry.location_groups[m] for m in refs)
            return bare(cls, registry, ref, name, GroupType(t), par, flags, members)
        if t == _GT_COMM_GROUP and len(refs):
            base = [
                g
                for g in registry.groups
                if g.paradigm == par and _gtype(g) in (_GT_COMM_LOCATIONS, _GT_COMM_LOCATION_GROUPS)
            ]
            if base and _gtype(base[-1]) == _GT_COMM_LOCATION_GROUPS:
                members = tuple(base[-1].members[m] for m in refs)
                return bare(cls, registry, ref, name, GroupType(t), par, flags, members)
        return original(cls, registry, ref, name, gtype, par, flags, refs)

    D.Group._construct = classmethod(construct)
    D.Group._perflow_patched = True

    # The bindings' InterComm appends its fields to Comm's (group, parent, flags, groupA, groupB, ...), so
    # reading an InterComm record (self, name, groupA, groupB, commonCommunicator, flags) takes groupB for
    # a parent communicator (KeyError). Read it as a communicator of group A of a Comm subclass named
    # InterComm (perflow maps inter-communicators to no members; see _comms).
    class InterComm(D.Comm):  # type: ignore[misc, valid-type]
        _ref_name = "comm"
        _registry_name = "_comms"

    comm_construct = D.Comm._construct.__func__

    def construct_inter(cls: Any, registry: Any, ref: int, name: Any, a: int, b: int, common: int, flags: Any) -> Any:
        return comm_construct(InterComm, registry, ref, name, a, common, flags)

    D.InterComm._construct = classmethod(construct_inter)


def enum_name(e: Any) -> str:
    """Lower-case name of an ``otf2`` enum value (``RegionRole.POINT2POINT`` -> ``"point2point"``)."""
    if e is None:
        return ""
    names = getattr(type(e), "_names", {})
    return str(names.get(e.value, e.value)).lower()


def _ref(d: Any) -> int:
    return int(d._ref)


@dataclass
class Defs:
    """Everything the event decoders and the assembler need from the definitions."""

    source: str
    creator: str
    version: str
    timer_resolution: int
    global_offset: int
    trace_length: int
    #: OTF2 location refs in location-id order (row i of ``locations`` is ``loc_refs[i]``).
    loc_refs: np.ndarray
    #: number of events per location as declared in the definitions (0 when unknown).
    loc_events: np.ndarray
    locations: pd.DataFrame
    regions: pd.DataFrame
    #: region ref -> dense region id, -1 for refs that are not defined.
    region_map: np.ndarray
    comms: dict[int, np.ndarray]
    comm_names: dict[int, str]
    metrics: pd.DataFrame
    #: CSR over metric (class or instance) refs: members of ref r are metric_members[metric_offsets[r]:...[r+1]].
    metric_offsets: np.ndarray
    metric_members: np.ndarray
    attrs: dict[str, Any] = field(default_factory=dict)
    #: string ref -> string (to name the program of a ProgramBegin record)
    strings: dict[int, str] = field(default_factory=dict)

    @property
    def max_members(self) -> int:
        """Largest number of members of one metric class (at least 1)."""
        if len(self.metric_offsets) < 2:
            return 1
        return max(1, int(np.diff(self.metric_offsets).max()))


def _process_numbers(d: Any) -> dict[int, int]:
    """Location group ref -> process number (MPI world rank when known)."""
    groups = sorted(d.location_groups, key=_ref)
    owner: dict[int, int] = {}
    for g in groups:
        t = g.location_group_type.value if g.location_group_type is not None else _LG_PROCESS
        parent = g.creating_location_group
        if t == _LG_ACCELERATOR and parent is not None:
            owner[_ref(g)] = _ref(parent)
        else:
            owner[_ref(g)] = _ref(g)
    # Resolve chains (an accelerator group created by another accelerator group).
    for g in list(owner):
        seen = {g}
        while owner[g] != g and owner[g] in owner and owner[owner[g]] != owner[g] and owner[g] not in seen:
            seen.add(owner[g])
            owner[g] = owner[owner[g]]
    rank: dict[int, int] = {}
    mpi = [
        g
        for g in d.groups
        if _gtype(g) in (_GT_COMM_LOCATIONS, _GT_COMM_LOCATION_GROUPS)
        and g.paradigm is not None
        and g.paradigm.value == _PARADIGM_MPI
    ]
    if mpi:  # the MPI world in rank order: its locations (OTF2 2) or its location groups (OTF2 3)
        for r, m in enumerate(mpi[-1].members):
            lg = _ref(m.group) if _gtype(mpi[-1]) == _GT_COMM_LOCATIONS else _ref(m)
            rank.setdefault(owner.get(lg, lg), r)
    nxt = max(rank.values(), default=-1) + 1
    for g in groups:
        top = owner[_ref(g)]
        if top not in rank:
            rank[top] = nxt
            nxt += 1
    return {g: rank[owner[g]] for g in owner}


def _locations(d: Any) -> tuple[np.ndarray, np.ndarray, pd.DataFrame, dict[int, int]]:
    locs = sorted(d.locations, key=_ref)
    proc_of_group = _process_numbers(d)
    rows = []
    for loc in locs:
        rows.append(
            {
                "process": proc_of_group.get(_ref(loc.group), 0),
                "group": _ref(loc.group),
                "name": loc.name or "",
                "type": _LT_NAMES.get(loc.type.value, "cpu"),
                "ref": _ref(loc),
            }
        )
    df = pd.DataFrame(rows, columns=["process", "group", "name", "type", "ref"])
    # thread = index of the location within its process, ordered by (location group, location id)
    if len(df):
        order = df.sort_values(["process", "group", "ref"], kind="stable").index
        thread = np.zeros(len(df), dtype=np.int64)
        thread[order] = df.loc[order].groupby("process").cumcount().to_numpy()
        df["thread"] = thread
    else:
        df["thread"] = pd.Series([], dtype=np.int64)
    process_of_loc = {int(r): int(p) for r, p in zip(df["ref"], df["process"])}
    process_of_loc.update({-1 - g: p for g, p in proc_of_group.items()})  # location group g -> key -1 - g
    refs = np.array([_ref(loc) for loc in locs], dtype=np.uint64)
    nev = np.array([int(loc.number_of_events or 0) for loc in locs], dtype=np.uint64)
    out = df[["process", "thread", "name", "type"]].astype({"process": np.int64, "thread": np.int64})
    return refs, nev, out, process_of_loc


def _regions(d: Any) -> tuple[pd.DataFrame, np.ndarray]:
    regs = sorted(d.regions, key=_ref)
    rows = [
        {
            "name": r.name or "",
            "role": enum_name(r.region_role),
            "paradigm": enum_name(r.paradigm),
            "file": r.source_file or "",
            "line": int(r.begin_line_number or 0),
            "module": "",
        }
        for r in regs
    ]
    df = pd.DataFrame(rows, columns=["name", "role", "paradigm", "file", "line", "module"])
    df["line"] = df["line"].astype(np.int64)
    max_ref = max((_ref(r) for r in regs), default=-1)
    rmap = np.full(max_ref + 1, -1, dtype=np.int32)
    for i, r in enumerate(regs):
        rmap[_ref(r)] = i
    return df, rmap


def _comms(d: Any, process_of_loc: dict[int, int]) -> tuple[dict[int, np.ndarray], dict[int, str]]:
    comms: dict[int, np.ndarray] = {}
    names: dict[int, str] = {}
    for c in d.comms:
        cid = _ref(c)
        names[cid] = c.name or ""
        group = getattr(c, "group", None)
        if group is None or group.group_type.value == _GT_COMM_SELF or type(c).__name__ == "InterComm":
            comms[cid] = np.zeros(0, dtype=np.int64)
            continue
        # members are locations, or location groups (COMM_LOCATION_GROUPS, or a COMM_GROUP over one)
        ranks = [process_of_loc.get(_ref(m) if type(m).__name__ == "Location" else -1 - _ref(m), -1)
                 for m in group.members]  # fmt: skip
        comms[cid] = np.asarray(ranks, dtype=np.int64)
    return comms, names


def _rma_defs(d: Any, process_of_loc: dict[int, int]) -> dict[str, Any]:
    """RMA windows (``rma_windows``: win -> name and communicator) and the groups RmaGroupSync records name
    (``rma_groups``: group -> world ranks of its members, for every MPI group definition)."""
    wins = {_ref(w): {"name": w.name or "", "comm": _ref(w.comm) if w.comm is not None else -1} for w in d.rma_wins}
    if not wins:
        return {}
    groups = {}
    for g in d.groups:
        if _gtype(g) not in (_GT_COMM_LOCATIONS, _GT_COMM_GROUP, _GT_COMM_LOCATION_GROUPS):
            continue
        groups[_ref(g)] = [process_of_loc.get(_ref(m) if type(m).__name__ == "Location" else -1 - _ref(m), -1)
                           for m in g.members]  # fmt: skip
    return {"rma_windows": wins, "rma_groups": groups}


def _metrics(d: Any) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    members = sorted(d.metric_members, key=_ref)
    dense = {_ref(m): i for i, m in enumerate(members)}
    rows = [
        {
            "name": m.name or "",
            "unit": m.unit or "",
            "mode": enum_name(m.metric_mode),
            "base": 2 if enum_name(m.base) == "binary" else 10,
            "exponent": int(m.exponent or 0),
        }
        for m in members
    ]
    df = pd.DataFrame(rows, columns=["name", "unit", "mode", "base", "exponent"])
    metrics = {_ref(m): m for m in d.metrics}
    max_ref = max(metrics, default=-1)
    lists: list[list[int]] = [[] for _ in range(max_ref + 1)]
    for ref, m in metrics.items():
        cls = m.metric_class if type(m).__name__ == "MetricInstance" else m
        lists[ref] = [dense[_ref(x)] for x in (cls.members or ())]
    offsets = np.zeros(max_ref + 2, dtype=np.int64)
    offsets[1:] = np.cumsum([len(x) for x in lists]) if lists else []
    flat = np.array([x for lst in lists for x in lst], dtype=np.int32)
    return df, offsets, flat


def read_definitions(reader: Any, source: str) -> Defs:
    """Map the definitions of an open :class:`otf2.reader.Reader`.

    Parameters
    ----------
    reader : otf2.reader.Reader
        An open reader (its global definitions are already read).
    source : str
        The anchor file, for messages.

    Returns
    -------
    Defs
    """
    import _otf2

    d = reader.definitions
    cp = d.clock_properties
    try:
        res = int(cp.timer_resolution)
        if res <= 0:
            raise FormatError(source, f"invalid timer resolution {res} in the definitions")
        refs, nev, locations, process_of_loc = _locations(d)
        regions, rmap = _regions(d)
        comms, comm_names = _comms(d, process_of_loc)
        metrics, moff, mmem = _metrics(d)
        rma = _rma_defs(d, process_of_loc)
    except FormatError:
        raise
    except (AttributeError, KeyError, IndexError, TypeError, ValueError) as e:
        raise FormatError(source, f"inconsistent OTF2 definitions: {type(e).__name__}: {e}") from None
    try:
        creator = _otf2.Reader_GetCreator(reader.handle) or ""
        major, minor, bugfix = _otf2.Reader_GetVersion(reader.handle)
        version = f"{major}.{minor}.{bugfix}"
    except Exception:  # noqa: BLE001 - optional metadata
        creator, version = "", ""
    extra = _perflow_extras(d, rmap, regions, creator, source)
    extra.update(rma)
    return Defs(
        source=source,
        creator=creator,
        version=version,
        timer_resolution=res,
        global_offset=int(cp.global_offset),
        trace_length=int(cp.trace_length),
        loc_refs=refs,
        loc_events=nev,
        locations=locations,
        regions=regions,
        region_map=rmap,
        comms=comms,
        comm_names=comm_names,
        metrics=metrics,
        metric_offsets=moff,
        metric_members=mmem,
        attrs=extra,
        strings=_strings(d),
    )


def _strings(d: Any) -> dict[int, str]:
    """The string definitions (ref -> text); empty when the bindings do not expose them."""
    try:
        return {_ref(s): str(s.name) for s in d.strings}
    except (AttributeError, TypeError, ValueError):
        return {}


def _perflow_extras(d: Any, rmap: np.ndarray, regions: pd.DataFrame, creator: str, source: str) -> dict[str, Any]:
    """Calling contexts and sampling period (see :mod:`._contexts`); perflow's own archives keep the
    region's module in its description."""

    try:
        ctx = read_contexts(d, rmap)
    except (AttributeError, KeyError, IndexError, TypeError, ValueError) as e:
        raise FormatError(source, f"inconsistent OTF2 calling-context definitions: {type(e).__name__}: {e}") from None
    if creator.startswith("perflow"):
        regs = sorted(d.regions, key=_ref)
        regions["module"] = [r.description or "" for r in regs]
    out: dict[str, Any] = {"contexts": ctx} if len(ctx["cc_region"]) else {}
    handles = {}
    for h in getattr(d, "io_handles", []) or []:  # I/O handle -> its file's name (else the handle's)
        f = getattr(h, "file", None)
        handles[_ref(h)] = str(getattr(f, "name", None) or h.name or "")
    if handles:
        out["io_handles"] = handles
    return out
