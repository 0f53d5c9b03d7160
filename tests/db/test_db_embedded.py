"""The embedded cluster: init once (even with concurrent starters), start/stop, idempotence; engine errors."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from demuxlab.db.embedded import DATABASE, Cluster, pg_bin_dir
from demuxlab.db.engine import database_url, dispose_engines, get_engine, session
from demuxlab.errors import ConfigError, DatabaseError

_STARTER = """
import json, sys
from pathlib import Path
from demuxlab.db.embedded import Cluster
r = Cluster(Path(sys.argv[1]), settings={"fsync": "off"}).ensure_running()
print(json.dumps({"initialized": r.initialized, "started": r.started, "created": r.created_database}))
"""


@pytest.fixture
def fresh_home() -> Iterator[Path]:
    try:
        pg_bin_dir()
    except DatabaseError as exc:
        pytest.skip(exc.message)
    home = Path(tempfile.mkdtemp(prefix="dlx-emb-"))
    home.chmod(0o755)
    try:
        yield home
    finally:
        Cluster(home).stop()
        shutil.rmtree(home, ignore_errors=True)


def _conninfo(cluster: Cluster) -> str:
    return cluster.url().replace("postgresql+psycopg://", "postgresql://")


@pytest.mark.postgres
@pytest.mark.slow
def test_concurrent_starters_then_stop_and_restart(fresh_home: Path) -> None:
    starters = [
        subprocess.Popen(
            [sys.executable, "-c", _STARTER, str(fresh_home)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outcomes = []
    for proc in starters:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        outcomes.append(json.loads(out))
    # Exactly one of them ran initdb, started the server and created the database.
    for key in ("initialized", "started", "created"):
        assert sorted(o[key] for o in outcomes) == [False, True], outcomes

    cluster = Cluster(fresh_home)
    assert cluster.is_running()
    sock = cluster.socket_dir / ".s.PGSQL.54329"
    assert sock.is_socket()
    with psycopg.connect(_conninfo(cluster)) as conn:
        assert conn.execute("SELECT current_database()").fetchone() == (DATABASE,)
        # Unix socket only: no TCP listener.
        assert conn.execute("SHOW listen_addresses").fetchone() == ("",)

    assert cluster.stop() is True
    assert not cluster.is_running() and not sock.exists()
    assert cluster.stop() is False

    again = cluster.ensure_running()
    assert (again.initialized, again.started, again.created_database) == (False, True, False)
    assert cluster.ensure_running() == type(again)(False, False, False)


@pytest.mark.postgres
@pytest.mark.slow
def test_get_engine_starts_the_embedded_cluster_on_demand(
    fresh_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DEMUXLAB_DATABASE_URL", raising=False)
    monkeypatch.setenv("DEMUXLAB_HOME", str(fresh_home))
    assert database_url() == Cluster(fresh_home).url()
    assert not Cluster(fresh_home).is_initialized()  # asking for the URL starts nothing
    try:
        with session() as s:
            assert s.connection().exec_driver_sql("SELECT current_database()").scalar_one() == DATABASE
    finally:
        dispose_engines()
    assert Cluster(fresh_home).is_running()


def test_socket_path_too_long(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path / ("x" * 120))
    with pytest.raises(DatabaseError, match="longer than 107 bytes"):
        cluster.ensure_running()


def test_unreachable_database_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEMUXLAB_DATABASE_URL", "postgresql+psycopg://someone:s3cret@127.0.0.1:1/nowhere")
    with pytest.raises(DatabaseError) as info:
        get_engine()
    message = info.value.message
    assert "\n" not in message
    assert message.startswith(
        "cannot connect to database postgresql+psycopg://someone:***@127.0.0.1:1/nowhere: "
    )
    assert "s3cret" not in message


@pytest.mark.parametrize(
    ("url", "match"),
    [("mysql://u@h/db", "driver 'mysql' is not supported"), ("not a url", "not a SQLAlchemy URL")],
)
def test_bad_database_url(monkeypatch: pytest.MonkeyPatch, url: str, match: str) -> None:
    monkeypatch.setenv("DEMUXLAB_DATABASE_URL", url)
    with pytest.raises(ConfigError, match=match):
        get_engine()


def test_plain_postgresql_url_means_psycopg3(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEMUXLAB_DATABASE_URL", "postgresql://u:pw@db.example:5433/x")
    assert database_url() == "postgresql+psycopg://u:pw@db.example:5433/x"
