"""Run records for the database tests, built from ``data/run_record.json``."""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

TEMPLATE = Path(__file__).parent / "data" / "run_record.json"
NAMESPACE = uuid.UUID("bb733ec1-0469-5864-8c8a-8cc4fcd3fe6c")  # CONTRACTS.md §4

MakeRecord = Callable[..., dict[str, Any]]


def run_id_for(record: dict[str, Any]) -> str:
    exp = record["experiment"]
    key = f"{exp['name']}|{exp['spec_sha256']}|{record['point']['point_key']}|{record['repeat']}"
    return str(uuid.uuid5(NAMESPACE, key))


@pytest.fixture
def make_record() -> MakeRecord:
    """``make_record(repeat=1, status="failed", threads=8)``: a fresh, consistent run record."""

    def build(*, repeat: int = 0, status: str = "ok", threads: int | None = None) -> dict[str, Any]:
        record: dict[str, Any] = copy.deepcopy(json.loads(TEMPLATE.read_text()))
        record["repeat"] = repeat
        if threads is not None:
            point = record["point"]
            point["threads"] = threads
            point["point_key"] = point["point_key"].replace("/t4/", f"/t{threads}/")
        if status == "failed":
            record["status"] = "failed"
            record["failure_reason"] = "demux-client: connection reset by peer after 3.2 s"
            record["client"] = None
            record["stats"] = None
            record["server"]["ops"] = {}
            del record["server"]["notify_by_events"]
        record["run_id"] = run_id_for(record)
        return record

    return build


@pytest.fixture
def write_record(tmp_path: Path) -> Callable[[dict[str, Any]], Path]:
    counter = iter(range(1_000_000))

    def write(record: dict[str, Any]) -> Path:
        path = tmp_path / f"run-{next(counter)}.json"
        path.write_text(json.dumps(record))
        return path

    return write
