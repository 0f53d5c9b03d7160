"""What a Slurm job reads of its nodes: the facts agent's answer as a file per node (two tasks' lines on one
stdout interleaved under load and neither parsed), and the peers `ss` shows on the server's node."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from demuxlab.remote.peers import peer_addresses, ss_established


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
