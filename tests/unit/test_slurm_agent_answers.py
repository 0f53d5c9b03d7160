"""What a Slurm job reads of its nodes: the facts agent's answer as a file per node (two tasks' lines on one
stdout interleaved under load and neither parsed), and the peers `ss` shows on the server's node."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from demuxlab.remote.peers import PeerWatch, peer_addresses, ss_established


def test_the_agent_writes_its_line_to_a_file_per_node(tmp_path: Path) -> None:
    out, cache = tmp_path / "answers", tmp_path / "cache"
    out.mkdir()
    res = subprocess.run(
        [sys.executable, "-m", "demuxlab.slurm.agent", "--cache", str(cache), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    (answer,) = out.glob("*.json")
    doc = json.loads(answer.read_text())
    assert doc == json.loads(res.stdout.strip().splitlines()[-1])
    assert answer.name == f"{doc['host']}.json" and doc["facts"]["online_cpus"]
    (cached,) = (cache / doc["host"]).glob("*.json")  # the facts kept by digest, as before
    assert json.loads(cached.read_text()) == doc["facts"]
    assert not list(out.glob(".*"))  # written atomically: no temporary left


def test_peer_addresses_of_ss_output() -> None:
    assert ss_established(5000) == ["ss", "-Htn", "state", "established", "( sport = :5000 )"]
    text = (
        "0 0 10.0.0.2:5000 10.0.0.3:41000\n"
        "0 0 10.0.0.2:5000 10.0.0.3:41002\n"
        "0 0 [fd00::2]:5000 [fd00::3]:50000\n"
        "garbage\n"
    )
    assert peer_addresses(text) == ["10.0.0.3", "fd00::3"]
    assert peer_addresses("") == []


def test_the_peer_watch_keeps_looking_until_a_peer_shows() -> None:
    # Before the client connects: could not look, then nothing; then the client host; then it must stop.
    answers: list[list[str] | None] = [None, [], ["10.0.0.3"], ["10.0.0.9"]]
    looked = threading.Event()

    def look() -> list[str] | None:
        answer = answers.pop(0)
        if answer:
            looked.set()
        return answer

    with PeerWatch(look, every_s=0.01) as watch:
        assert looked.wait(10)
        time.sleep(0.2)  # time for a look it must not take
    assert watch.peers == ["10.0.0.3"] and answers == [["10.0.0.9"]]


@pytest.mark.parametrize(("first", "then"), [([], None), (None, [])])
def test_the_peer_watch_keeps_its_first_answer_when_no_peer_shows(
    first: list[str] | None, then: list[str] | None
) -> None:
    answers = [first]
    with PeerWatch(lambda: answers.pop(0) if answers else then, every_s=0.01) as watch:
        time.sleep(0.1)
    assert not answers and watch.peers == first  # [] (seen, nothing) and None (could not look) stay apart
