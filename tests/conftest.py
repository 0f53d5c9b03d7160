"""Root fixtures shared by every test package.

PostgreSQL: ``pg_server`` (session) is an isolated server, ``DEMUXLAB_TEST_DATABASE_URL`` if set (its user
needs CREATEDB and CREATEROLE), else an embedded cluster in a temporary ``DEMUXLAB_HOME`` that is stopped
and removed at session end. A template database at schema head is made once, so ``database_url`` (a fresh
database per test, also exported as ``DEMUXLAB_DATABASE_URL``) is a cheap file copy, not a migration.

Parallel runs (pytest-xdist; ``make test`` runs ``pytest -n auto``, ``--dist loadgroup`` is the default):
every worker is a session of its own, with its own PostgreSQL, temporary folders and ``DEMUXLAB_HOME``.
Tests that share what one worker cannot share with another run on one worker, in one ``xdist_group``
(``pytest_collection_modifyitems`` below gives the groups; an explicit ``xdist_group`` mark wins):

- ``testbed``: marked ``cluster`` or ``slurm``, or using the ``testbed``/``slurm_bed`` fixtures (Docker
  containers named ``demuxlab-tb-…``, one test cluster per session);
- ``docker``: marked ``docker`` (the project's images and their ``:latest`` tags, fixed run ids);
- ``module:<path>``: a test using a module- or class-scoped fixture runs with the rest of its module, so
  the fixture is made once.

``TEST_WORKERS`` (or ``PYTEST_XDIST_AUTO_NUM_WORKERS``) sets what ``-n auto`` means; by default the CPU
count, at least 2 and at most 8 (see ``pytest_xdist_auto_num_workers``).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# Group names of pytest-xdist's loadgroup scheduling (see the module docstring).
TESTBED_GROUP = "testbed"
DOCKER_GROUP = "docker"
WIDE_SCOPES = ("module", "class", "package")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: ``TEST_WORKERS`` if set, else the CPU count clamped to [2, 8]. Most of the suite waits
    on subprocesses (servers, Snakemake, Ansible, Docker), so even 2 CPUs keep 2 workers busy."""
    for var in ("TEST_WORKERS", "PYTEST_XDIST_AUTO_NUM_WORKERS"):
        value = os.environ.get(var, "").strip()
        if value:
            try:
                return max(1, int(value))
            except ValueError:
                raise pytest.UsageError(f"{var}: not a number of workers: {value!r}") from None
    return min(8, max(2, len(os.sched_getaffinity(0))))


def xdist_group_of(item: pytest.Item) -> str | None:
    """The xdist group ``item`` must run in (None: any worker); see the module docstring."""
    if item.get_closest_marker("xdist_group") is not None:
        return None  # its own mark says
    names = set(getattr(item, "fixturenames", ()))
    if (
        item.get_closest_marker("cluster")
        or item.get_closest_marker("slurm")
        or names & {"testbed", "slurm_bed"}
    ):
        return TESTBED_GROUP
    if item.get_closest_marker("docker"):
        return DOCKER_GROUP
    info = getattr(item, "_fixtureinfo", None)
    for defs in info.name2fixturedefs.values() if info is not None else ():
        if defs and defs[-1].scope in WIDE_SCOPES:
            return f"module:{item.nodeid.split('::', 1)[0]}"
    return None


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        group = xdist_group_of(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


# xdist 3.8's loadgroup passes a test's group to the controller by appending it to the test's id, which
# pytest 9.2's structured ids no longer take (pytest-xdist#1386: every test is scheduled on its own). So the
# groups travel through a file instead: each worker writes {test id: group} once it has collected
# (GROUPS_ENV names the folder, made by the controller), and the controller's scheduler reads it.
GROUPS_ENV = "DEMUXLAB_TEST_GROUPS_DIR"


def pytest_configure(config: pytest.Config) -> None:
    controller = not hasattr(config, "workerinput") and bool(config.getoption("tx", None))  # of -n N
    if controller and config.getoption("dist", "no") == "loadgroup":
        folder = tempfile.mkdtemp(prefix="dlx-groups-")
        os.environ[GROUPS_ENV] = folder  # the workers inherit it
        config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))


# tryfirst: the file is written before xdist's own hook sends the collection to the controller, which may
# then schedule at once (the items' marks and ids are final: every collection_modifyitems has run).
@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    # An xdist worker only: a plain pytest that a test starts inherits the worker's environment.
    workerinput = getattr(session.config, "workerinput", None)
    folder = os.environ.get(GROUPS_ENV)
    if not folder or workerinput is None:
        return
    worker = workerinput["workerid"]
    groups = {}
    for item in session.items:
        names = sorted(
            {
                str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                for m in item.iter_markers("xdist_group")
            }
        )
        if names:
            groups[item.nodeid] = "_".join(names)
    tmp = Path(folder) / f".{worker}.json"
    tmp.write_text(json.dumps(groups))
    tmp.rename(Path(folder) / f"{worker}.json")


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup``: xdist's scope scheduling (a group's tests on one worker, the larger groups
    first), with the groups the workers wrote (see GROUPS_ENV)."""
    folder = os.environ.get(GROUPS_ENV)
    if config.getoption("dist") != "loadgroup" or not folder:
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FileGroupScheduling(LoadScopeScheduling):
        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:
                files = sorted(Path(folder).glob("gw*.json"))
                assert files, f"no worker wrote its test groups into {folder}"
                self.groups = {k: v for f in files for k, v in json.loads(f.read_text()).items()}
            return self.groups.get(nodeid, nodeid)

    return FileGroupScheduling(config, log)


@pytest.fixture(scope="session", autouse=True)
def _worker_home() -> Iterator[None]:
    """A ``DEMUXLAB_HOME`` of this session's (each xdist worker's) own: the leases, caches and state of one
    worker never meet another's, nor the checkout's ``.demuxlab`` (a developer's database); ``pg_server``
    sets its own while it lives."""
    patch = pytest.MonkeyPatch()
    home = Path(tempfile.mkdtemp(prefix="dlx-home-"))  # short: PostgreSQL's socket path must fit
    home.chmod(0o755)
    patch.setenv("DEMUXLAB_HOME", str(home))
    try:
        yield
    finally:
        patch.undo()
        shutil.rmtree(home, ignore_errors=True)


@dataclass(frozen=True)
class PgServer:
    admin_url: str  # SQLAlchemy URL of a database we may connect to for CREATE/DROP DATABASE
    template: str  # a database at schema head, copied by ``database_url``

    def url_for(self, database: str) -> str:
        from sqlalchemy import make_url

        return make_url(self.admin_url).set(database=database).render_as_string(hide_password=False)

    def conninfo(self) -> str:
        from sqlalchemy import make_url

        return make_url(self.admin_url).set(drivername="postgresql").render_as_string(hide_password=False)

    def create_database(self, name: str, template: str | None = None) -> str:
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.conninfo(), autocommit=True) as conn:
            stmt = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
            if template is not None:
                stmt = sql.SQL("{} TEMPLATE {}").format(stmt, sql.Identifier(template))
            conn.execute(stmt)
        return self.url_for(name)

    def drop_database(self, name: str) -> None:
        import psycopg
        from psycopg import sql

        from demuxlab.db.engine import dispose_engines

        dispose_engines()
        with psycopg.connect(self.conninfo(), autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    from sqlalchemy import create_engine

    from demuxlab.db import migrations
    from demuxlab.db.embedded import Cluster, pg_bin_dir
    from demuxlab.errors import DatabaseError

    patch = pytest.MonkeyPatch()
    cluster: Cluster | None = None
    home: Path | None = None
    external = os.environ.get("DEMUXLAB_TEST_DATABASE_URL", "").strip()
    server: PgServer | None = None
    try:
        if external:
            admin_url = external
        else:
            try:
                pg_bin_dir()
            except DatabaseError as exc:
                pytest.skip(f"no PostgreSQL for tests: {exc.message}")
            # Short path under /tmp: the socket path must fit in 107 bytes, and postgres must traverse it.
            home = Path(tempfile.mkdtemp(prefix="dlx-pg-"))
            home.chmod(0o755)
            patch.setenv("DEMUXLAB_HOME", str(home))
            # Throw-away data: durability settings off make CREATE DATABASE and ingest much faster.
            cluster = Cluster(
                home, settings={"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}
            )
            cluster.ensure_running()
            admin_url = cluster.admin_url("postgres")
        server = PgServer(admin_url=admin_url, template=f"demuxlab_template_{uuid.uuid4().hex[:8]}")
        server.create_database(server.template)
        engine = create_engine(server.url_for(server.template))
        try:
            migrations.upgrade("head", engine)
        finally:
            engine.dispose()
        yield server
    finally:
        if server is not None:
            server.drop_database(server.template)
        if cluster is not None:
            cluster.stop()
        if home is not None:
            shutil.rmtree(home, ignore_errors=True)
        patch.undo()


def _fresh_database(
    pg_server: PgServer, monkeypatch: pytest.MonkeyPatch, template: str | None
) -> Iterator[str]:
    name = f"test_{uuid.uuid4().hex[:12]}"
    url = pg_server.create_database(name, template)
    monkeypatch.setenv("DEMUXLAB_DATABASE_URL", url)
    try:
        yield url
    finally:
        pg_server.drop_database(name)


@pytest.fixture
def database_url(pg_server: PgServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh database at schema head, dropped afterwards; also set as ``DEMUXLAB_DATABASE_URL``."""
    yield from _fresh_database(pg_server, monkeypatch, pg_server.template)


@pytest.fixture
def empty_database_url(pg_server: PgServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh database without any schema (for migration tests); also set as ``DEMUXLAB_DATABASE_URL``."""
    yield from _fresh_database(pg_server, monkeypatch, None)
