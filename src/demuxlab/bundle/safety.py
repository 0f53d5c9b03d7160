"""What a bundle may contain and what an archive may do: pure checks, no I/O.

- :func:`check_member` judges one archive member (name, type, declared size) against :class:`Limits`: an
  untrusted bundle is data, so only regular files and folders under :data:`~layout.PREFIX` are accepted —
  no absolute paths, no ``..``, no links of any kind, no devices, bounded sizes and counts.
- :func:`scan_secrets` finds database passwords, private keys, tokens and inventory secrets in a file's
  bytes; ``bundle create`` refuses a bundle with any finding.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass

from demuxlab.bundle.layout import PREFIX


@dataclass(frozen=True)
class Limits:
    """Bounds on what reading an archive may cost (all sizes in bytes, after decompression)."""

    max_member: int = 4 << 30
    max_total: int = 16 << 30
    max_members: int = 200_000
    max_name: int = 1024

    @classmethod
    def scaled(cls, max_total: int) -> Limits:
        return cls(max_member=min(cls.max_member, max_total), max_total=max_total)


class UnsafeArchive(ValueError):
    """The archive breaks a rule of :func:`check_member` or :class:`Limits`."""


REGULAR, DIRECTORY = "file", "dir"


def check_member(name: str, kind: str, size: int, limits: Limits) -> str | None:
    """The member's path relative to the bundle root (None for the root folder itself), or raise.

    ``kind`` is ``file``, ``dir`` or what else the archive calls it (``symlink``, ``hardlink``, ``device``…).
    """
    if kind not in (REGULAR, DIRECTORY):
        raise UnsafeArchive(f"member {name!r}: a {kind}, only regular files and folders are allowed")
    if len(name) > limits.max_name or "\x00" in name or "\\" in name:
        raise UnsafeArchive(f"member {name[:80]!r}: name too long or with NUL/backslash")
    if name.startswith("/"):
        raise UnsafeArchive(f"member {name!r}: absolute path")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise UnsafeArchive(f"member {name!r}: path with '..'")
    if not parts or parts[0] != PREFIX:
        raise UnsafeArchive(f"member {name!r}: outside the bundle folder {PREFIX}/")
    if size < 0 or size > limits.max_member:
        raise UnsafeArchive(
            f"member {name!r}: declared size {size} bytes exceeds the limit {limits.max_member}"
        )
    rel = posixpath.join(*parts[1:]) if len(parts) > 1 else None
    if rel is None and kind == REGULAR:
        raise UnsafeArchive(f"member {name!r}: a file where the bundle folder should be")
    return rel


# -- secrets -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    kind: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.kind}"


_URL_KIND = "password in a URL"
# Patterns for any file (source included): unmistakable secrets.
_STRONG: tuple[tuple[str, re.Pattern[bytes]], ...] = (
    ("private key", re.compile(rb"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")),
    ("Ansible Vault secret", re.compile(rb"\$ANSIBLE_VAULT;\d")),
    ("GitHub token", re.compile(rb"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,})")),
    ("AWS access key", re.compile(rb"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("Slack token", re.compile(rb"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("JSON web token", re.compile(rb"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}")),
    # scheme://user:password@host — a password in a URL (database URLs above all).
    (
        "password in a URL",
        re.compile(rb"\b[a-z][a-z0-9+.-]{1,30}://[^\s:/@'\"<>]{1,64}:([^\s@/'\"<>]{1,128})@"),
    ),
)
# Patterns for data and configuration files (records, YAML, JSON, INI, inventories): key = value secrets.
_KEY_VALUE = re.compile(
    rb"(?i)[\"']?\b(ansible_(?:ssh_|become_|sudo_)?pass(?:word)?|[a-z_]*password|passwd|passphrase|secret(?:_key)?"
    rb"|api[_-]?key|access[_-]?key|auth[_-]?token|access[_-]?token|token|private[_-]?key)\b[\"']?"
    rb"[ \t]*[:=][ \t]*[\"']?([^\s\"'#,}\]]+)"
)
# Values that are obviously not secrets: placeholders, templates, masks, empties.
_PLACEHOLDERS = {
    b"pass",
    b"password",
    b"pw",
    b"pwd",
    b"secret",
    b"token",
    b"xxx",
    b"changeme",
    b"example",
    b"null",
    b"none",
    b"~",
    b"true",
    b"false",
    b"...",
    b"redacted",
}
_DATA_SUFFIXES = (
    ".json",
    ".yaml",
    ".yml",
    ".ini",
    ".cfg",
    ".conf",
    ".env",
    ".toml",
    ".properties",
    ".csv",
    ".txt",
)


def _is_placeholder(value: bytes) -> bool:
    v = value.strip().lower()
    return (
        v in _PLACEHOLDERS
        or v.startswith((b"{{", b"${", b"$(", b"<", b"*", b"%", b"{"))
        or set(v) <= set(b"*x.-_")
        or len(v) < 4
    )


def is_data_file(path: str) -> bool:
    name = path.rsplit("/", 1)[-1].lower()
    return name.endswith(_DATA_SUFFIXES) or name in ("hosts", "inventory") or name.startswith(".env")


def scan_secrets(
    path: str,
    data: bytes,
    *,
    key_values: bool | None = None,
    known: Iterable[bytes] = (),
    url_passwords: bool = True,
) -> list[Finding]:
    """Secrets in ``data`` (the file at ``path``), one :class:`Finding` per line and kind.

    ``key_values`` (default: for data and configuration files) also flags ``password: …``-style
    assignments; ``known`` are literal secrets of this machine (e.g. the database URL's password);
    ``url_passwords=False`` skips ``user:password@`` in URLs (the project's own tests and docs hold examples).
    """
    if key_values is None:
        key_values = is_data_file(path)
    found: dict[tuple[int, str], Finding] = {}

    def add(offset: int, kind: str) -> None:
        line = data.count(b"\n", 0, offset) + 1
        found.setdefault((line, kind), Finding(path, line, kind))

    for kind, pattern in _STRONG:
        if kind == _URL_KIND and not url_passwords:
            continue
        for m in pattern.finditer(data):
            if m.groups() and _is_placeholder(m.group(1)):
                continue
            add(m.start(), kind)
    if key_values:
        for m in _KEY_VALUE.finditer(data):
            if not _is_placeholder(m.group(2)):
                add(m.start(), f"secret-looking value of {m.group(1).decode(errors='replace')!r}")
    for secret in known:
        if len(secret) >= 4:
            start = data.find(secret)
            while start >= 0:
                add(start, "a password of this machine's database URL")
                start = data.find(secret, start + 1)
    return [found[k] for k in sorted(found)]
