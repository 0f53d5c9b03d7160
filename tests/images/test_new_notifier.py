"""Adding a notifier is its back-end file and one line of notifier.h's NOTIFIER_TABLE (issue 46: the C side
of "a notifier touches <= 4 files", with demuxlab.vocab and docs/CONTRACTS.md §1 the other two, which
tests/unit/test_vocab.py checks against `demux-server --list`).

A copy of images/ gets a fake eighth back-end (notify_poll.c under another name) and its table line and
nothing else; the server built from it lists the new notifier for every demultiplexing pattern, with the
same thread limits as poll, serves with it, and notify-scale (which links the back-ends and their table)
measures it and names it in its usage."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from helpers.cbuild import images_copy, make_targets
from helpers.server import exchange, start_server

pytestmark = pytest.mark.slow

TABLE_LAST = 'X(URING, "uring", notifier_uring)'


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """build/ of an images/ copy with the fake notifier `fake`: bin/demux-server and bench/notify-scale."""
    root = tmp_path_factory.mktemp("new-notifier")
    images = images_copy(root, ("server", "common", "bench"))
    src = images / "server" / "src"
    backend = (src / "notify_poll.c").read_text()
    assert "&notifier_poll," in backend and "const struct notifier_ops notifier_poll = {" in backend
    (src / "notify_fake.c").write_text(backend.replace("notifier_poll", "notifier_fake"))
    header = (src / "notifier.h").read_text()
    assert TABLE_LAST in header, "notifier.h: no NOTIFIER_TABLE line for uring to add a notifier after"
    (src / "notifier.h").write_text(
        header.replace(TABLE_LAST, TABLE_LAST + ' \\\n    X(FAKE, "fake", notifier_fake)')
    )
    build = root / "build"
    make_targets(images, build, "bin/demux-server", "bench/notify-scale")
    return build


def test_the_table_line_lists_the_notifier_for_every_demultiplexing_pattern(built: Path) -> None:
    server = built / "bin" / "demux-server"
    out = subprocess.run([str(server), "--list"], capture_output=True, text=True, timeout=30, check=True)
    pairs = json.loads(out.stdout)
    poll = {p["pattern"]: (p["min_threads"], p["max_threads"]) for p in pairs if p["notifier"] == "poll"}
    fake = {p["pattern"]: (p["min_threads"], p["max_threads"]) for p in pairs if p["notifier"] == "fake"}
    assert poll and fake == poll
    assert [p["notifier"] for p in pairs if p["pattern"] == "reactor"][-1] == "fake"  # in the table's order


def test_the_server_serves_with_the_new_notifier(built: Path) -> None:
    for pattern, threads in (("reactor", 1), ("hsha", 2)):
        args = ["--pattern", pattern, "--notifier", "fake", "--threads", str(threads), "--msg-size", "64"]
        srv = start_server(built / "bin" / "demux-server", args)
        try:
            assert exchange(srv.port, 64) == 15
        finally:
            out = srv.stop()
        assert out.rc == 0 and out.json is not None, out.stderr
        assert (out.json["pattern"], out.json["notifier"], out.json["messages"]) == (pattern, "fake", 15)


def test_notify_scale_measures_and_names_it(built: Path) -> None:
    prog = built / "bench" / "notify-scale"
    res = subprocess.run(
        [str(prog), "--notifier", "fake", "--fds", "64", "--active", "3", "--iters", "200"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["ready_per_call"] == 3
    bad = subprocess.run(
        [str(prog), "--notifier", "kqueue", "--fds", "4", "--active", "1"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert bad.returncode == 2
    assert "--notifier must be select, poll, epoll-lt, epoll-et, uring or fake" in bad.stderr
    assert "--notifier select|poll|epoll-lt|epoll-et|uring|fake " in bad.stderr
