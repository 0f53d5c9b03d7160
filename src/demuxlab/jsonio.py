"""Files that appear whole or not at all, files read bounded, and JSON read with a one-line error.

The bottom layer: every part that writes a file another process may read at the same moment (run records,
progress, pair state, calibrations, caches) writes it here, through a temporary file in the same folder
and a rename. Nothing here imports another demuxlab module but :mod:`demuxlab.errors`.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from demuxlab.errors import ConfigError


def _umask() -> int:
    """The process's umask, read without changing it (Linux's /proc; else set and restored at once)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def open_atomic(
    path: Path, *, mode: int | None = None, owner: tuple[int, int] | None = None
) -> Iterator[IO[bytes]]:
    """A binary file that becomes ``path`` when the block ends without an exception, via a uniquely named
    temporary file beside it and a rename: a reader sees the old file or the new one, never half of one
    (also between threads of one process). On an exception the temporary file is removed and ``path`` is
    left as it was.

    The file gets ``mode``, else the mode ``open()`` would give a new file (0o666 less the umask), and
    ``owner`` (uid, gid) when given (a file written by root for another user)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            os.fchmod(fh.fileno(), (0o666 & ~_umask()) if mode is None else mode)
            if owner is not None:
                os.fchown(fh.fileno(), *owner)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_bytes_atomic(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`open_atomic`)."""
    with open_atomic(path, mode=mode) as fh:
        fh.write(data)


def write_text_atomic(path: Path, text: str, *, mode: int | None = None) -> None:
    write_bytes_atomic(path, text.encode(), mode=mode)


def write_text_if_changed(path: Path, text: str, *, mode: int | None = None) -> bool:
    """Write ``text`` atomically unless ``path`` already holds it (keeps mtimes, and so Snakemake, calm).
    Returns whether it wrote."""
    try:
        if Path(path).read_text() == text:
            return False
    except (OSError, UnicodeDecodeError):
        pass
    write_text_atomic(path, text, mode=mode)
    return True


def dumps(doc: Any, *, indent: int | None = 1, sort_keys: bool = False) -> str:
    """The project's JSON text: ``indent=1``, a trailing newline, keys in insertion order unless asked."""
    return json.dumps(doc, indent=indent, sort_keys=sort_keys) + "\n"


def write_json_atomic(path: Path, doc: Any, *, indent: int | None = 1, sort_keys: bool = False) -> None:
    """Write ``doc`` as JSON to ``path`` atomically (see :func:`write_bytes_atomic`)."""
    write_text_atomic(path, dumps(doc, indent=indent, sort_keys=sort_keys))


def read_json(path: Path, what: str) -> Any:
    """``path``'s JSON document; a missing or malformed file is a :class:`ConfigError` naming ``path`` and
    ``what`` it should have held."""
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: {what} not found") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: {what} is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: {what} is not valid JSON (line {exc.lineno}: {exc.msg})") from None


class FileRefused(Exception):
    """Why :func:`read_capped` did not read a file. ``reason``: the OS's (``strerror``), ``a directory`` or
    ``not a regular file`` (``regular`` is then false); ``too_big``: more than the cap, ``size`` the
    file's size when known before reading."""

    def __init__(self, reason: str, *, regular: bool = True, too_big: bool = False, size: int | None = None):
        super().__init__(reason)
        self.reason, self.regular, self.too_big, self.size = reason, regular, too_big, size


def read_capped(path: Path, cap: int) -> bytes:
    """The bytes of the regular file ``path`` (no FIFO, device or directory), at most ``cap`` of them:
    untrusted input is refused before it costs memory. Raises :class:`FileRefused`."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then says what it is.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as exc:
        raise FileRefused(exc.strerror or str(exc)) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            raise FileRefused(kind, regular=False)
        if info.st_size > cap:
            raise FileRefused(f"{info.st_size} bytes", too_big=True, size=info.st_size)
        with os.fdopen(os.dup(fd), "rb") as f:
            raw = f.read(cap + 1)
    except OSError as exc:
        raise FileRefused(exc.strerror or str(exc)) from None
    finally:
        os.close(fd)
    if len(raw) > cap:
        raise FileRefused(f"more than {cap} bytes", too_big=True)
    return raw
