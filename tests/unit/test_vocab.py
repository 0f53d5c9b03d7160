"""The vocabulary is defined once (demuxlab.vocab, demuxlab.point); the copies a tool needs in its own
format (the spec's JSON schema, the database's check constraints, the server's --list) must agree."""

from __future__ import annotations

import json
import re
import subprocess
from importlib import resources
from pathlib import Path

import pytest

from demuxlab import vocab
from demuxlab.db import models
from demuxlab.paths import bin_dir
from demuxlab.point import POINT_FIELDS, Point


def _schema() -> dict:
    return json.loads(resources.files("demuxlab.spec").joinpath("experiment.schema.json").read_text())


def _check(table: str, name: str) -> set[str]:
    for c in models.Base.metadata.tables[table].constraints:
        if getattr(c, "name", None) and str(c.name).endswith(name) and hasattr(c, "sqltext"):
            return set(re.findall(r"'([^']+)'", str(c.sqltext)))
    raise AssertionError(f"no check constraint {name} on {table}")


def test_spec_schema_file_keeps_no_copy_of_the_vocabulary() -> None:
    """The file names no pattern or notifier: the loaded schema takes them from vocab (issue 46: a new
    notifier touches vocab, not a list kept by hand beside it)."""
    text = resources.files("demuxlab.spec").joinpath("experiment.schema.json").read_text()
    design = _schema()["properties"]["designs"]["items"]["properties"]
    assert "enum" not in design["pattern"] and "enum" not in design["notifiers"]["items"]
    quoted = set(re.findall(r'"([^"]+)"', text))
    assert quoted & {*vocab.PATTERNS, *vocab.NOTIFIERS} == set()


def test_the_contract_lists_the_vocabulary() -> None:
    """CONTRACTS.md §1 names the server's patterns and notifiers as vocab does, in its order."""
    text = " ".join((Path(__file__).resolve().parents[2] / "docs" / "CONTRACTS.md").read_text().split())
    found = re.search(r"Patterns: `([^`]+)`\. Notifiers: `([^`]+)`, and `none`", text)
    assert found, "CONTRACTS.md §1 no longer lists the patterns and notifiers as this test reads them"
    assert tuple(found[1].split()) == vocab.PATTERNS
    assert (*found[2].split(), "none") == vocab.NOTIFIERS


def test_every_pattern_has_its_calibration_concurrency() -> None:
    assert set(vocab.CALIBRATION_THREADS) == set(vocab.PATTERNS)
    assert all(isinstance(t, int) and t >= 1 for t in vocab.CALIBRATION_THREADS.values())


def test_database_constraints_match_the_vocabulary() -> None:
    assert _check("runs", "status") == set(vocab.RUN_STATUSES)
    assert _check("predictions", "method") == set(vocab.SOLVER_METHODS)
    assert _check("predictions", "rates_source") == set(vocab.RATE_SOURCES)


def test_points_table_has_every_point_field() -> None:
    columns = set(models.Base.metadata.tables["points"].columns.keys())
    assert set(POINT_FIELDS) <= columns


def test_server_lists_only_known_designs() -> None:
    server = bin_dir() / "demux-server"
    if not server.exists():
        pytest.fail(f"{server} not built (make build)")
    listed = json.loads(subprocess.run([str(server), "--list"], capture_output=True, check=True).stdout)
    assert {p["pattern"] for p in listed} == set(vocab.PATTERNS)
    assert {p["notifier"] for p in listed} == set(vocab.NOTIFIERS)


def test_point_round_trips_through_json() -> None:
    p = Point("hsha", "epoll-lt", 4, 10.0, 512, 1, 2, 1500.0, instrument=True)
    assert Point.from_json(p.to_json()) == p
    assert Point.from_json({**p.to_json(), "threads": "4", "work_us": 10}).point_key == p.point_key


def test_run_record_schema_names_every_point_field() -> None:
    from demuxlab.ingest.schema import RECORD_SCHEMA

    point = RECORD_SCHEMA["properties"]["point"]
    assert set(point["properties"]) == {"point_key", *POINT_FIELDS}
    assert set(point["required"]) == {"point_key", *POINT_FIELDS} - {"instrument"}
    assert tuple(RECORD_SCHEMA["properties"]["status"]["enum"]) == vocab.RUN_STATUSES


def test_loaded_spec_schema_takes_the_names_from_the_vocabulary() -> None:
    from demuxlab.spec import schema

    design = schema()["properties"]["designs"]["items"]["properties"]
    assert tuple(design["pattern"]["enum"]) == vocab.PATTERNS
    assert tuple(design["notifiers"]["items"]["enum"]) == vocab.NOTIFIERS
