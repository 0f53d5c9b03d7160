"""Pair leases: at most one run on a host pair at a time, and a lease that dies with its holder.

A lease is an OS file lock (``flock``) on ``<lease dir>/<pair>.lock``, taken by the process that runs the
point (``demuxlab run-point``) before its server starts and held until its server and client are gone. The
kernel drops the lock when the last descriptor of it closes, so a holder that is killed (``kill -9``, a
dropped SSH session, a power loss) frees its pair without anyone unlocking anything; there is no stale
lock to remove by hand.

The server and client of a run inherit the lock's descriptor (``Lease.fd``; see ``pass_fds``): a run's
pair stays busy while any process of it is alive, even one that outlived its parent. Such a process is an
*orphan*, and :func:`acquire` can prove it is one: the lock is held, the holder named in the file (pid and
process start time, on this host) is dead, and the process holds the lock on the lease file itself
(``/proc/PID/fdinfo`` lists the locks of each descriptor). Proven orphans are killed; anything else makes
the caller wait and then fail with a message naming the holder.

The file's content is holder information for messages, orphan detection and ``demuxlab lease``
(pid, process start time, run id, host, start time, children); the lock, not the content, is the truth.

Used by both profiles: the local profile leases ``local``; the cluster profile picks any free pair among
several with :func:`try_acquire`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import signal
import socket
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from demuxlab.errors import ConfigError, LaunchError
from demuxlab.paths import state_dir

PAIR_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
POLL_S = 0.1
# How long a killed orphan may take to let go of the lock before we wait for it like any holder.
ORPHAN_EXIT_S = 5.0


class LeaseBusy(LaunchError):
    """The pair is held by a live run (or by processes that cannot be proven orphans)."""


def lease_dir() -> Path:
    """Where lease files live: ``$DEMUXLAB_LEASE_DIR`` or ``<state dir>/leases``."""
    env = os.environ.get("DEMUXLAB_LEASE_DIR")
    return Path(env).resolve() if env else state_dir() / "leases"


def lease_path(pair: str) -> Path:
    if not isinstance(pair, str) or not PAIR_RE.match(pair):
        raise ConfigError(f"host pair {str(pair)[:40]!r} is not a valid name ([A-Za-z0-9][A-Za-z0-9._-]*)")
    return lease_dir() / f"{pair}.lock"


def _proc_start(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat), None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    try:
        return int(stat[stat.rindex(")") + 2 :].split()[19])
    except (ValueError, IndexError):
        return None


def process_alive(pid: Any, start: Any) -> bool:
    """Whether ``pid`` is the very process that had start time ``start`` (pids are reused)."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    now = _proc_start(pid)
    return now is not None and (not isinstance(start, int) or now == start)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _open(path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


def _read_info(path: Path) -> dict[str, Any]:
    # The holder writes its info right after locking; a reader may catch it mid-write: retry briefly.
    for _ in range(5):
        try:
            text = path.read_text(errors="replace")
        except OSError:
            return {}
        if text.strip():
            try:
                doc = json.loads(text)
            except json.JSONDecodeError:
                time.sleep(0.01)
                continue
            return doc if isinstance(doc, dict) else {}
        time.sleep(0.01)
    return {}


@dataclass
class Lease:
    """A held pair lease; a context manager. ``fd`` is the locked descriptor (pass it to children)."""

    pair: str
    run_id: str
    path: Path
    fd: int
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def held(self) -> bool:
        return self.fd >= 0

    def add_child(self, pid: int, role: str) -> None:
        """Record a child process of the run (server, client) in the holder information."""
        if not self.held:
            return
        self.info.setdefault("children", []).append({"pid": pid, "start": _proc_start(pid), "role": role})
        self._write()

    def _write(self) -> None:
        _write_info(self.fd, self.info)

    def release(self) -> None:
        """Free the pair (idempotent). Children that inherited ``fd`` keep it busy until they exit."""
        if not self.held:
            return
        fd, self.fd = self.fd, -1
        # The content stays: it names the holder for as long as inherited descriptors keep the lock.
        os.close(fd)

    def __enter__(self) -> Lease:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.release()


def _write_info(fd: int, info: dict[str, Any]) -> None:
    """The holder information, in place of what the lock file held."""
    data = (json.dumps(info, sort_keys=True) + "\n").encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)


def _take(pair: str, run_id: str, path: Path, fd: int) -> Lease:
    info = {
        "pair": pair,
        "run_id": run_id,
        "pid": os.getpid(),
        "pid_start": _proc_start(os.getpid()),
        "host": socket.gethostname(),
        "since": _now(),
        "children": [],
    }
    lease = Lease(pair=pair, run_id=run_id, path=path, fd=fd, info=info)
    lease._write()
    return lease


def holder(pair: str) -> dict[str, Any] | None:
    """Who holds ``pair``: its holder information (``{}`` if not yet written), or None when it is free."""
    path = lease_path(pair)
    if not path.exists():
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            return _read_info(path)
        return None
    finally:
        os.close(fd)  # also drops the shared lock, if we got it


def _lock_holders(path: Path) -> list[int]:
    """Pids of processes holding the flock on ``path`` (a descriptor of it whose fdinfo lists a FLOCK)."""
    try:
        st = path.stat()
    except OSError:
        return []
    me = os.getpid()
    found: list[int] = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        fd_dir = f"/proc/{entry.name}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for name in fds:
            try:
                fst = os.stat(f"{fd_dir}/{name}")
                if (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino):
                    continue
                fdinfo = Path(f"/proc/{entry.name}/fdinfo/{name}").read_text()
            except OSError:
                continue
            if "FLOCK" in fdinfo:
                found.append(int(entry.name))
                break
    return found


def orphans(pair: str) -> list[int]:
    """Processes that keep ``pair`` busy although the run that started them is dead (provably orphans).

    Empty when the pair is free, when its holder is alive, when the holder ran on another host, or when
    the holder information is missing (then nothing can be proven).
    """
    info = holder(pair)
    if not info or info.get("host") != socket.gethostname():
        return []
    if process_alive(info.get("pid"), info.get("pid_start")):
        return []
    pids = set(_lock_holders(lease_path(pair)))
    for child in info.get("children") or []:
        if isinstance(child, dict) and process_alive(child.get("pid"), child.get("start")):
            pids.add(int(child["pid"]))
    pids.discard(os.getpid())
    return sorted(pids)


def end_orphans(pair: str) -> list[int]:
    """Kill the proven orphans of ``pair`` (SIGKILL) and wait briefly until they are gone."""
    pids = orphans(pair)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + ORPHAN_EXIT_S
    while pids and time.monotonic() < deadline and any(_proc_start(p) is not None for p in pids):
        time.sleep(0.02)
    return pids


def describe(pair: str, info: dict[str, Any] | None) -> str:
    if not info:
        return f"pair {pair!r} is held by a process that has not written its name yet"
    alive = process_alive(info.get("pid"), info.get("pid_start"))
    state = "" if alive else " (holder gone; its server or client still holds the pair)"
    return (
        f"pair {pair!r} is held by run {info.get('run_id')!r} (pid {info.get('pid')} on "
        f"{info.get('host')}, since {info.get('since')}){state}"
    )


def try_acquire(pair: str, run_id: str, *, reap: bool = True) -> Lease | None:
    """Take ``pair`` if it is free now (after ending proven orphans when ``reap``); None if it is busy."""
    path = lease_path(pair)
    fd = _open(path)
    try:
        if _try_lock(fd):
            return _take(pair, run_id, path, fd)
        if reap and end_orphans(pair) and _try_lock(fd):
            return _take(pair, run_id, path, fd)
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    return None


def acquire(pair: str, run_id: str, *, wait_s: float, reap: bool = True) -> Lease:
    """Take ``pair``, waiting up to ``wait_s`` seconds for its holder; :class:`LeaseBusy` names the holder."""
    path = lease_path(pair)
    fd = _open(path)
    deadline = time.monotonic() + max(0.0, wait_s)
    try:
        while True:
            if _try_lock(fd):
                return _take(pair, run_id, path, fd)
            if reap and end_orphans(pair) and _try_lock(fd):
                return _take(pair, run_id, path, fd)
            if time.monotonic() >= deadline:
                raise LeaseBusy(f"{describe(pair, holder(pair))}; waited {wait_s:g} s")
            time.sleep(POLL_S)
    except BaseException:
        os.close(fd)
        raise


CONTROLLER_LOCK = ".snakemake/demuxlab-controller.lock"


def hold_controller(directory: Path | str) -> Lease:
    """The workflow lock: one live Snakemake controller per working directory, held until it exits.

    Snakemake's own lock (``.snakemake/locks``) outlives a controller killed with ``kill -9`` and stops
    the rerun ("Directory cannot be locked"); this one is an flock that dies with its holder, so the
    command as typed resumes after any crash while a second *live* controller is refused.
    """
    directory = Path(directory).resolve()
    path = directory / CONTROLLER_LOCK
    fd = _open(path)
    try:
        take_controller(fd, directory, os.getpid())
    except BaseException:
        os.close(fd)
        raise
    return Lease(pair="controller", run_id="workflow", path=path, fd=fd, info=_read_info(path))


def take_controller(fd: int, directory: Path | str, pid: int) -> None:
    """The workflow lock on ``fd``, an open descriptor of ``<directory>/.snakemake/demuxlab-controller.lock``
    that process ``pid`` (the controller) holds: the flock belongs to the open file, so it stays held
    while the controller keeps the descriptor, and goes with it, after this process is gone
    (``demuxlab controller-lock``, the workflow's onstart). Refused in one line while a live controller
    holds it."""
    directory = Path(directory).resolve()
    path = directory / CONTROLLER_LOCK
    if not _try_lock(fd):
        info = _read_info(path)
        raise LeaseBusy(
            f"another workflow controller is running in {directory} (pid {info.get('pid')} on "
            f"{info.get('host')}, since {info.get('since')}): wait for it to finish or stop it; a controller "
            "that was killed holds nothing, so rerunning after a crash needs no --unlock"
        )
    info = {
        "pair": "controller",
        "run_id": "workflow",
        "pid": pid,
        "pid_start": _proc_start(pid),
        "host": socket.gethostname(),
        "since": _now(),
        "children": [],
    }
    _write_info(fd, info)  # not through a Lease: one would close ``fd`` when collected


__all__ = [
    "Lease",
    "LeaseBusy",
    "acquire",
    "describe",
    "end_orphans",
    "hold_controller",
    "holder",
    "lease_dir",
    "lease_path",
    "orphans",
    "process_alive",
    "take_controller",
    "try_acquire",
]
