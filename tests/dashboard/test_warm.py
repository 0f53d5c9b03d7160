"""The dashboard's warm-up (demuxlab.dashboard.warm): each step reported in one line, a failing step
named with its reason and the next one run, nothing raised; the server and the dashboard bench warm
through it (not a private function of the server)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from demuxlab.dashboard import warm as warm_module

REPO = Path(__file__).resolve().parents[2]


def test_each_step_is_reported_and_a_failure_does_not_stop_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []

    def broken() -> str:
        ran.append("broken")
        raise RuntimeError("no demux-server here\nsecond line")

    def fine() -> str:
        ran.append("fine")
        return "3 things"

    monkeypatch.setattr(warm_module, "STEPS", (("broken", broken), ("fine", fine)))
    lines: list[str] = []
    took = warm_module.warm(lines.append)
    assert ran == ["broken", "fine"]
    assert lines[0] == "dashboard warm-up: broken: failed: no demux-server here"
    assert lines[1].startswith("dashboard warm-up: fine: 3 things in ") and lines[1].endswith(" s")
    assert lines[2].startswith("dashboard warm-up: done in ")
    assert took["broken"] is None and isinstance(took["fine"], float)


def test_the_steps_cover_models_and_caches() -> None:
    assert [name for name, _ in warm_module.STEPS] == [
        "imports",
        "model kernels",
        "what-if",
        "server thread ranges",
        "plans",
    ]


def test_the_server_thread_ranges_step_asks_the_built_server() -> None:
    if not (REPO / "build" / "bin" / "demux-server").is_file():
        pytest.skip("no build/bin/demux-server (make build)")
    assert dict(warm_module.STEPS)["server thread ranges"]().endswith(" pairs")


def _imports_warm(path: Path) -> bool:
    tree = ast.parse(path.read_text())
    return any(
        isinstance(n, ast.ImportFrom)
        and n.module == "demuxlab.dashboard.warm"
        and [a.name for a in n.names] == ["warm"]
        for n in ast.walk(tree)
    )


@pytest.mark.parametrize("path", ["src/demuxlab/dashboard/server.py", "bench/perf/dashboard_bench.py"])
def test_the_server_and_the_bench_warm_through_warm(path: str) -> None:
    assert _imports_warm(REPO / path), f"{path} does not warm through demuxlab.dashboard.warm.warm"
