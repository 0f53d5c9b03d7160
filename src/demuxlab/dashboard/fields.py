"""The point's fields as the dashboard shows them, derived from :data:`demuxlab.point.POINT_FIELDS`.

Nothing here spells the list of fields out: a field added to :class:`demuxlab.point.Point` becomes a
parameter of every page (a series key, a column of the tables, a facet), and an axis when it is a number.
Pure: no database, no Dash.
"""

from __future__ import annotations

import typing
from typing import Any

from demuxlab.point import POINT_FIELDS, Point

# A calibration point is not part of the measured sweep (CONTRACTS.md §4): the dashboard's points are the
# measured ones, so `instrument` is a filter, never a parameter.
NOT_PARAMS: frozenset[str] = frozenset({"instrument"})
#: The parameters of a measured point, in the point's order.
PARAMS: tuple[str, ...] = tuple(f for f in POINT_FIELDS if f not in NOT_PARAMS)


def _numeric(name: str) -> bool:
    hints = typing.get_type_hints(Point)
    kinds = set(typing.get_args(hints[name])) or {hints[name]}
    return bool(kinds & {int, float}) and bool not in kinds


def _integer(name: str) -> bool:
    hints = typing.get_type_hints(Point)
    kinds = set(typing.get_args(hints[name])) or {hints[name]}
    return int in kinds and float not in kinds


#: Parameters that can be an x axis (numbers), and those whose values are whole numbers (integer ticks).
NUMERIC: tuple[str, ...] = tuple(f for f in PARAMS if _numeric(f))
INTEGER: frozenset[str] = frozenset(f for f in NUMERIC if _integer(f))
#: Parameters whose values are names (pattern, notifier).
NAMES: tuple[str, ...] = tuple(f for f in PARAMS if f not in NUMERIC)

# How each field reads on an axis or a legend; a field without an entry reads as its name.
_LABELS: dict[str, str] = {
    "threads": "server threads",
    "work_us": "work per message (µs)",
    "connections": "connections",
    "msg_size": "message size (B)",
    "client_threads": "client threads",
    "rate": "offered rate (msg/s)",
}
# How a value reads in a series name ("4 thr", "10 µs"); fields without an entry read "name=value".
_UNITS: dict[str, str] = {
    "threads": "thr",
    "work_us": "µs",
    "connections": "conn",
    "msg_size": "B",
    "client_threads": "client thr",
    "rate": "msg/s",
}


def label(field: str) -> str:
    return _LABELS.get(field, field.replace("_", " "))


#: Every parameter with its label (for dropdowns), and the x axes.
PARAM_LABEL: dict[str, str] = {f: label(f) for f in PARAMS}
AXES: dict[str, str] = {f: label(f) for f in NUMERIC}


def number(v: Any) -> str:
    """A number as a reader writes it: 10 not 10.0, 2.5 as is."""
    f = float(v)
    return str(int(f)) if f.is_integer() else f"{f:g}"


def value_text(field: str, v: Any) -> str:
    """One field's value in a series name or a title."""
    if v is None or (isinstance(v, float) and v != v):
        return "closed loop" if field == "rate" else f"{field} —"
    if field in NAMES:
        return str(v)
    unit = _UNITS.get(field)
    return f"{number(v)} {unit}" if unit else f"{field}={number(v)}"
