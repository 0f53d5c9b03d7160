"""The dashboard app in process (Flask's test client) against a real PostgreSQL: the read-only URL, a
database that is not there yet (clear page, then recovery), a database without schema, read-only-ness."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from sqlalchemy import make_url

pytestmark = pytest.mark.postgres


def call_page(client: Any, path: str, search: str = "") -> str:
    """The pages router's callback, as the browser calls it on navigation."""
    client.get("/")  # Dash registers the router on the first request
    app = client.application.dash_app  # set by the test below
    output = next(k for k in app.callback_map if "_pages_content.children" in k)
    payload = {
        "output": output,
        "outputs": [
            {"id": "_pages_content", "property": "children"},
            {"id": "_pages_store", "property": "data"},
        ],
        "inputs": [
            {"id": "_pages_location", "property": "pathname", "value": path},
            {"id": "_pages_location", "property": "search", "value": search},
        ],
        "changedPropIds": ["_pages_location.pathname"],
        "state": [],
    }
    resp = client.post("/_dash-update-component", json=payload)
    assert resp.status_code == 200, resp.data[:500]
    return json.dumps(resp.get_json())


def test_readonly_url_swaps_the_user(monkeypatch: pytest.MonkeyPatch) -> None:
    from demuxlab.db.engine import readonly_url

    monkeypatch.delenv("DEMUXLAB_DASHBOARD_DATABASE_URL", raising=False)
    monkeypatch.setenv("DEMUXLAB_DATABASE_URL", "postgresql://owner:secret@db.example:5433/lab")
    url = make_url(readonly_url())
    assert (url.username, url.password, url.host, url.port, url.database) == (
        "demuxlab_ro",
        None,
        "db.example",
        5433,
        "lab",
    )
    assert url.drivername == "postgresql+psycopg"
    monkeypatch.setenv("DEMUXLAB_DASHBOARD_DATABASE_URL", "postgresql://viewer:pw@h/lab")
    assert make_url(readonly_url()).username == "viewer"


def test_unreachable_database_shows_a_page_and_recovers(pg_server: Any) -> None:
    from demuxlab.dashboard import common
    from demuxlab.dashboard.app import create_app

    name = f"test_dash_late_{uuid.uuid4().hex[:8]}"
    ro = make_url(pg_server.url_for(name))._replace(username="demuxlab_ro", password=None)
    app = create_app(ro.render_as_string(hide_password=False))
    app.server.dash_app = app
    client = app.server.test_client()
    try:
        health = client.get("/healthz")
        assert health.status_code == 503 and "cannot reach database" in health.get_json()["error"]
        page = call_page(client, "/sweep")
        assert "Database unavailable" in page and name in page and "Traceback" not in page
        pg_server.create_database(name, pg_server.template)  # the database comes (back)
        assert client.get("/healthz").status_code == 200
        assert "No experiments in the database yet" in call_page(client, "/")
        assert "No experiments in the database yet" in call_page(client, "/sweep", "?experiment=nope")
        assert "not a run id" in call_page(client, "/run", "?run=xyz")
    finally:
        common.store().dispose()
        pg_server.drop_database(name)


def test_database_without_schema_says_what_to_do(empty_database_url: str) -> None:
    from demuxlab.dashboard import common
    from demuxlab.dashboard.app import create_app

    # No schema means no demuxlab_ro grants either: read as the owner to reach the "no schema" case.
    app = create_app(empty_database_url)
    try:
        app.server.dash_app = app
        page = call_page(app.server.test_client(), "/")
        assert "no demuxlab schema yet" in page and "demuxlab db upgrade" in page
    finally:
        common.store().dispose()


def test_the_dashboard_connection_cannot_write(database_url: str) -> None:
    from sqlalchemy import text
    from sqlalchemy.exc import DBAPIError

    from demuxlab.dashboard.data import Store

    ro = (
        make_url(database_url)
        ._replace(username="demuxlab_ro", password=None)
        .render_as_string(hide_password=False)
    )
    store = Store(ro)
    try:
        with store.connect() as conn:
            assert conn.execute(text("SELECT current_user")).scalar() == "demuxlab_ro"
            with pytest.raises(DBAPIError, match="read-only transaction"):
                conn.execute(text("INSERT INTO experiments (name, spec_sha256) VALUES ('x', 'y')"))
    finally:
        store.dispose()


def test_binding_beyond_loopback_is_recognised() -> None:
    from demuxlab.dashboard.server import is_loopback

    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.0.2.7")


def test_dashboard_command_rejects_a_bad_port() -> None:
    from click.testing import CliRunner

    from demuxlab.dashboard.cli import dashboard

    result = CliRunner().invoke(dashboard, ["--port", "70000"])
    assert result.exit_code == 2 and "70000" in result.output
