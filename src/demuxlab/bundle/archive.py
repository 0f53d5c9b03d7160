"""The archive itself: a deterministic writer and a reader that treats the archive as hostile.

Writer: members sorted by path, each with the fixed time :data:`~layout.MTIME`, owner 0/0 without names,
mode 0644 (0755 for executables), PAX format; gzip without a name or time in its header, or zstd at a fixed
level, single-threaded. The same files give the same bytes.

Reader: streams the archive once (gzip, zstd or plain tar, told by its first bytes), checks each member
with :func:`~safety.check_member` before reading it, counts the decompressed bytes against
:class:`~safety.Limits`, and writes files itself (``O_EXCL | O_NOFOLLOW``) into a fresh folder — never
``tarfile.extractall``, never a link, never outside that folder.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import os
import tarfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from demuxlab.bundle.layout import MTIME, PREFIX
from demuxlab.bundle.safety import DIRECTORY, REGULAR, Limits, UnsafeArchive, check_member
from demuxlab.errors import DemuxlabError
from demuxlab.jsonio import open_atomic

ZSTD_LEVEL = 10
GZIP_LEVEL = 6
_CHUNK = 1 << 20


class BundleError(DemuxlabError):
    """A bundle cannot be made, read, verified or used (one line naming the file and the problem)."""

    exit_code = 1


@dataclass(frozen=True)
class Entry:
    """A file to archive: its bytes, or a path on disk to stream from; executable or not."""

    data: bytes | None = None
    source: Path | None = None
    executable: bool = False

    def size(self) -> int:
        if self.data is not None:
            return len(self.data)
        assert self.source is not None
        return self.source.stat().st_size

    def open(self) -> IO[bytes]:
        if self.data is not None:
            return io.BytesIO(self.data)
        assert self.source is not None
        return self.source.open("rb")


def compression_of(path: Path) -> str:
    name = path.name
    if name.endswith((".tar.zst", ".tzst")):
        return "zst"
    if name.endswith((".tar.gz", ".tgz")):
        return "gz"
    raise BundleError(f"{path}: the bundle's name must end in .tar.zst or .tar.gz")


@contextlib.contextmanager
def _compressor(raw: IO[bytes], kind: str) -> Iterator[IO[bytes]]:
    if kind == "gz":
        # filename='' and mtime=0: nothing of this moment or this file's name in the gzip header.
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=GZIP_LEVEL, mtime=0) as gz:
            yield gz  # type: ignore[misc]
    else:
        import zstandard

        cctx = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=True, threads=0)
        with cctx.stream_writer(raw, closefd=False) as zw:
            yield zw


def write_archive(out: Path, entries: Mapping[str, Entry]) -> None:
    """Write ``entries`` (path relative to the bundle root → entry) to ``out`` atomically."""
    kind = compression_of(out)
    with (
        open_atomic(out) as raw,
        _compressor(raw, kind) as stream,
        tarfile.open(fileobj=stream, mode="w|", format=tarfile.PAX_FORMAT) as tar,
    ):
        for rel in sorted(entries):
            entry = entries[rel]
            info = tarfile.TarInfo(f"{PREFIX}/{rel}")
            info.size = entry.size()
            info.mtime = MTIME
            info.mode = 0o755 if entry.executable else 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            with entry.open() as f:
                tar.addfile(info, f)


class _Counting(io.RawIOBase):
    """A read-only stream that fails once more than ``limit`` bytes came out of it (decompression bombs)."""

    def __init__(self, inner: Any, limit: int, name: str) -> None:
        self.inner, self.limit, self.name, self.count = inner, limit, name, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.inner.read(len(buffer))
        n = len(data)
        self.count += n
        if self.count > self.limit:
            raise UnsafeArchive(
                f"decompresses to more than {self.limit} bytes (the size limit; a decompression bomb?)"
            )
        buffer[:n] = data
        return n


def _decompressed(raw: IO[bytes], path: Path) -> Any:
    head = raw.read(4)
    raw.seek(0)
    if head[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if head == b"\x28\xb5\x2f\xfd":
        import zstandard

        return zstandard.ZstdDecompressor(max_window_size=1 << 27).stream_reader(raw, read_across_frames=True)
    return raw  # a plain tar (or garbage tarfile will refuse)


def _kind(member: tarfile.TarInfo) -> str:
    if member.isreg():
        return REGULAR
    if member.isdir():
        return DIRECTORY
    if member.issym():
        return f"symbolic link (to {member.linkname!r})"
    if member.islnk():
        return f"hard link (to {member.linkname!r})"
    if member.ischr() or member.isblk():
        return "device"
    if member.isfifo():
        return "FIFO"
    return "special member"


def extract(path: Path, dest: Path, limits: Limits | None = None) -> dict[str, str]:
    """Extract the bundle at ``path`` into the new folder ``dest`` safely; path → SHA-256 of every file.

    Any unsafe member (absolute, ``..``, link, device, over a size limit, duplicated) stops the extraction
    with :class:`BundleError` naming the bundle and the member; ``dest`` is then left for the caller to
    remove.
    """
    limits = limits or Limits()
    digests: dict[str, str] = {}
    declared = 0
    members = 0
    dest.mkdir(parents=True, exist_ok=False)
    try:
        with path.open("rb") as raw:
            counting = _Counting(_decompressed(raw, path), limits.max_total + (64 << 20), str(path))
            stream = io.BufferedReader(counting, _CHUNK)
            with tarfile.open(fileobj=stream, mode="r|") as tar:
                for member in tar:
                    members += 1
                    if members > limits.max_members:
                        raise UnsafeArchive(f"more than {limits.max_members} members")
                    rel = check_member(member.name, _kind(member), member.size, limits)
                    declared += member.size
                    if declared > limits.max_total:
                        raise UnsafeArchive(
                            f"member {member.name!r}: total size exceeds {limits.max_total} bytes"
                        )
                    if rel is None or member.isdir():
                        continue
                    if rel in digests:
                        raise UnsafeArchive(f"member {member.name!r}: appears twice")
                    digests[rel] = _write_member(tar, member, dest, rel)
    except FileNotFoundError:
        raise BundleError(f"{path}: no such bundle") from None
    except UnsafeArchive as exc:
        raise BundleError(f"{path}: unsafe archive: {exc}") from None
    except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise BundleError(f"{path}: not a readable bundle archive: {detail}") from None
    except Exception as exc:  # zstandard.ZstdError and friends: still one line, never a traceback
        if type(exc).__module__.startswith("zstandard"):
            raise BundleError(f"{path}: not a readable bundle archive: {exc}") from None
        raise
    if not digests:
        raise BundleError(f"{path}: the archive holds no files under {PREFIX}/")
    return digests


def _write_member(tar: tarfile.TarFile, member: tarfile.TarInfo, dest: Path, rel: str) -> str:
    target = dest / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    mode = 0o755 if member.mode & 0o111 else 0o644
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    digest = hashlib.sha256()
    src = tar.extractfile(member)
    assert src is not None
    written = 0
    with os.fdopen(fd, "wb") as out:
        while chunk := src.read(_CHUNK):
            written += len(chunk)
            digest.update(chunk)
            out.write(chunk)
    if written != member.size:
        raise UnsafeArchive(f"member {member.name!r}: truncated ({written} of {member.size} bytes)")
    os.chmod(target, mode)
    return digest.hexdigest()
