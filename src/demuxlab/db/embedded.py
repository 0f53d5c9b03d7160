"""A private PostgreSQL cluster under the state folder, used when ``DEMUXLAB_DATABASE_URL`` is not set.

Layout under ``<state>/pg`` (mode 0700): ``data/`` (the cluster), ``run/`` (mode 0700, the Unix socket
``.s.PGSQL.<PORT>``, itself 0700), ``postgresql.log``, and ``lock`` (serialises init/start/stop between
processes, since Snakemake starts jobs in parallel). The server listens on the socket only and runs as the
``postgres`` OS user when we are root (``initdb`` refuses root).

Only the OS user who owns the setup gets in: the socket is reachable by that user (and the server's) only,
and ``pg_hba.conf`` allows nothing but ``peer`` authentication through the ``pg_ident.conf`` map
``demuxlab``, which maps that OS user to the roles ``demuxlab`` (owner of the database: migrations and
ingest; not a superuser), ``demuxlab_ro`` (readers, e.g. the dashboard) and ``postgres`` (the superuser,
for administration and tests). Any other OS user is refused twice: by the file system, and by the map.
A cluster made by an older version (``trust`` for everyone, the superuser in the URL) is converted in
place on its next start (``ensure_running``; marked by ``<state>/pg/secured``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from demuxlab import paths
from demuxlab.errors import DatabaseError
from demuxlab.jsonio import open_atomic

PORT = 54329  # fixed: it only names the socket file, no TCP port is opened
DATABASE = "demuxlab"
SUPERUSER = "postgres"
OWNER_ROLE = "demuxlab"  # owns the database and its tables; migrations and ingest; not a superuser
READ_ONLY_ROLE = "demuxlab_ro"  # SELECT only (migrations/versions/0001); the dashboard
OS_USER = "postgres"
IDENT_MAP = "demuxlab"
# Written to <pg>/secured once the cluster has the settings above; a cluster without it is converted.
SECURED_VERSION = "peer-1"
# sockaddr_un.sun_path is 108 bytes including the terminating NUL.
_MAX_SOCKET_PATH = 107
_START_TIMEOUT_S = 60


def pg_bin_dir() -> Path:
    """The PostgreSQL binaries: ``$DEMUXLAB_PG_BIN``, the newest ``/usr/lib/postgresql/*/bin``, or PATH."""
    env = os.environ.get("DEMUXLAB_PG_BIN")
    if env:
        return Path(env)
    candidates = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    if candidates:
        return candidates[-1].parent
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    raise DatabaseError(
        "PostgreSQL binaries not found (no initdb in /usr/lib/postgresql/*/bin or PATH); "
        "install PostgreSQL, set DEMUXLAB_PG_BIN, or set DEMUXLAB_DATABASE_URL"
    )


@dataclass(frozen=True)
class StartResult:
    initialized: bool  # this call ran initdb
    started: bool  # this call started the server
    created_database: bool  # this call created the ``demuxlab`` database


@dataclass
class Cluster:
    """The embedded cluster of one state folder."""

    home: Path
    # Extra server settings (e.g. ``fsync=off`` for throw-away test clusters), written at init time.
    settings: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def default(cls) -> Cluster:
        return cls(paths.state_dir())

    @property
    def root(self) -> Path:
        return self.home / "pg"

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def socket_dir(self) -> Path:
        return self.root / "run"

    @property
    def log_file(self) -> Path:
        return self.root / "postgresql.log"

    @property
    def lock_file(self) -> Path:
        return self.root / "lock"

    @property
    def secured_marker(self) -> Path:
        return self.root / "secured"

    def url(self, database: str = DATABASE, role: str = OWNER_ROLE) -> str:
        """The SQLAlchemy URL as ``role`` (default: the owner role; ``demuxlab_ro`` for readers)."""
        host = quote(str(self.socket_dir), safe="/")
        return f"postgresql+psycopg://{role}@/{quote(database, safe='')}?host={host}&port={PORT}"

    def admin_url(self, database: str = "postgres") -> str:
        """The superuser's URL (administration, tests); the same OS user only."""
        return self.url(database, role=SUPERUSER)

    def is_initialized(self) -> bool:
        return (self.data_dir / "PG_VERSION").is_file()

    def is_running(self) -> bool:
        if not self.is_initialized():
            return False
        proc = self._pg(["pg_ctl", "status", "-D", str(self.data_dir)], check=False)
        return proc.returncode == 0

    def ensure_running(self) -> StartResult:
        """Create (once), start (if stopped) and create the ``demuxlab`` database (if missing)."""
        self._check_paths()
        with self._locked():
            initialized = False
            if not self.is_initialized():
                self._initdb()
                initialized = True
            secured = self._read_marker() == SECURED_VERSION
            if not secured:
                self._write_auth_files(self.data_dir)
            started = False
            if not self.is_running():
                self._start()
                started = True
            elif not secured:
                self._pg(["pg_ctl", "reload", "-D", str(self.data_dir)])
            created = self._create_database(convert=not secured)
            if not secured:
                self.secured_marker.write_text(SECURED_VERSION + "\n")
        return StartResult(initialized, started, created)

    def stop(self) -> bool:
        """Stop the server; returns whether it was running."""
        if not self.is_initialized():
            return False
        with self._locked():
            if not self.is_running():
                return False
            self._pg(["pg_ctl", "stop", "-D", str(self.data_dir), "-m", "fast", "-w"])
        return True

    # -- helpers -----------------------------------------------------------------------------------------

    def _as_root(self) -> bool:
        return os.geteuid() == 0

    def _read_marker(self) -> str | None:
        try:
            return self.secured_marker.read_text().strip()
        except OSError:
            return None

    @staticmethod
    def owner_os_user() -> str:
        """The OS user who owns this setup (the one running demuxlab now)."""
        try:
            return pwd.getpwuid(os.geteuid()).pw_name
        except KeyError:
            raise DatabaseError(f"the current user (uid {os.geteuid()}) has no name in /etc/passwd") from None

    def _write_auth_files(self, data_dir: Path) -> None:
        """pg_hba.conf (peer through the map, nothing else), pg_ident.conf, and owner-only socket files."""
        me = self.owner_os_user()
        server_user = OS_USER if self._as_root() else me
        hba = (
            "# demuxlab: the Unix socket only, peer authentication through the map below; nothing else.\n"
            f"local all all peer map={IDENT_MAP}\n"
        )
        ident = "# MAPNAME  SYSTEM-USERNAME  PG-USERNAME\n" + "".join(
            f"{IDENT_MAP} {me} {role}\n" for role in (OWNER_ROLE, READ_ONLY_ROLE, SUPERUSER)
        )
        if server_user != me:
            ident += f"{IDENT_MAP} {server_user} {SUPERUSER}\n"
        conf = data_dir / "postgresql.conf"
        text = conf.read_text(encoding="utf-8")
        if "unix_socket_permissions" not in text.split("# demuxlab embedded cluster", 1)[-1]:
            text += "unix_socket_permissions = 0700\n"
        for name, content in (("pg_hba.conf", hba), ("pg_ident.conf", ident), ("postgresql.conf", text)):
            owner = self._owner() if self._as_root() else None
            with open_atomic(data_dir / name, mode=0o600, owner=owner and (owner.pw_uid, owner.pw_gid)) as f:
                f.write(content.encode("utf-8"))

    def _owner(self) -> pwd.struct_passwd:
        try:
            return pwd.getpwnam(OS_USER)
        except KeyError:
            raise DatabaseError(
                f"running as root but there is no '{OS_USER}' OS user to run PostgreSQL as; "
                "create it or set DEMUXLAB_DATABASE_URL"
            ) from None

    def _check_paths(self) -> None:
        sock = self.socket_dir / f".s.PGSQL.{PORT}"
        if len(str(sock)) > _MAX_SOCKET_PATH:
            raise DatabaseError(
                f"socket path {sock} is longer than {_MAX_SOCKET_PATH} bytes; "
                "set DEMUXLAB_HOME to a shorter path"
            )
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.socket_dir.mkdir(exist_ok=True, mode=0o700)
        # Owner only (older versions left them world-readable, the socket world-writable).
        os.chmod(self.root, 0o700)
        os.chmod(self.socket_dir, 0o700)
        if not self._as_root():
            return
        owner = self._owner()
        # The server (as postgres) must reach the data dir, socket dir and log through every parent.
        for parent in reversed(self.root.parents):
            st = parent.stat()
            if st.st_mode & 0o001 or (st.st_uid == owner.pw_uid and st.st_mode & 0o100):
                continue
            if parent == self.home or self.home in parent.parents:
                os.chmod(parent, st.st_mode | 0o011)
                continue
            raise DatabaseError(
                f"directory {parent} is not traversable by OS user '{OS_USER}' (needed for the embedded "
                "PostgreSQL under it); run 'chmod o+x' on it or set DEMUXLAB_HOME elsewhere"
            )
        for path in (self.root, self.socket_dir):
            os.chown(path, owner.pw_uid, owner.pw_gid)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def _pg(self, argv: Sequence[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run a PostgreSQL tool, as the postgres OS user when we are root."""
        cmd = [str(pg_bin_dir() / argv[0]), *argv[1:]]
        if self._as_root():
            self._owner()
            cmd = ["runuser", "-u", OS_USER, "--", *cmd]
        try:
            # cwd: pg_ctl fails if it cannot read its current directory (e.g. root's home).
            proc = subprocess.run(
                cmd,
                cwd=self.root,
                capture_output=True,
                text=True,
                timeout=_START_TIMEOUT_S + 30,
                check=False,
                env={**os.environ, "LC_ALL": "C"},
            )
        except FileNotFoundError as exc:
            raise DatabaseError(f"cannot run {cmd[0]}: {exc.strerror}") from None
        except subprocess.TimeoutExpired:
            raise DatabaseError(f"{argv[0]} did not finish within {_START_TIMEOUT_S + 30} s") from None
        if check and proc.returncode != 0:
            detail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
            last = detail[-1] if detail else f"exit status {proc.returncode}"
            hint = f" (see {self.log_file})" if argv[0] == "pg_ctl" else ""
            raise DatabaseError(f"{argv[0]} failed for {self.data_dir}: {last}{hint}")
        return proc

    def _initdb(self) -> None:
        # initdb into a scratch folder and rename: a crash mid-init never leaves a half cluster at data/.
        scratch = self.root / "data.init"
        if scratch.exists():
            shutil.rmtree(scratch)
        self._pg(
            [
                "initdb",
                "-D",
                str(scratch),
                "--auth-local=peer",
                "--auth-host=reject",
                "-U",
                SUPERUSER,
                "--encoding=UTF8",
                "--locale=C",
                "--no-instructions",
            ]
        )
        settings = {
            "listen_addresses": "''",
            "port": str(PORT),
            "unix_socket_directories": f"'{self.socket_dir}'",
            "max_connections": "200",
            **self.settings,
        }
        with open(scratch / "postgresql.conf", "a", encoding="utf-8") as conf:
            conf.write("\n# demuxlab embedded cluster\n")
            conf.writelines(f"{key} = {value}\n" for key, value in settings.items())
        self._write_auth_files(scratch)
        scratch.rename(self.data_dir)

    def _start(self) -> None:
        self._pg(
            [
                "pg_ctl",
                "start",
                "-w",
                "-t",
                str(_START_TIMEOUT_S),
                "-D",
                str(self.data_dir),
                "-l",
                str(self.log_file),
            ]
        )

    def _create_database(self, convert: bool = False) -> bool:
        """Roles and the database (owned by the owner role); ``convert``: hand an old cluster's tables
        (created by the superuser) to the owner role, and grant readers what migrations grant."""
        import psycopg

        def conninfo(database: str) -> str:
            return f"host={self.socket_dir} port={PORT} user={SUPERUSER} dbname={database}"

        try:
            with psycopg.connect(conninfo("postgres"), autocommit=True, connect_timeout=10) as conn:
                for role in (OWNER_ROLE, READ_ONLY_ROLE):
                    if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone() is None:
                        conn.execute(f'CREATE ROLE "{role}" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE')
                row = conn.execute(
                    "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = %s", (DATABASE,)
                ).fetchone()
                created = row is None
                if row is None:
                    conn.execute(f'CREATE DATABASE "{DATABASE}" OWNER "{OWNER_ROLE}"')
                elif row[0] != OWNER_ROLE:
                    conn.execute(f'ALTER DATABASE "{DATABASE}" OWNER TO "{OWNER_ROLE}"')
            if created or convert:
                with psycopg.connect(conninfo(DATABASE), autocommit=True, connect_timeout=10) as conn:
                    self._hand_over(conn)
            return created
        except psycopg.Error as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise DatabaseError(f"embedded PostgreSQL at {self.socket_dir}: {first}") from None

    @staticmethod
    def _hand_over(conn: object) -> None:
        """In the ``demuxlab`` database: everything of schema public belongs to the owner role, readers
        may read what it creates later."""
        execute = conn.execute  # type: ignore[attr-defined]
        rows = execute(
            """
            SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
              AND pg_get_userbyid(c.relowner) <> %s
            """,
            (OWNER_ROLE,),
        ).fetchall()
        kinds = {"r": "TABLE", "p": "TABLE", "v": "VIEW", "m": "MATERIALIZED VIEW", "S": "SEQUENCE"}
        for name, kind in rows:
            if kind == "S":  # a sequence owned by a column moves with its table
                owned = execute(
                    "SELECT 1 FROM pg_depend d JOIN pg_class c ON c.oid = d.objid "
                    "WHERE c.relname = %s AND d.deptype IN ('a', 'i')",
                    (name,),
                ).fetchone()
                if owned:
                    continue
            execute(f'ALTER {kinds[kind]} public."{name}" OWNER TO "{OWNER_ROLE}"')
        execute(
            f'ALTER DEFAULT PRIVILEGES FOR ROLE "{OWNER_ROLE}" IN SCHEMA public '
            f'GRANT SELECT ON TABLES TO "{READ_ONLY_ROLE}"'
        )
        execute(f'GRANT CONNECT ON DATABASE "{DATABASE}" TO "{READ_ONLY_ROLE}"')
        execute(f'GRANT USAGE ON SCHEMA public TO "{READ_ONLY_ROLE}"')
        execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{READ_ONLY_ROLE}"')
