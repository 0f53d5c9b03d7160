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

    from demuxlab.cli.dashboard import dashboard

    result = CliRunner().invoke(dashboard, ["--port", "70000"])
    assert result.exit_code == 2 and "70000" in result.output


# Every page and the keys it takes from the address (the browser test covers the same in chromium).
PAGE_KEYS: dict[str, tuple[str, ...]] = {
    "/": ("experiment",),
    "/sweep": ("experiment", "x", "colour", "facet", "patterns", "notifiers", "show"),
    "/ranking": ("experiment", "workload", "model"),
    "/history": ("experiment", "patterns", "notifiers"),
    "/operations": ("experiment", "x", "statistic"),
    "/run": ("run",),
    "/model": ("experiment", "pattern", "rates", "threads", "work", "connections", "r_l", "r_e"),
    "/compare": ("a", "b", "c", "d", "a_pair", "b_build", "x"),
    "/hosts": ("host",),
    "/claims": ("experiment",),
}


# Dash 4 warns that its DataTable will move out of the package one day; the pages use it as it is.
@pytest.mark.filterwarnings("ignore::DeprecationWarning:dash.development.base_component")
def test_every_key_of_every_page_answers_bad_values(database_url: str, tmp_path: Any) -> None:
    """A NUL, a control character, a 20,000-character value and a repeated key, in every key of every page:
    HTTP 200, a short message naming the key, no traceback, nothing 20,000 characters long echoed."""
    from demuxlab.dashboard import common
    from demuxlab.dashboard.app import create_app
    from helpers import dashboard_sample as sample

    spec = sample.load(tmp_path)
    from demuxlab.ingest import ingest_files

    ingest_files(sample.write_records(spec, sample.planned(spec)[:6], tmp_path / "runs"))
    app = create_app(database_url)
    app.server.dash_app = app
    client = app.server.test_client()
    long = "x" * 20_000
    try:
        for path, keys in PAGE_KEYS.items():
            for key in keys:
                for value, says in (
                    ("%00", "NUL"),
                    ("a%07b", "control character"),
                    (long, "20,000 characters"),
                ):
                    page = call_page(client, path, f"?{key}={value}")
                    assert says in page and f"{key} " in page and "Traceback" not in page, (path, key)
                    assert long not in page and "frame-page-error" not in page, (path, key)
                page = call_page(client, path, f"?{key}=1&{key}=2")
                assert "given 2 times" in page, (path, key)
        # The forms the platform accepts name an experiment: name, name@sha, the numeric id.
        for ref in ("dashdemo", f"dashdemo@{spec.sha256[:8]}", f"dashdemo@{spec.sha256[:8].upper()}", "1"):
            page = call_page(client, "/", f"?experiment={ref}")
            assert '"value": "dashdemo"' in page, ref
        for ref in ("dashdemo@zz", "dashdemo@%25", "99999999999999999999", "dash%5Fdemo"):
            assert "Unknown experiment" in call_page(client, "/sweep", f"?experiment={ref}"), ref
    finally:
        common.store().dispose()


def test_figure_builders_never_touch_the_database() -> None:
    """figures/ is pure: it imports neither the queries nor SQLAlchemy nor Dash."""
    import ast
    from pathlib import Path

    import demuxlab.dashboard.figures as figures

    for path in Path(figures.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            for name in names:
                assert not name.startswith(("demuxlab.dashboard.data", "sqlalchemy", "dash", "psycopg")), (
                    path.name,
                    name,
                )


@pytest.mark.filterwarnings("ignore::DeprecationWarning:dash.development.base_component")
def test_the_claims_page_names_a_stored_refusal_as_recommendations_csv_does(
    database_url: str, tmp_path: Any
) -> None:
    """The Claims page's recommendations read the calibrations' stored refusals: a design without a
    calibrated prediction is named with its refusal and figure (validation.store.refusal_reasons, what
    the workflow's recommendations.csv says), one without a refusal as having no prediction."""
    from demuxlab.dashboard import common
    from demuxlab.dashboard.app import create_app
    from demuxlab.ingest import ingest_files
    from demuxlab.validation.store import save_refusal
    from helpers import dashboard_sample as sample

    spec = sample.load(tmp_path)
    ingest_files(sample.write_records(spec, sample.planned(spec), tmp_path / "runs"))
    sample.store_model(spec, database_url)  # calibrated predictions for lf/epoll-lt only
    error = "refused: the fitted model misses its own runs by 32 % (more than 10 %)"
    save_refusal("lf", "select", ["r1"], experiment=spec.name, spec_sha256=spec.sha256, error=error)
    app = create_app(database_url)
    try:
        from demuxlab.dashboard.pages import claims

        _, recs, _ = claims.evaluate(spec.name, spec.sha256, common.store().url)
        (missing,) = set(recs["model_missing"])
        assert recs["model_source"].eq("calibration").all(), recs
        assert f"lf/select (calibration refused: {error})" in missing.split(" | "), missing
        assert "hsha/epoll-lt (no calibration prediction)" in missing.split(" | "), missing
        # The refusal stored again with a new reason (updated in place): a new version, not the cached page.
        from demuxlab.dashboard.data import claims as queries
        from demuxlab.dashboard.data import resolve_experiment

        with common.store().connect() as conn:
            exp = resolve_experiment(conn, spec.name)
            before = queries.version(conn, exp)
        save_refusal("lf", "select", ["r1"], experiment=spec.name, spec_sha256=spec.sha256, error=error + "!")
        with common.store().connect() as conn:
            assert queries.version(conn, exp) != before
    finally:
        del app
        common.store().dispose()


def test_compare_opens_on_an_experiment_whose_sides_share_points(database_url: str, tmp_path: Any) -> None:
    """Compare with no sides in its address: an older experiment with two spec versions (they share its
    points) is opened on before the two newest experiments, which share none (the quickstart's smoke made
    after a sweep of two versions opened as sweep against smoke: 'the sides share no point')."""
    import datetime as dt

    from demuxlab.dashboard import common
    from demuxlab.dashboard.app import create_app
    from demuxlab.ingest import ingest_files
    from helpers import dashboard_sample as sample

    now = dt.datetime.now(dt.UTC)
    v1 = sample.load(tmp_path, sample.SPEC_V1)
    ingest_files(sample.write_records(v1, sample.planned(v1)[:4], tmp_path / "v1", start=now))
    v2 = sample.load(tmp_path)
    ingest_files(sample.write_records(v2, sample.planned(v2)[:4], tmp_path / "v2", start=now))
    smoke = sample.load_smoke(tmp_path)
    ingest_files(sample.write_records(smoke, sample.planned(smoke)[:4], tmp_path / "smoke", start=now))
    app = create_app(database_url)
    try:
        from demuxlab.dashboard.pages import compare

        with common.store().connect() as conn:
            opened = compare.opening(conn)
        assert opened == {"a": f"dashdemo@{v1.sha256[:8]}", "b": "dashdemo"}, opened
    finally:
        del app
        common.store().dispose()


def test_the_run_picker_holds_a_few_runs_and_the_database_finds_the_rest(
    database_url: str, tmp_path: Any
) -> None:
    """The Run page's picker holds RUN_OPTIONS runs (500 took chromium 2.4 s to draw the page at 10,000
    runs); what is typed is searched in the database, so a run past the first ones is found, and the run
    shown is always among the options (else the picker would show it blank)."""
    from demuxlab.dashboard import common
    from demuxlab.dashboard.app import create_app
    from demuxlab.ingest import ingest_files
    from helpers import dashboard_sample as sample

    spec = sample.load(tmp_path)
    ingest_files(sample.write_records(spec, sample.planned(spec), tmp_path / "runs"))
    app = create_app(database_url)
    try:
        from demuxlab.dashboard.data import resolve_experiment
        from demuxlab.dashboard.data import runs as queries

        with common.store().connect() as conn:
            exp = resolve_experiment(conn, spec.name)
            every = queries.run_options(conn, exp, limit=10_000)
            first = queries.run_options(conn, exp)
            assert len(every) > queries.RUN_OPTIONS and len(first) == queries.RUN_OPTIONS
            assert first == every[: queries.RUN_OPTIONS]
            last = every[-1]
            key = last["label"].split(" · ")[0]
            found = queries.run_options(conn, exp, search=key.upper())
            assert last in found and all(o["label"].startswith(key) for o in found), found
            assert queries.run_options(conn, exp, search="no/such/point") == []
            shown = queries.run_options(conn, exp, chosen=last["value"])
            assert shown[0] == last and len(shown) == queries.RUN_OPTIONS
            assert queries.run_options(conn, exp, search="zz%_\\") == []  # LIKE's characters are text
    finally:
        del app
        common.store().dispose()
