"""The pattern × notifier pairs the server binary implements (CONTRACTS.md §1, ``demux-server --list``).

The binary is the single source of truth: specs are checked against what it reports, never against a
table kept here, so a pair the server drops (or a kernel without io_uring) shows up as a spec error.
"""

from __future__ import annotations

import functools
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from demuxlab.errors import ConfigError, LaunchError
from demuxlab.paths import bin_dir

# --list only prints a table; anything slower than this is a hung binary, not a slow one.
_LIST_TIMEOUT_S = 10.0


@dataclass(frozen=True, order=True)
class Pair:
    """One valid (pattern, notifier) combination and the thread counts it accepts (inclusive)."""

    pattern: str
    notifier: str
    min_threads: int
    max_threads: int

    @property
    def key(self) -> tuple[str, str]:
        return (self.pattern, self.notifier)

    def to_json(self) -> dict[str, Any]:
        return {
            "pattern": self.pattern,
            "notifier": self.notifier,
            "min_threads": self.min_threads,
            "max_threads": self.max_threads,
        }


def _require_int(obj: dict[str, Any], field: str, where: str, source: str) -> int:
    value = obj.get(field)
    # bool is an int subclass; a JSON true is not a thread count.
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{source}: {where}.{field}: expected an integer >= 1, got {value!r}")
    return value


def _require_str(obj: dict[str, Any], field: str, where: str, source: str) -> str:
    value = obj.get(field)
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{source}: {where}.{field}: expected a non-empty string, got {value!r}")
    return value


def load_pairs_json(text: str, source: str = "demux-server --list") -> list[Pair]:
    """Parse the ``--list`` JSON array; ``source`` names where it came from in error messages."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source}: not JSON: {exc.msg} at line {exc.lineno}") from exc
    if not isinstance(data, list) or not data:
        raise ConfigError(f"{source}: expected a non-empty JSON array of pairs, got {type(data).__name__}")
    pairs: list[Pair] = []
    seen: set[tuple[str, str]] = set()
    for index, obj in enumerate(data):
        where = f"[{index}]"
        if not isinstance(obj, dict):
            raise ConfigError(f"{source}: {where}: expected an object, got {obj!r}")
        pair = Pair(
            pattern=_require_str(obj, "pattern", where, source),
            notifier=_require_str(obj, "notifier", where, source),
            min_threads=_require_int(obj, "min_threads", where, source),
            max_threads=_require_int(obj, "max_threads", where, source),
        )
        if pair.max_threads < pair.min_threads:
            raise ConfigError(
                f"{source}: {where}: max_threads {pair.max_threads} is below min_threads {pair.min_threads}"
            )
        if pair.key in seen:
            raise ConfigError(f"{source}: {where}: pair {pair.pattern}/{pair.notifier} is listed twice")
        seen.add(pair.key)
        pairs.append(pair)
    return pairs


@functools.lru_cache(maxsize=8)
def _list_pairs(path: str, mtime_ns: int, size: int) -> tuple[Pair, ...]:
    # mtime_ns and size are only part of the cache key: a rebuilt binary gets asked again.
    del mtime_ns, size
    try:
        proc = subprocess.run(
            [path, "--list"], capture_output=True, text=True, timeout=_LIST_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise LaunchError(f"{path} --list did not answer within {_LIST_TIMEOUT_S:g} s") from exc
    except OSError as exc:
        raise LaunchError(f"{path} --list could not be run: {exc.strerror}") from exc
    if proc.returncode != 0:
        first = (proc.stderr.strip().splitlines() or ["(no message)"])[0]
        raise LaunchError(f"{path} --list exited with status {proc.returncode}: {first}")
    try:
        return tuple(load_pairs_json(proc.stdout, source=f"{path} --list"))
    except ConfigError as exc:
        raise LaunchError(exc.message) from exc


def valid_pairs(server_bin: Path | None = None) -> list[Pair]:
    """The pairs ``demux-server --list`` reports, cached per binary path and modification time."""
    path = server_bin if server_bin is not None else bin_dir() / "demux-server"
    try:
        st = path.stat()
    except OSError:
        st = None
    if st is None or not path.is_file():
        raise LaunchError(f"demux-server not found at {path}: run `make build`")
    return list(_list_pairs(str(path.resolve()), st.st_mtime_ns, st.st_size))


def pairs_by_key(pairs: list[Pair]) -> dict[tuple[str, str], Pair]:
    return {pair.key: pair for pair in pairs}
