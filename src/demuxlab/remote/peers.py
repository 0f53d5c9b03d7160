"""Where a run's traffic came from: the remote addresses of a server's established connections, as ``ss``
on the server's host shows them (the remote launcher asks over SSH, a Slurm job in a step on its node)."""

from __future__ import annotations


def ss_established(port: int) -> list[str]:
    """The ``ss`` command line listing the established TCP connections of local port ``port``."""
    return ["ss", "-Htn", "state", "established", f"( sport = :{port} )"]


def peer_addresses(ss_output: str) -> list[str]:
    """The distinct peer addresses (without port or IPv6 brackets) in ``ss -Htn``'s output, sorted."""
    peers = set()
    for line in ss_output.splitlines():
        fields = line.split()
        if len(fields) >= 4:
            peers.add(fields[-1].rsplit(":", 1)[0].strip("[]"))
    return sorted(peers)
