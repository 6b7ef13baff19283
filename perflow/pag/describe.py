"""What a PAG holds: headline numbers (``summary``, ``repr``, HTML) and its parts for content fingerprints.

:class:`Described` is a base of :class:`~perflow.pag.pag.PAG`: its
``summary()``, ``__repr__``, ``_repr_html_`` and ``content()``.
"""

from __future__ import annotations

import html
from typing import Any

import numpy as np

__all__ = ["Described"]


class Described:
    """The PAG's description of itself: a summary, its text and HTML forms, and its parts."""

    def summary(self) -> dict[str, Any]:
        """A few headline numbers: vertices, processes, threads, metrics, trace sizes."""
        s: dict[str, Any] = {
            "vertices": self.n_vertices,
            "processes": int(len(self.processes)),
            "threads": int(self.locations.groupby("process").size().max()) if len(self.locations) else 0,
            "metric rows": len(self._metrics),
            "metrics": self.metric_names,
        }
        if self._trace is not None:
            s["intervals"] = self._trace.n_intervals
            s["messages"] = len(self._trace.messages)
            s["collective instances"] = int(self._trace.collectives["instance"].nunique())
        for k in ("source", "format"):
            if k in self.attrs:
                s[k] = self.attrs[k]
        return s

    def __repr__(self) -> str:
        s = self.summary()
        extra = f", intervals={s['intervals']}, messages={s['messages']}" if "intervals" in s else ""
        src = f", source={s['source']!r}" if "source" in s else ""
        return (
            f"<PAG vertices={s['vertices']}, processes={s['processes']}, threads={s['threads']}, "
            f"metrics={s['metrics']}{extra}{src}>"
        )

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><th style='text-align:left'>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>"
            for k, v in self.summary().items()
        )
        return f"<b>PAG</b><table>{rows}</table>"

    def content(self) -> list[tuple[str, Any]]:
        """What the PAG holds, part by part: ``(name, table or value)`` (for content fingerprints).

        The vertex table, the metrics table, the metric descriptions, and
        for a trace its intervals, messages, collectives and communicators,
        and the communication edges of a source without a trace. Two PAGs
        with equal parts hold the same data. The tables are the PAG's own
        (read them, do not change them); a lazy PAG materialises them.
        """
        parts: list[tuple[str, Any]] = [
            ("vertices", self._vertices),
            ("metrics", self._metrics),
            ("metric_info", repr(sorted((k, repr(v)) for k, v in self._metric_info.items()))),
        ]
        tr = self._trace
        if tr is not None:
            parts += [("intervals", tr.intervals), ("messages", tr.messages), ("collectives", tr.collectives)]
            parts += [
                ("comms", {int(k): np.asarray(v) for k, v in tr.comms.items()}),
                ("comm_names", repr(sorted(tr.comm_names.items()))),
            ]
        if self._comm is not None:
            parts.append(("comm", self._comm))
        return parts
