"""The matplotlib ``Figure`` subclass every plot pass returns: it displays itself in notebooks.

IPython shows an object's ``_repr_png_`` when no formatter is registered for its type, so a
figure made by a pass displays as the last expression of a cell without ``%matplotlib inline``
(with the inline backend active, its formatter draws the figure instead: the same picture).
Imported only when a figure is made (:func:`perflow.sdk.figures.new_figure`): importing this
module imports matplotlib.
"""

from __future__ import annotations

from typing import Any

from matplotlib.backend_bases import RendererBase
from matplotlib.figure import Figure
from matplotlib.image import AxesImage

from .render import figure_png

__all__ = ["PerflowFigure", "LayoutFreeImage", "figure_png"]


class PerflowFigure(Figure):
    """A matplotlib Figure with a PNG representation for IPython (``_repr_png_``)."""

    def _repr_png_(self) -> bytes:
        return figure_png(self)


class LayoutFreeImage(AxesImage):
    """An image that skips its resampling when the renderer's drawing is disabled.

    ``savefig(bbox_inches="tight")`` and the constrained layout draw the figure once with the
    renderer's ``draw_*`` methods replaced by no-ops (``RendererBase._draw_disabled``), to measure
    it; an image's extent does not depend on its pixels, so resampling a large image (a summary
    timeline's bands) then is wasted work. The real draw is unchanged (the same pixels).
    """

    def draw(self, renderer: Any) -> None:
        if getattr(getattr(renderer, "draw_image", None), "__wrapped__", None) is RendererBase.draw_image:
            return  # a measuring pass: nothing is drawn
        super().draw(renderer)
