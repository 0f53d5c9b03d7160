"""A private network namespace for a test's processes, holding only loopback.

Chromium fails every request still waiting for a connection with ``net::ERR_NETWORK_CHANGED`` whenever an
IP address of its network namespace changes (its socket pools are flushed; no switch turns this off), and
on a shared test machine other tests change addresses all the time: Docker networks, container veths,
IPv6 link-local addresses coming and going.  A browser and the server it talks to, both inside a
namespace of their own, see none of that: its only interface is ``lo``, which never changes.

Needs root (``ip netns``), as the suite does anyway (Docker, testbeds); without it ``private_netns`` yields
None and the caller runs in the host's namespace as before.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def private_netns(prefix: str) -> Iterator[list[str] | None]:
    """Yields the command prefix that runs a program inside a fresh namespace (``ip netns exec NAME``),
    or None where one cannot be made; the namespace is deleted on exit."""
    ip = shutil.which("ip")
    if os.geteuid() != 0 or ip is None:
        yield None
        return
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    made = subprocess.run([ip, "netns", "add", name], capture_output=True, text=True, check=False)
    if made.returncode != 0:
        yield None
        return
    try:
        run = [ip, "netns", "exec", name]
        subprocess.run([*run, ip, "link", "set", "lo", "up"], check=True, capture_output=True, timeout=30)
        yield run
    finally:
        subprocess.run([ip, "netns", "delete", name], capture_output=True, check=False, timeout=30)
