"""Adding a pattern is its file and one line of pattern.h's PATTERN_TABLE (issue 46: the C side of "a
pattern with its model touches <= 6 files", with demuxlab.vocab, its model's module ctmc/<pattern>.py and
its registry line, and docs/CONTRACTS.md §1 the others; tests/ctmc registers a toy pattern's model).

A copy of images/ gets a fake ninth pattern (reactor.c under another name) and its table line and nothing
else; the server built from it lists the new pattern with the reactor's notifiers and thread range, last
(the table's order), serves with it, and names it in its usage error."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from helpers.cbuild import images_copy, make_targets
from helpers.server import exchange, start_server

pytestmark = pytest.mark.slow

TABLE_LAST = "X(pattern_uring_shared)"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bin/demux-server of an images/ copy with the fake pattern `fake`."""
    root = tmp_path_factory.mktemp("new-pattern")
    images = images_copy(root, ("server", "common"))
    src = images / "server" / "src"
    reactor = (src / "reactor.c").read_text()
    assert "const struct pattern_ops pattern_reactor = {" in reactor and '.name = "reactor",' in reactor
    fake = reactor.replace("pattern_reactor", "pattern_fake").replace('.name = "reactor",', '.name = "fake",')
    (src / "fake.c").write_text(fake)
    header = (src / "pattern.h").read_text()
    assert TABLE_LAST in header, "pattern.h: no PATTERN_TABLE line for uring-shared to add a pattern after"
    (src / "pattern.h").write_text(header.replace(TABLE_LAST, TABLE_LAST + " \\\n    X(pattern_fake)"))
    build = root / "build"
    make_targets(images, build, "bin/demux-server")
    return build / "bin" / "demux-server"


def test_the_table_line_lists_the_pattern_as_its_file_says(server: Path) -> None:
    out = subprocess.run([str(server), "--list"], capture_output=True, text=True, timeout=30, check=True)
    pairs = json.loads(out.stdout)
    of: dict[str, list[tuple[str, int, int]]] = {p["pattern"]: [] for p in pairs}
    for p in pairs:
        of[p["pattern"]].append((p["notifier"], p["min_threads"], p["max_threads"]))
    assert of["fake"] == of["reactor"] and of["fake"]
    assert list(of)[-1] == "fake"  # in the table's order, after uring-shared


def test_the_server_serves_with_the_new_pattern_and_names_it(server: Path) -> None:
    args = ["--pattern", "fake", "--notifier", "poll", "--threads", "1", "--msg-size", "64"]
    srv = start_server(server, args)
    try:
        assert exchange(srv.port, 64) == 15
    finally:
        out = srv.stop()
    assert out.rc == 0 and out.json is not None, out.stderr
    assert (out.json["pattern"], out.json["notifier"], out.json["messages"]) == ("fake", "poll", 15)
    bad = subprocess.run(
        [str(server), "--pattern", "nosuch", "--notifier", "poll", "--threads", "1", "--port", "0"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert bad.returncode == 2 and "fake" in bad.stderr, bad.stderr
