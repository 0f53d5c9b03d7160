"""Fixtures the bundle tests share."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture
def fresh_url(pg_server: Any) -> Iterator[str]:
    """A new empty database at schema head (the target of an import), dropped afterwards."""
    name = f"test_bundle_{uuid.uuid4().hex[:10]}"
    url: str = pg_server.create_database(name, pg_server.template)
    try:
        yield url
    finally:
        pg_server.drop_database(name)
