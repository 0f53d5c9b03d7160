"""Where a run's traffic came from: the remote addresses of a server's established connections, as ``ss``
on the server's host shows them (the remote launcher asks over SSH, a Slurm job in a step on its node)."""

from __future__ import annotations

import threading
from collections.abc import Callable


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


class PeerWatch:
    """Looks at the server's peers in a thread while the client measures, until they show.

    ``look()`` returns the peers (``ss`` on the server's host) or None where it could not look. The client
    takes a moment to connect (its container or its Slurm step starts first), so the watch looks every
    ``every_s`` seconds until an answer names a peer. :attr:`peers` is then that answer; where none did,
    the first answer ([] seen but empty, None could not look).
    """

    def __init__(self, look: Callable[[], list[str] | None], every_s: float) -> None:
        self._look = look
        self._every_s = every_s
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._answered = False
        self.peers: list[str] | None = None

    def _watch(self) -> None:
        while not self._done.wait(self._every_s):
            peers = self._look()
            if peers or not self._answered:
                self.peers, self._answered = peers, True
            if peers:
                return

    def __enter__(self) -> PeerWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join(timeout=30)
