"""One source of truth for limits: what images/common/demux_limits.h says is what the binaries refuse."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from demuxlab.errors import ConfigError
from demuxlab.limits import limits, parse_header

CLIENT_BASE = ["--host", "127.0.0.1", "--port", "9", "--connections", "4", "--threads", "1",
               "--msg-size", "1", "--warmup", "0", "--duration", "1"]  # fmt: skip
SERVER_BASE = ["--pattern", "reactor", "--notifier", "poll", "--threads", "1", "--port", "0"]


def _usage_error(binary: Path, args: list[str], option: str, value: int | float) -> str:
    """Run ``binary`` with ``option value`` replacing or added to ``args``; return its usage error."""
    args = list(args)
    if option in args:
        args[args.index(option) + 1] = str(value)
    else:
        args += [option, str(value)]
    res = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=30, check=False)
    assert res.returncode == 2, (option, value, res.returncode, res.stderr)
    return res.stderr


@pytest.mark.parametrize(
    ("option", "limit"),
    [
        ("--connections", lambda b: b.client_max_conns),
        ("--threads", lambda b: b.client_max_threads),
        ("--msg-size", lambda b: b.client_max_msg),
        ("--duration", lambda b: b.max_phase_s),
        ("--warmup", lambda b: b.max_phase_s),
        ("--rate", lambda b: b.max_rate),
    ],
)
def test_client_refuses_one_past_the_limit(binaries: Path, option: str, limit) -> None:  # type: ignore[no-untyped-def]
    value = limit(limits())
    base = CLIENT_BASE
    if option == "--threads":  # threads may not exceed connections: give it enough of them
        base = [*CLIENT_BASE[:5], str(value + 1), *CLIENT_BASE[6:]]
    message = _usage_error(binaries / "demux-client", base, option, value + 1)
    assert str(value) in message or f"{value:g}" in message, message


@pytest.mark.parametrize(
    ("option", "limit"),
    [("--work-us", lambda b: b.max_work_us), ("--msg-size", lambda b: b.max_msg_size)],
)
def test_server_refuses_one_past_the_limit(binaries: Path, option: str, limit) -> None:  # type: ignore[no-untyped-def]
    value = limit(limits())
    message = _usage_error(binaries / "demux-server", SERVER_BASE, option, value + 1)
    assert option in message, message


def test_server_thread_ranges_are_the_header_s(binaries: Path) -> None:
    from demuxlab.designs import valid_pairs

    assert max(p.max_threads for p in valid_pairs()) == limits().max_threads


def test_header_format_is_checked() -> None:
    with pytest.raises(ConfigError, match="no DEMUX_"):
        parse_header("#define DEMUX_MAX_THREADS 1024\n", "x.h")
