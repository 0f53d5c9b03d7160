"""The benchmarks' harness (bench/harness.py, `make bench`, `python -m bench`): it finds every benchmark of
the purpose folders and runs one by name; every benchmark refuses a bad option in one line naming it (exit
2, no traceback, nothing printed before); the benchmarks import each other through the package only."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import harness

REPO = Path(__file__).resolve().parents[2]
BENCHES = harness.find()

# One bad option per benchmark, each refused before the bench does any work (no binary, database, testbed
# or Docker needed), and a piece of the line it prints. A new benchmark needs its row (the test below fails
# without one), and the row shows its options are checked.
BAD: dict[str, tuple[list[str], str]] = {
    "bundle_bench": (["--runs", "0"], "--runs and --seconds must be >= 1"),
    "client_lateness": (["--rate", "0"], "argument --rate: a number > 0, got '0'"),
    "cluster_remote_bench": (
        ["--inventory", "/nonexistent/inv"],
        "--inventory: no inventory at /nonexistent",
    ),
    "cluster_sim_bench": (["--dag-profiles", "nosuch"], "argument --dag-profiles: a comma list of profiles"),
    "ctmc_bench": (["--small", "--what-if"], "--small and --what-if: one at a time"),
    "dashboard_bench": (["--repeat", "0"], "argument --repeat: an integer >= 1, got '0'"),
    "images_client_cost": (["--connections", "64", "x"], "argument --connections: an integer >= 1, got 'x'"),
    "images_efficiency": (["--duration", "0"], "argument --duration: a number > 0, got '0'"),
    "images_futex": (["--threads", "2,x"], "argument --threads: a comma list of integers >= 1, got '2,x'"),
    "images_instrument": (["--warmup", "-1"], "argument --warmup: a number >= 0, got '-1'"),
    "images_notify_scale": (["--fds", "0"], "argument --fds: an integer >= 1, got '0'"),
    "images_patterns": (["--threads", "0"], "argument --threads: an integer >= 1, got '0'"),
    "images_scaling": (["--pairs", "reactor"], "argument --pairs: a comma list of pattern/notifier"),
    "ingest_bench": (["--seconds", "0"], "--runs and --seconds must be >= 1"),
    "orchestration_bench": (["--launchers", "ssh"], "--launchers: unknown launcher 'ssh'"),
    "slow_reader": (["--msg-size", "0"], "argument --msg-size: an integer >= 1, got '0'"),
    "slurm_testbed_bench": (["--pairs", "0"], "argument --pairs: a comma list of integers >= 1, got '0'"),
    "testbed_bench": (["--pairs", "0"], "argument --pairs: an integer >= 1, got '0'"),
    "uring_fairness": (["--pairs", "uring,nosuch"], "argument --pairs: a comma list of patterns"),
    "uring_slow_reader": (
        ["--threads", "1,0"],
        "argument --threads: a comma list of integers >= 1, got '1,0'",
    ),
    "work_cpu": (
        ["--pairs", "reactor/epoll-et"],
        "argument --pairs: a comma list of pattern/notifier/threads",
    ),
    "adaptive_data": (["spec.yaml", "--out", "out", "--nice", "99"], "argument --nice: invalid choice: 99"),
    "adaptive_replay": (["--targets", "steady=2"], "argument --targets: mechanism=share pairs"),
    "client_cost_fit": (["runs.json.gz", "--only", "hsha"], "--only: chooses the workloads of --chain"),
    "cpu_placement": (["--pattern", "nosuch"], "argument --pattern: invalid choice: 'nosuch'"),
    "ctmc_validation": (["--patterns", "hsha,nosuch"], "argument --patterns: a comma list of patterns"),
    "uring_shared_lock": (["runs.json.gz", "--handoff-us", "x"], "--handoff-us: a comma list of µs, got 'x'"),
    "fuzz_inputs": (["--timeout", "0"], "argument --timeout: a number > 0, got '0'"),
    "fuzz_refusals": (["--repeat", "0"], "argument --repeat: an integer >= 1, got '0'"),
    "peer_servers": (["--server-cpus", "x"], "argument --server-cpus: a CPU list such as 0-3,8, got 'x'"),
}


def bench(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """``python -m bench ARGS`` as `make bench` runs it; from ``cwd`` with the repository on the path."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    return subprocess.run(
        [sys.executable, "-m", "bench", *args], capture_output=True, text=True, timeout=300, cwd=cwd, env=env
    )


def test_the_harness_finds_every_benchmark_of_the_purpose_folders() -> None:
    """Every module of perf/, fidelity/, fuzz/ and peers/ with a main is a benchmark, by its module's name;
    the helpers (bench/fuzz/cases.py, bench/common/) are not."""
    with_main = {
        p.stem
        for purpose in harness.PURPOSES
        for p in (REPO / "bench" / purpose).glob("*.py")
        if any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in ast.parse(p.read_text()).body)
    }
    assert set(BENCHES) == with_main and len(BENCHES) >= 25
    assert "cases" not in BENCHES and not (REPO / "bench" / "common" / "main.py").exists()
    assert BENCHES["peer_servers"].module == "bench.peers.peer_servers"
    assert all(b.summary for b in BENCHES.values()), "each benchmark's docstring says what it measures"


def test_make_bench_lists_them_and_a_wrong_name_is_one_line() -> None:
    res = bench()
    assert res.returncode == 0, res.stderr
    for name, b in BENCHES.items():
        assert any(line.split()[:1] == [name] for line in res.stdout.splitlines()), name
        assert f"{b.purpose}/ (" in res.stdout
    res = bench("no_such_bench")
    assert res.returncode == 2 and res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "bench: error: no benchmark 'no_such_bench' (the benchmarks: "
    )


def test_every_benchmark_has_a_bad_option_case() -> None:
    assert sorted(BAD) == sorted(BENCHES)


@pytest.mark.parametrize("name", sorted(BENCHES))
def test_a_bad_option_is_one_line_naming_it(name: str, tmp_path: Path) -> None:
    """Through the harness as `make bench B=NAME ARGS=...` runs it: exit 2, one line on stderr that names
    the option (`NAME.py: error: ...`), no traceback, nothing on stdout (the bench did not start)."""
    args, needle = BAD[name]
    res = bench(name, *args, cwd=tmp_path)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1, res.stderr[-3000:]
    assert lines[0].startswith(f"{name}.py: error: ") and needle in lines[0], lines[0]
    assert res.stdout == ""


def test_an_unknown_option_is_one_line_too(tmp_path: Path) -> None:
    """argparse's own refusals are one line as well (no usage block): an unknown option, a missing one."""
    for args, line in (
        (
            ["ctmc_bench", "--no-such-option"],
            "ctmc_bench.py: error: unrecognized arguments: --no-such-option",
        ),
        (["client_cost_fit"], "client_cost_fit.py: error: the following arguments are required: runs"),
    ):
        res = bench(*args, cwd=tmp_path)
        assert res.returncode == 2 and res.stderr.strip().splitlines() == [line] and res.stdout == ""


def test_a_bench_runs_by_module_as_by_name() -> None:
    """`python -m bench.PURPOSE.NAME` is the same bench (device16.sh runs the validation so)."""
    res = subprocess.run(
        [sys.executable, "-m", "bench.fidelity.uring_shared_lock", "x.json.gz", "--rel-ci", "-1"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert res.returncode == 2 and res.stderr.strip().splitlines() == [
        "uring_shared_lock.py: error: argument --rel-ci: a number > 0, got '-1'"
    ]


def test_benchmarks_import_each_other_through_the_package() -> None:
    """No bench module imports a sibling by its bare name or edits sys.path: what they share is a module of
    bench.common (or of their folder), imported as bench.…"""
    ours = {p.stem for p in (REPO / "bench").rglob("*.py")} - {"__init__", "__main__"}
    wrong = []
    for path in sorted((REPO / "bench").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            wrong += [f"{path.relative_to(REPO)}: import {n}" for n in names if n.split(".")[0] in ours]
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "path"
                and getattr(node.value, "id", "") == "sys"
            ):
                wrong.append(f"{path.relative_to(REPO)}:{node.lineno}: sys.path")
    assert not wrong, wrong
