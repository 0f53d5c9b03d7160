"""A sweep point: one server design at one setting of every axis (CONTRACTS.md §4).

The point's fields are defined here once; :data:`POINT_FIELDS` (derived from the dataclass) is what the
record schema, the database's ``points`` columns, the report's tables, the claims and the dashboard's
parameters name. A point is rebuilt from any of its JSON forms with :meth:`Point.from_json`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Point:
    pattern: str
    notifier: str
    threads: int
    work_us: float
    connections: int
    msg_size: int
    client_threads: int
    rate: float | None  # None: closed loop
    # A calibration point: the server runs with --instrument (per-operation timings for the CTMC rates).
    instrument: bool = False

    @property
    def point_key(self) -> str:
        rate = "closed" if self.rate is None else f"{self.rate:g}"
        return (
            f"{self.pattern}/{self.notifier}/t{self.threads}/w{self.work_us:g}/c{self.connections}"
            f"/b{self.msg_size}/ct{self.client_threads}/r{rate}" + ("/instr" if self.instrument else "")
        )

    def to_json(self) -> dict[str, Any]:
        return {"point_key": self.point_key, **{name: getattr(self, name) for name in POINT_FIELDS}}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Point:
        """The point of a mapping that holds at least its fields (a record's ``point``, a database row as a
        mapping, :meth:`to_json`'s output); other keys (``point_key``, ids) are ignored. Numbers are
        normalised to the field's type, so a point read back has the key it was written with."""
        rate = doc.get("rate")
        return cls(
            pattern=str(doc["pattern"]),
            notifier=str(doc["notifier"]),
            threads=int(doc["threads"]),
            work_us=float(doc["work_us"]),
            connections=int(doc["connections"]),
            msg_size=int(doc["msg_size"]),
            client_threads=int(doc["client_threads"]),
            rate=None if rate is None else float(rate),
            instrument=bool(doc.get("instrument", False)),
        )


# The point's fields in their order: the one list every other part derives its columns from.
POINT_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Point))
