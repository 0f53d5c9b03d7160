"""Figures as plain Plotly JSON (dicts), built without ``plotly.graph_objects``.

``go.Figure`` validates every property on assignment, which costs seconds for a sweep of a hundred traces
on a busy machine; the dashboard's callbacks must answer in well under a second. :class:`Fig` keeps the
small part of the ``go.Figure`` API the builders use (``add_trace(row=, col=)``, ``update_layout``,
``update_xaxes``/``update_yaxes``, ``add_annotation``, ``add_hline``, ``add_vrect``) and lays out subplot
grids itself; :meth:`Fig.to_dict` is what ``dcc.Graph(figure=…)`` takes. Plotly.js validates in the browser.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

FigureDict = dict[str, Any]


def scatter(**props: Any) -> dict[str, Any]:
    return {"type": "scatter", **props}


def bar(**props: Any) -> dict[str, Any]:
    return {"type": "bar", **props}


def _deep_update(target: dict[str, Any], props: dict[str, Any]) -> None:
    for key, value in props.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _deep_update(target[key], value)
        else:
            target[key] = value


def _expand(props: dict[str, Any]) -> dict[str, Any]:
    """Plotly's magic underscores: ``xaxis_title="t"`` → ``{"xaxis": {"title": "t"}}`` (one level)."""
    out: dict[str, Any] = {}
    for key, value in props.items():
        head, sep, tail = key.partition("_")
        if sep and head in ("xaxis", "yaxis", "legend", "title", "font", "margin") and tail:
            if head == "title" and tail == "text":
                _deep_update(out, {"title": {"text": value}})
            elif tail == "title":
                _deep_update(out, {head: {"title": {"text": value}}})
            else:
                _deep_update(out, {head: {_tail(tail): value}})
        else:
            _deep_update(out, {key: value})
    return out


def _tail(tail: str) -> str:
    return {"type": "type", "title": "title"}.get(tail, tail)


class Fig:
    """A figure with a grid of ``rows`` × ``cols`` subplots (row 1 at the top)."""

    def __init__(
        self,
        rows: int = 1,
        cols: int = 1,
        *,
        row_heights: Sequence[float] | None = None,
        subplot_titles: Sequence[str] | None = None,
        horizontal_spacing: float = 0.05,
        vertical_spacing: float = 0.08,
        shared_xaxes: bool = False,
        shared_yaxes: bool = False,
    ) -> None:
        self.rows, self.cols = rows, cols
        self.data: list[dict[str, Any]] = []
        self.layout: dict[str, Any] = {"annotations": [], "shapes": []}
        heights = list(row_heights) if row_heights else [1.0] * rows
        total = sum(heights)
        usable_h = 1 - vertical_spacing * (rows - 1)
        usable_w = 1 - horizontal_spacing * (cols - 1)
        width = usable_w / cols
        tops: list[tuple[float, float]] = []
        top = 1.0
        for h in heights:
            span = usable_h * h / total
            tops.append((max(0.0, top - span), top))
            top -= span + vertical_spacing
        for r in range(1, rows + 1):
            for c in range(1, cols + 1):
                n = self._index(r, c)
                x0 = (c - 1) * (width + horizontal_spacing)
                xa: dict[str, Any] = {"domain": [x0, min(1.0, x0 + width)], "anchor": self._ref("y", n)}
                ya: dict[str, Any] = {"domain": list(tops[r - 1]), "anchor": self._ref("x", n)}
                if shared_xaxes and r < rows:
                    xa["matches"] = self._ref("x", self._index(rows, c))
                    xa["showticklabels"] = False
                if shared_yaxes and c > 1:
                    ya["matches"] = self._ref("y", self._index(r, 1))
                    ya["showticklabels"] = False
                self.layout[self._name("xaxis", n)] = xa
                self.layout[self._name("yaxis", n)] = ya
        # Titles fill the grid row by row (as plotly.subplots.make_subplots does).
        for i, title in enumerate(subplot_titles or []):
            r, c = i // cols + 1, i % cols + 1
            if r > rows:
                break
            xd = self.layout[self._name("xaxis", self._index(r, c))]["domain"]
            self.layout["annotations"].append(
                {
                    "text": title,
                    "x": (xd[0] + xd[1]) / 2,
                    "y": tops[r - 1][1],
                    "xref": "paper",
                    "yref": "paper",
                    "xanchor": "center",
                    "yanchor": "bottom",
                    "showarrow": False,
                    "font": {"size": 14},
                }
            )

    def _index(self, row: int, col: int) -> int:
        return (row - 1) * self.cols + col

    @staticmethod
    def _ref(axis: str, n: int) -> str:
        return axis if n == 1 else f"{axis}{n}"

    @staticmethod
    def _name(axis: str, n: int) -> str:
        return axis if n == 1 else f"{axis}{n}"

    def add_trace(self, trace: dict[str, Any], row: int = 1, col: int = 1) -> None:
        n = self._index(row, col)
        if n != 1:
            trace["xaxis"] = self._ref("x", n)
            trace["yaxis"] = self._ref("y", n)
        self.data.append(trace)

    def update_layout(self, **props: Any) -> None:
        _deep_update(self.layout, _expand(props))

    def _axes(self, axis: str, row: int | None, col: int | None) -> list[dict[str, Any]]:
        out = []
        for r in range(1, self.rows + 1):
            for c in range(1, self.cols + 1):
                if (row is None or row == r) and (col is None or col == c):
                    out.append(self.layout[self._name(axis, self._index(r, c))])
        return out

    def update_xaxes(self, row: int | None = None, col: int | None = None, **props: Any) -> None:
        for ax in self._axes("xaxis", row, col):
            _deep_update(ax, _axis_props(props))

    def update_yaxes(self, row: int | None = None, col: int | None = None, **props: Any) -> None:
        for ax in self._axes("yaxis", row, col):
            _deep_update(ax, _axis_props(props))

    def add_annotation(self, row: int | None = None, col: int | None = None, **props: Any) -> None:
        if row is not None and col is not None:
            n = self._index(row, col)
            props.setdefault("xref", self._ref("x", n))
            props.setdefault("yref", self._ref("y", n))
        self.layout["annotations"].append(props)

    def add_hline(
        self,
        y: float,
        *,
        line: dict[str, Any] | None = None,
        annotation_text: str | None = None,
        row: int = 1,
        col: int = 1,
        log: bool = False,
        **_: Any,
    ) -> None:
        """A horizontal line across a panel at ``y``, labelled at its right end (``log``: the panel's y axis
        is a log axis, where Plotly places an annotation at the log of its value, a shape at the value)."""
        n = self._index(row, col)
        xa = self.layout[self._name("xaxis", n)]["domain"]
        yref = self._ref("y", n)
        self.layout["shapes"].append(
            {
                "type": "line",
                "xref": "paper",
                "yref": yref,
                "x0": xa[0],
                "x1": xa[1],
                "y0": y,
                "y1": y,
                "line": line or {"dash": "dot", "color": "#6c757d", "width": 1},
            }
        )
        if annotation_text:
            self.layout["annotations"].append(
                {
                    "text": annotation_text,
                    "xref": "paper",
                    "yref": yref,
                    "x": xa[1],
                    "y": math.log10(y) if log and y > 0 else y,
                    "xanchor": "right",
                    "yanchor": "bottom",
                    "showarrow": False,
                    "font": {"size": 11},
                    "bgcolor": "rgba(255,255,255,0.85)",  # readable over a bar it crosses
                }
            )

    def add_vrect(
        self, x0: float, x1: float, *, fillcolor: str, annotation_text: str | None = None, **_: Any
    ) -> None:
        self.layout["shapes"].append(
            {
                "type": "rect",
                "xref": "x",
                "yref": "paper",
                "x0": x0,
                "x1": x1,
                "y0": 0,
                "y1": 1,
                "fillcolor": fillcolor,
                "line": {"width": 0},
                "layer": "below",
            }
        )
        if annotation_text:
            self.layout["annotations"].append(
                {
                    "text": annotation_text,
                    "xref": "x",
                    "yref": "paper",
                    "x": x0,
                    "y": 1,
                    "xanchor": "left",
                    "yanchor": "top",
                    "showarrow": False,
                    "font": {"size": 11},
                }
            )

    def to_dict(self) -> FigureDict:
        layout = dict(self.layout)
        if not layout["shapes"]:
            del layout["shapes"]
        return {"data": self.data, "layout": layout}


def _axis_props(props: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in props.items():
        if key == "title_text":
            _deep_update(out, {"title": {"text": value}})
        else:
            out[key] = value
    return out
