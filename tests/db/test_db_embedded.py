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


# -- permissions (issue "Crash-safe sweeps and hostile input": a database only its owner can use) -----------


def _psql_as(os_user: str, cluster: Cluster, role: str) -> subprocess.CompletedProcess[str]:
    conninfo = f"host={cluster.socket_dir} port=54329 user={role} dbname=postgres connect_timeout=5"
    return subprocess.run(
        ["runuser", "-u", os_user, "--", str(pg_bin_dir() / "psql"), conninfo, "-Atc", "select current_user"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
        check=False,
    )


@pytest.fixture
def test_cluster(pg_server: object) -> Cluster:
    import os

    if os.environ.get("DEMUXLAB_TEST_DATABASE_URL") or os.geteuid() != 0:
        pytest.skip("needs the embedded test cluster and root (to act as another OS user)")
    return Cluster(Path(os.environ["DEMUXLAB_HOME"]))


@pytest.mark.postgres
def test_other_os_users_are_refused(test_cluster: Cluster) -> None:
    import stat

    cluster = test_cluster
    for path in (cluster.root, cluster.socket_dir):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700, path
    hba = [line for line in (cluster.data_dir / "pg_hba.conf").read_text().splitlines() if line.strip()]
    assert [line for line in hba if not line.startswith("#")] == ["local all all peer map=demuxlab"]

    # The owner (this OS user) gets the owner role, the readers' role and the superuser.
    for role in ("demuxlab", "demuxlab_ro", "postgres"):
        res = _psql_as("root", cluster, role)
        assert res.returncode == 0 and res.stdout.strip() == role, res.stderr
    # Another OS user: refused by the file system...
    for role in ("demuxlab", "demuxlab_ro", "postgres"):
        res = _psql_as("nobody", cluster, role)
        assert res.returncode != 0 and "Permission denied" in res.stderr, res.stderr
    # ...and by authentication, should the socket be reachable (a careless chmod).
    sock = cluster.socket_dir / ".s.PGSQL.54329"
    modes = {p: stat.S_IMODE(p.stat().st_mode) for p in (cluster.root, cluster.socket_dir, sock)}
    try:
        for path in modes:
            path.chmod(0o777)
        for role in ("demuxlab", "demuxlab_ro", "postgres"):
            res = _psql_as("nobody", cluster, role)
            assert res.returncode != 0 and "authentication failed" in res.stderr, res.stderr
    finally:
        for path, mode in modes.items():
            path.chmod(mode)


@pytest.mark.postgres
def test_owner_role_is_not_a_superuser_and_readers_only_read(test_cluster: Cluster) -> None:
    owner = test_cluster.url().replace("postgresql+psycopg://", "postgresql://")
    reader = test_cluster.url(role="demuxlab_ro").replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(owner, autocommit=True) as conn:
        assert conn.execute("SELECT current_user, current_setting('is_superuser')").fetchone() == (
            "demuxlab",
            "off",
        )
        conn.execute("CREATE TABLE IF NOT EXISTS perm_probe (x int)")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("CREATE ROLE perm_intruder")
    try:
        with psycopg.connect(reader, autocommit=True) as conn:
            assert conn.execute("SELECT count(*) FROM perm_probe").fetchone() == (0,)  # default privileges
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("INSERT INTO perm_probe VALUES (1)")
    finally:
        with psycopg.connect(owner, autocommit=True) as conn:
            conn.execute("DROP TABLE perm_probe")


@pytest.mark.postgres
@pytest.mark.slow
def test_cluster_of_an_older_version_is_secured_on_start(fresh_home: Path) -> None:
    cluster = Cluster(fresh_home, settings={"fsync": "off"})
    cluster.ensure_running()
    admin = cluster.admin_url("demuxlab").replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("CREATE TABLE old_runs (id serial PRIMARY KEY)")  # made by the superuser, as before
        conn.execute("ALTER DATABASE demuxlab OWNER TO postgres")
    cluster.stop()
    # What older versions left: trust for everyone, open folders and socket, no marker.
    (cluster.data_dir / "pg_hba.conf").write_text("local all all trust\nhost all all 127.0.0.1/32 trust\n")
    cluster.secured_marker.unlink()
    cluster.root.chmod(0o755)
    cluster.socket_dir.chmod(0o777)

    cluster.ensure_running()
    assert "trust" not in (cluster.data_dir / "pg_hba.conf").read_text()
    assert cluster.root.stat().st_mode & 0o077 == 0 and cluster.socket_dir.stat().st_mode & 0o077 == 0
    with psycopg.connect(admin, autocommit=True) as conn:
        owners = dict(conn.execute("SELECT tablename, tableowner FROM pg_tables WHERE schemaname = 'public'"))
        db_owner = conn.execute("SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = 'demuxlab'")
        assert owners == {"old_runs": "demuxlab"} and db_owner.fetchone() == ("demuxlab",)
    with psycopg.connect(cluster.url().replace("postgresql+psycopg://", "postgresql://")) as conn:
        conn.execute("INSERT INTO old_runs DEFAULT VALUES")  # the owner role may write, sequence included
