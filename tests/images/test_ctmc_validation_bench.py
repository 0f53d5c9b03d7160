"""bench/fidelity/ctmc_validation.py without a spec (its manual sweep) needs no database, CLI or spec
library: a tiny sweep with them made unimportable still calibrates, measures, predicts and prints its
table."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.load import Span, settle, under

REPO = Path(__file__).resolve().parents[2]
BLOCKED = ("sqlalchemy", "psycopg", "alembic", "click", "yaml", "jsonschema", "snakemake", "matplotlib")
RUNNER = """
import runpy, sys
for name in {blocked!r}:
    sys.modules[name] = None  # importing it now raises ImportError
sys.argv = ["ctmc_validation.py", *{args!r}]
runpy.run_module("bench.fidelity.ctmc_validation", run_name="__main__", alter_sys=True)
"""


def bench(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Runs the bench with the database, CLI and spec libraries unimportable."""
    code = RUNNER.format(
        blocked=BLOCKED,
        args=list(args),
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        check=False,
        # the bench package from the repository root, where `python -m bench...` finds it
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
    )


def test_light_runner_sweeps_calibrates_and_predicts(tmp_path: Path, server_bin: Path) -> None:
    out, runs = tmp_path / "val.json", tmp_path / "runs.json.gz"
    with Span() as span:
        res = bench(
            tmp_path,
            "--patterns", "lf,hsha", "--work", "10", "--threads", "1-2", "--connections", "8",
            "--duration", "0.5", "--warmup", "0.2", "--method", "exact", "--jobs", "1", "--json", str(out),
            "--runs-out", str(runs), "--probe",
        )  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    assert "mean |error|" in res.stdout and "calib err" in res.stdout
    assert "other processes' share of the CPUs during the runs" in res.stdout and "load average" in res.stdout
    assert "the cross-CPU round trip (a cache line between CPU" in res.stdout
    # ω, the client's wake-up of a sleeping dispatcher, measured by wake-cost before the runs (client's CPU
    # to the server's), kept with the runs and charged in HSHA's calibration.
    omega = re.search(
        r"^# the client's wake-up of a sleeping dispatcher \(ω\): ([0-9.]+) µs \(wake-cost from CPU",
        res.stdout,
        re.M,
    )
    assert omega is not None, res.stdout[:2000]
    doc = json.loads(out.read_text())
    # printed to 2 decimals: within half a unit of the last (and the float's own error, 9.875 → "9.88")
    half = 0.005 + 1e-9
    assert doc["wake_us"] == pytest.approx(float(omega.group(1)), abs=half) and 1.0 < doc["wake_us"] < 100.0
    # and, from the same wake-cost runs, a released lock's hand-off to a waiter asleep on it
    handoff = re.search(
        r"^# a released lock's hand-off to a sleeping waiter: ([0-9.]+) µs \(wake-cost", res.stdout, re.M
    )
    assert handoff is not None and doc["handoff_us"] == pytest.approx(float(handoff.group(1)), abs=half)
    assert doc["handoff_us"] > 0.5
    # Every run has the round trip between the server's and the client's CPU, before and after it.
    trips = [t for p in doc["points"] for pair in p["round_trip_ns"] for t in pair]
    assert len(trips) == 2 * sum(len(p["runs"]) for p in doc["points"]) and all(t > 0 for t in trips)
    assert doc["server_cpus"] and doc["client_cpus"] and not set(doc["server_cpus"]) & set(doc["client_cpus"])
    points = {(p["pattern"], p["threads"]): p for p in doc["points"]}
    assert set(points) == {("lf", 1), ("lf", 2), ("hsha", 2)}  # HSHA needs 2 threads
    cals = {c["workload"][1]: c for c in doc["calibrations"]}
    assert set(cals) == {"lf", "hsha"}
    for p in points.values():
        assert p["measured"] > 0 and p["paper"] > 0 and all(0.0 <= b <= 1.0 for b in p["background"])
        # calibrated from this run's instrumented runs, unless the fit refused (then it says why)
        assert (p["calibrated"] is not None and p["calibrated"] > 0) or cals[p["pattern"]]["refused"]
    for c in cals.values():
        assert (c["rates_per_us"] is not None and c["self_check"]) or c["refused"]
    # Both chains charge the send that wakes a sleeping client at ω, from the wake-cost runs (issue 43).
    for pattern in ("hsha", "lf"):
        if cals[pattern]["source"]:
            assert cals[pattern]["source"]["r_v"].startswith("wake-cost "), cals[pattern]["source"]

    # --probe: an instrumented run of LF at 2 threads (its calibration is at 1) is kept, not calibrated from.
    kept = json.loads(gzip.decompress(runs.read_bytes()))["runs"]
    instr = sorted((r["point"]["pattern"], r["point"]["threads"]) for r in kept if r["point"]["instrument"])
    assert instr == [("hsha", 2), ("lf", 1), ("lf", 2)]
    probe = next(
        r
        for r in kept
        if r["point"]["instrument"] and r["point"]["threads"] == 2 and r["point"]["pattern"] == "lf"
    )
    assert probe["server"]["ops"] and probe["server"]["threads"] == 2

    # The same runs replayed (the points from the runs' file, not from the options): the same measurements,
    # calibrations and predictions, and no run.
    again = tmp_path / "again.json"
    res = bench(tmp_path, "--replay", str(runs), "--method", "exact", "--jobs", "1", "--json", str(again))
    assert res.returncode == 0, res.stderr[-2000:]
    assert "# replay of" in res.stdout and "msg/s, background" not in res.stdout
    redo = json.loads(again.read_text())
    assert redo["points"] == doc["points"]
    assert redo["calibrations"] == doc["calibrations"]
    kept_wake = json.loads(gzip.decompress(runs.read_bytes()))
    assert (redo["wake_us"], redo["handoff_us"]) == (kept_wake["wake_us"], kept_wake["handoff_us"])
    assert "(measured with the runs, " in res.stdout

    # --sleeps: the client's sleeps per message at every point (it counted them), and the chain's where
    # the calibration fitted them (r_u: HSHA here), from the SSA; with another method it is refused.
    res = bench(tmp_path, "--replay", str(runs), "--jobs", "1", "--sleeps", "--json", str(again))
    assert res.returncode == 0, res.stderr[-2000:]
    slept = json.loads(again.read_text())
    for p in slept["points"]:
        assert p["client_sleeps_per_message"] > 0.0  # 8 connections: the client sleeps between echoes
        assert p["chain_sleeps_per_message"] is None or p["pattern"] == "hsha"
    fitted = [c for c in slept["calibrations"] if c["source"] and c["source"]["r_u"].startswith("fit:")]
    chained = [p for p in slept["points"] if p["chain_sleeps_per_message"] is not None]
    if fitted:  # the points of a calibration whose sleeps were fitted are counted, and their chain sleeps
        assert "the client's sleeps per message, the client's count against the chain's" in res.stdout
        assert chained and all(0.0 < p["chain_sleeps_per_message"] < 2.0 for p in chained)
    else:
        assert "# --sleeps: no calibrated point has the client's sleeps fitted (r_u)" in res.stdout
        assert not chained
    res = bench(tmp_path, "--replay", str(runs), "--sleeps", "--method", "fluid")
    assert res.returncode == 2 and res.stderr.strip().splitlines() == [
        "ctmc_validation.py: error: --sleeps: the chain's sleeps are counted by the SSA, not --method fluid"
    ]

    # A runs file from before ω was kept: not charged, and said so; --wake-us charges one, a bad one is a
    # one-line error.
    old = tmp_path / "old.json.gz"
    kept_doc = json.loads(gzip.decompress(runs.read_bytes()))
    del kept_doc["wake_us"], kept_doc["handoff_us"]
    old.write_bytes(gzip.compress(json.dumps(kept_doc).encode()))
    res = bench(tmp_path, "--replay", str(old), "--method", "exact", "--jobs", "1", "--json", str(again))
    assert res.returncode == 0, res.stderr[-2000:]
    assert f"(ω): - ({old} holds none (measured before it was recorded): not charged; give --wake-us)" in (
        res.stdout
    )
    assert (
        f"hand-off to a sleeping waiter: - ({old} holds none (measured before it was recorded): not charged; "
        in (res.stdout)
    )
    assert json.loads(again.read_text())["wake_us"] is json.loads(again.read_text())["handoff_us"] is None
    # (exact, as the replays above: the fluid integrator can underflow its step on one run's rates, and
    # this checks --handoff-us, not the solver)
    res = bench(
        tmp_path,
        "--replay",
        str(old),
        "--method",
        "exact",
        "--jobs",
        "1",
        "--handoff-us",
        "7",
        "--json",
        str(again),
    )
    assert res.returncode == 0 and "hand-off to a sleeping waiter: 7.00 µs (--handoff-us)" in res.stdout
    assert json.loads(again.read_text())["handoff_us"] == 7.0
    res = bench(tmp_path, "--replay", str(old), "--wake-us", "-1")
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        "ctmc_validation.py: error: --wake-us: must be a number of µs ≥ 0, got -1.0"
    ]
    # Latencies (ω is the sender's CPU time, asserted above): on a busy host a thread may wait for its CPU.
    settle(
        span,
        under("the lock's hand-off (µs)", doc["handoff_us"], 1000.0, unit_s=1e-6),
        under("the longest cross-CPU round trip (ns)", max(trips), 100_000, unit_s=1e-9),
    )


def test_replay_of_a_file_that_is_not_runs_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "runs.json.gz"
    bad.write_text("not gzip")
    res = bench(tmp_path, "--replay", str(bad))
    assert res.returncode == 1
    assert res.stderr.strip().splitlines() == [
        f"ctmc_validation.py: error: --replay {bad}: not a --runs-out file (Not a gzipped file (b'no'))"
    ]


def run_lines(stdout: str) -> list[str]:
    """The label of every run, in the order they ran ("# [n/N] label: ...")."""
    return re.findall(r"^# \[\d+/\d+\] (.+?): ", stdout, flags=re.M)


def test_measure_only_runs_in_rounds_and_keeps_every_run(tmp_path: Path, server_bin: Path) -> None:
    """--measure-only measures and writes the runs, nothing else; the runs go in rounds, each point once per
    round, so a cut drops the last repeats first; --replay predicts them later."""
    runs = tmp_path / "runs.json.gz"
    res = bench(
        tmp_path,
        "--patterns", "lf", "--work", "10", "--threads", "1-2", "--connections", "8", "--repeats", "2",
        "--calib-repeats", "2", "--duration", "0.3", "--warmup", "0.1", "--runs-out", str(runs),
        "--measure-only",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    order = run_lines(res.stdout)
    points = {"lf/epoll-lt t1 w10 c8 b1 instr", "lf/epoll-lt t1 w10 c8 b1", "lf/epoll-lt t2 w10 c8 b1"}
    assert len(order) == 6 and set(order[:3]) == points and set(order[3:]) == points
    assert "mean |error|" not in res.stdout and "# measured 6 runs in" in res.stdout
    kept = json.loads(gzip.decompress(runs.read_bytes()))["runs"]
    assert len(kept) == 6 and not list(tmp_path.glob("*.tmp"))
    out = tmp_path / "val.json"
    res = bench(tmp_path, "--replay", str(runs), "--method", "fluid", "--jobs", "1", "--json", str(out))
    assert res.returncode == 0, res.stderr[-2000:]
    assert "mean |error|" in res.stdout
    # How far the two repeats of each plain point fell apart (the host's noise), from the runs themselves.
    by_point: dict[str, list[float]] = {}
    for r in kept:
        if not r["point"]["instrument"]:
            by_point.setdefault(json.dumps(r["point"], sort_keys=True), []).append(
                r["client"]["throughput_msgs_per_s"]
            )
    spreads = sorted(max(v) / min(v) - 1 for v in by_point.values())
    assert len(spreads) == 2
    spread = json.loads(out.read_text())["repeat_spread"]
    assert spread["points"] == 2 and spread["median"] == spreads[0] and spread["max"] == spreads[1]
    line = f"the repeats of one point differ by (fastest / slowest − 1, 2 points): median {spreads[0]:.1%}"
    assert line in res.stdout

    # A run that other processes disturbed beyond the file's --max-background (an older bench kept it
    # after its tries) is left out of the replay and named; a --max-background given to the replay wins;
    # a file whose every run is over it is a one-line error. The other runs as on a quiet host: what
    # other processes really took during them depends on how busy this host was, not on the bench.
    doc = json.loads(gzip.decompress(runs.read_bytes()))
    doc["args"]["max_background"] = 0.1
    for r in doc["runs"]:
        r["background"] = 0.0
    noisy = next(r for r in doc["runs"] if r["point"]["threads"] == 2)
    noisy["background"] = 0.5
    over = tmp_path / "over.json.gz"
    over.write_bytes(gzip.compress(json.dumps(doc).encode()))
    res = bench(tmp_path, "--replay", str(over), "--method", "fluid", "--jobs", "1", "--json", str(out))
    assert res.returncode == 0, res.stderr[-2000:]
    thr = noisy["client"]["throughput_msgs_per_s"]
    line = f"# left out: lf/epoll-lt t2 w10 c8 b1: {thr:,.0f} msg/s, other processes took 50% of the CPUs"
    assert f"{line} (over --max-background 10%)" in res.stdout
    assert "; 1 run(s) left out, still over --max-background" in res.stdout
    two = next(p for p in json.loads(out.read_text())["points"] if p["threads"] == 2)
    others = [r for r in doc["runs"] if r["point"] == noisy["point"] and r is not noisy]
    assert two["runs"] == [r["client"]["throughput_msgs_per_s"] for r in others] and len(others) == 1
    res = bench(tmp_path, "--replay", str(over), "--method", "fluid", "--max-background", "0.6")
    assert res.returncode == 0 and "# left out:" not in res.stdout, res.stderr[-2000:]
    for r in doc["runs"]:
        r["background"] = 0.5
    over.write_bytes(gzip.compress(json.dumps(doc).encode()))
    res = bench(tmp_path, "--replay", str(over), "--method", "fluid")
    assert res.returncode == 1 and res.stderr.strip().splitlines() == [
        "ctmc_validation.py: error: every run was left out: other processes took more than --max-background "
        "10% of the CPUs during each"
    ]
    res = bench(tmp_path, "--replay", str(over), "--max-background", "5")
    assert res.returncode == 2 and res.stderr.strip().splitlines() == [
        "ctmc_validation.py: error: --max-background: must be a share of the CPUs in [0, 1], got 5.0"
    ]

    # Less work than any of the calibration's runs had (a cut calibration): those points get the paper's
    # prediction only, and the bench says why; the others, more work included, from the calibration.
    doc = json.loads(gzip.decompress(runs.read_bytes()))
    for r in doc["runs"]:
        r["background"] = 0.0  # as above: no run left out for how busy this host was
    doc["runs"] += [
        {**r, "point": {**r["point"], "work_us": w}}
        for r in doc["runs"]
        if not r["point"]["instrument"]
        for w in (5.0, 20.0)
    ]
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(gzip.compress(json.dumps(doc).encode()))
    res = bench(tmp_path, "--replay", str(cut), "--method", "fluid", "--jobs", "1", "--json", str(out))
    assert res.returncode == 0, res.stderr[-2000:]
    assert "# calibration lf/epoll-lt c8 b1 (manual): has no run at 5 µs work or less (cut short)" in (
        res.stdout
    )
    doc = json.loads(out.read_text())
    got = {(p["threads"], p["work_us"]): p for p in doc["points"]}
    assert set(got) == {(t, w) for t in (1, 2) for w in (5.0, 10.0, 20.0)}
    refused = doc["calibrations"][0]["refused"]  # a busy host can make the self-check refuse the fit
    for (_threads, work), p in got.items():
        assert p["paper"] > 0 and (p["calibrated"] is None) == (work == 5.0 or bool(refused)), p


def test_max_round_trip_reruns_a_run_whose_cpus_were_far_apart(tmp_path: Path, server_bin: Path) -> None:
    """--max-round-trip 1 ns (no two CPUs are that near): every run is measured --retries times, waiting
    --quiet-wait for the CPUs to come near first, and the last kept with its round trip; the bench says
    how many attempts were over and how many runs were kept so."""
    runs = tmp_path / "runs.json.gz"
    res = bench(
        tmp_path,
        "--patterns", "lf", "--work", "10", "--threads", "1", "--connections", "8", "--duration", "0.3",
        "--warmup", "0.1", "--max-round-trip", "1", "--retries", "2", "--quiet-wait", "0",
        "--method", "fluid", "--jobs", "1", "--runs-out", str(runs),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    assert "4 attempt(s) over --max-round-trip 1 ns, 2 kept" in res.stdout  # lf t1 and its calibration run
    kept = json.loads(gzip.decompress(runs.read_bytes()))["runs"]
    assert len(kept) == 2 and all(len(r["round_trip_ns"]) == 2 and min(r["round_trip_ns"]) > 1 for r in kept)


def test_time_limit_stops_starting_runs(tmp_path: Path, server_bin: Path) -> None:
    runs = tmp_path / "runs.json.gz"
    res = bench(
        tmp_path,
        "--patterns", "lf", "--work", "10", "--threads", "1-2", "--connections", "8", "--repeats", "3",
        "--duration", "0.3", "--warmup", "0.1", "--runs-out", str(runs), "--measure-only",
        "--time-limit", "0.5",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    done = run_lines(res.stdout)
    assert 1 <= len(done) < 7, res.stdout
    assert f"# --time-limit 0.5 s: {7 - len(done)} of 7 runs not run" in res.stdout
    assert len(json.loads(gzip.decompress(runs.read_bytes()))["runs"]) == len(done)


def test_keep_going_reports_a_failed_run_and_measures_the_others(tmp_path: Path, server_bin: Path) -> None:
    """A server that fails for one pattern (here: a wrapper that refuses HSHA) loses that pattern's runs,
    names each failure, and the other pattern is measured, calibrated and predicted; without --keep-going
    the first failure stops the bench with one line."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "demux-client").symlink_to(server_bin.parent / "demux-client")
    wrapper = bindir / "demux-server"
    wrapper.write_text(
        f'#!/bin/sh\ncase " $* " in *" hsha "*|*"=hsha "*) echo "no hsha here" >&2; exit 3;; esac\n'
        f'exec {server_bin} "$@"\n'
    )
    wrapper.chmod(0o755)
    args = ("--patterns", "lf,hsha", "--work", "10", "--threads", "1-2", "--connections", "8")
    args += ("--duration", "0.3", "--warmup", "0.1", "--method", "fluid", "--jobs", "1")
    env = {"DEMUXLAB_BIN": str(bindir)}
    res = bench(tmp_path, *args, "--keep-going", env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    failed = sorted(re.findall(r"^# failed: (.+?): ", res.stdout, flags=re.M))
    assert failed == ["hsha/epoll-lt t2 w10 c8 b1", "hsha/epoll-lt t2 w10 c8 b1 instr"], res.stdout
    assert sorted(run_lines(res.stdout)) == sorted(
        [*failed, "lf/epoll-lt t1 w10 c8 b1", "lf/epoll-lt t1 w10 c8 b1 instr", "lf/epoll-lt t2 w10 c8 b1"]
    )
    assert "mean |error|" in res.stdout
    res = bench(tmp_path, *args, env=env)
    assert res.returncode == 1
    assert res.stderr.startswith("ctmc_validation.py: error: ") and len(res.stderr.strip().splitlines()) == 1


def test_a_manual_grid_option_with_a_spec_is_an_error_and_client_threads_replace_the_specs(
    tmp_path: Path,
) -> None:
    """--patterns, --notifier, --work and --connections set the manual grid: with --spec they were silently
    ignored (a 16-core spec measured every design for "--patterns uring-shared"), now each is a one-line
    error naming --only; --client-threads replaces each spec's client threads (a 16-core spec's 8 on a
    2-core host) instead of being ignored."""
    spec = str(REPO / "bench" / "fidelity" / "specs" / "multicore-16-short.yaml")
    for flag, value in (
        ("--patterns", "uring-shared"),
        ("--notifier", "uring"),
        ("--work", "10"),
        ("--connections", "8"),
    ):
        res = bench(tmp_path, "--spec", spec, flag, value)
        assert res.returncode == 2 and res.stderr.strip().splitlines() == [
            f"ctmc_validation.py: error: {flag}: sets the manual grid, not a spec's points "
            "(with --spec: --only)"
        ]
    res = bench(tmp_path, "--spec", spec, "--client-threads", "0")
    assert res.returncode == 2 and res.stderr.strip().splitlines() == [
        "ctmc_validation.py: error: --client-threads: must be at least 1, got 0"
    ]
    from bench.fidelity.ctmc_validation import spec_points

    own, _ = spec_points(spec, {1, 2}, {"uring-shared"})
    two, _ = spec_points(spec, {1, 2}, {"uring-shared"}, 2)
    assert {p.pattern for p in own} == {"uring-shared"} and {p.client_threads for p in own} == {8}
    assert [p.client_threads for p in two] == [2] * len(own)
    assert [p.label() for p in two] == [p.label() for p in own]  # only the client's threads differ


def synthetic_run(
    size: int,
    sleeps: float,
    waits: float,
    cpu_us: float,
    *,
    work: float = 0.0,
    instrument: bool = True,
    round_trip: float = 90.0,
) -> dict[str, object]:
    """A --runs-out entry of 100,000 messages in 1 s with the client's and the server's counts as given."""
    msgs = 100_000
    return {
        "point": {"msg_size": size, "work_us": work, "instrument": instrument},
        "server": {
            "messages": msgs, "elapsed_s": 1.0, "cpu_s": {"user": 0.1, "sys": 0.88},
            "ops": {"idle": {"count": round(sleeps * msgs)}},
        },
        "client": {
            "messages": msgs, "duration_s": 1.0, "notify_calls": round(waits * msgs),
            "cpu_s": {"user": 0.0, "sys": cpu_us * msgs / 1e6},
        },
        "round_trip_ns": [round_trip, round_trip],
    }  # fmt: skip


def fit_bench(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench.fidelity.client_cost_fit", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=REPO,
    )


def test_client_cost_fit_recovers_the_cost_per_server_sleep(tmp_path: Path) -> None:
    """bench/fidelity/client_cost_fit.py fits the client's CPU per message against the server's sleeps per
    message (and the client's own waits) over the instrumented 0-work runs whose CPUs stayed near: a client
    that costs 5 µs per message and 6 µs per server sleep comes back as that; the runs it must leave out (with
    work, plain, CPUs far apart) would break the fit if it took them."""
    sleeps = [0.0, 0.05, 0.1, 0.2, 0.3, 0.4]
    waits = [0.5, 0.1, 0.4, 0.2, 0.3, 0.05]
    runs = [synthetic_run(64, s, w, 5.0 + 6.0 * s) for s, w in zip(sleeps, waits, strict=True)]
    runs += [
        synthetic_run(64, 0.1, 0.1, 40.0, work=10.0),
        synthetic_run(64, 0.1, 0.1, 40.0, instrument=False),
        synthetic_run(64, 0.1, 0.1, 40.0, round_trip=400.0),
    ]
    path, out = tmp_path / "runs.json.gz", tmp_path / "fit.json"
    path.write_bytes(gzip.compress(json.dumps({"runs": runs}).encode()))
    res = fit_bench(path, "--json", out)
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert doc["runs"] == 6
    fits = {tuple(f["against"]): f for f in doc["fits"]}
    by_sleeps = fits[("server_sleeps",)]
    assert (
        abs(by_sleeps["intercept_us"] - 5.0) < 0.01
        and abs(by_sleeps["slopes_us"]["server_sleeps"] - 6.0) < 0.05
    )
    assert by_sleeps["r2"] > 0.999 and fits[("client_waits",)]["r2"] < 0.9
    assert abs(doc["busy_median"]["server"] - 0.98) < 1e-9
    assert "CPU seconds per second, median: client" in res.stdout

    # --near 500 takes the far run in, and its 40 µs breaks the fit.
    res = fit_bench(path, "--near", "500", "--json", out)
    assert res.returncode == 0
    doc = json.loads(out.read_text())
    assert doc["runs"] == 7
    assert next(f for f in doc["fits"] if f["against"] == ["server_sleeps"])["r2"] < 0.9

    # A file without a usable run: one line naming it.
    empty = tmp_path / "empty.json.gz"
    empty.write_bytes(gzip.compress(json.dumps({"runs": runs[6:]}).encode()))
    res = fit_bench(empty)
    assert res.returncode == 1
    assert res.stderr.strip().splitlines() == [
        f"client_cost_fit.py: error: {empty}: no instrumented run at 0 µs work with client and server counts"
    ]
    # A run without the client's CPU times: one line naming the file and the run, no traceback.
    broken = tmp_path / "broken.json.gz"
    no_cpu = synthetic_run(64, 0.1, 0.1, 5.0)
    no_cpu["client"] = {"messages": 100_000, "duration_s": 1.0, "notify_calls": 10_000}
    broken.write_bytes(gzip.compress(json.dumps({"runs": [runs[0], no_cpu]}).encode()))
    res = fit_bench(broken)
    assert res.returncode == 1
    assert res.stderr.strip().splitlines() == [
        f"client_cost_fit.py: error: {broken}: run #1: not a run of bench/fidelity/ctmc_validation.py "
        "(KeyError('cpu_s'))"
    ]
    res = fit_bench(bad := tmp_path / "bad.json.gz")
    assert res.returncode == 1 and f"runs file {bad}: not a --runs-out file" in res.stderr


def test_client_cost_fit_asks_the_chain_for_the_dispatchers_sleeps(tmp_path: Path) -> None:
    """--chain calibrates a dispatching workload from a runs file (here the fourth 2-core validation run's
    proactor/epoll-et, 100 connections, 64 B) and prints, per thread count, how often the chain's client
    finds the demultiplexer asleep, next to the server's measured notifier sleeps (taken here from the file
    itself): the chain reproduces its calibration run, and its dispatcher sleeps less often as threads are
    added, as the server's did."""
    runs = REPO / "bench" / "data" / "ctmc" / "validation-2026-11-28b.json.gz"
    out = tmp_path / "fit.json"
    res = fit_bench(runs, "--chain", "--only", "proactor/epoll-et c100 b64", "--json", out)
    assert res.returncode == 0, res.stderr[-2000:]
    rows = json.loads(out.read_text())["chain"]
    assert [r["threads"] for r in rows] == [2, 3, 4] and {r["workload"] for r in rows} == {
        "proactor/epoll-et c100 b64"
    }
    kept = json.loads(gzip.decompress(runs.read_bytes()))["runs"]
    for row in rows:
        servers = [
            r["server"]
            for r in kept
            if r["point"]["instrument"]
            and r["point"]["pattern"] == "proactor"
            and r["point"]["notifier"] == "epoll-et"
            and (r["point"]["connections"], r["point"]["msg_size"], r["point"]["threads"])
            == (100, 64, row["threads"])
        ]
        sleeps = [
            (s["events_per_call"]["calls"] - s["ops"]["notify"]["count"]) / s["messages"] for s in servers
        ]
        assert row["runs"] == len(servers) and abs(row["server_sleeps"] - sum(sleeps) / len(sleeps)) < 1e-9
    assert abs(rows[0]["chain"] / rows[0]["measured"] - 1.0) < 0.10  # the calibration's own runs
    assert rows[0]["chain_wakes"] > rows[2]["chain_wakes"] > 0.0
    assert rows[0]["server_sleeps"] > rows[2]["server_sleeps"]


def test_the_submission_lock_and_its_hand_off_explain_uring_shared_on_16_cores() -> None:
    """bench/fidelity/uring_shared_lock.py on the shipped 16-core runs (which predate the lock's timing): the
    chain as calibrated grows with the threads (+400 % at 8), the lock's hold alone leaves it far above the
    server, and the hold with a hand-off of 5 µs brings every point within 15 % (docs/ctmc-reference.md)."""
    runs = REPO / "bench" / "data" / "ctmc" / "validation-2026-11-28-16core.json.gz"
    script = "bench.fidelity.uring_shared_lock"
    res = subprocess.run(
        [sys.executable, "-m", script, str(runs), "--handoff-us", "5", "--rel-ci", "0.03"],
        capture_output=True, text=True, timeout=300, check=False, cwd=REPO,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    summary = dict(
        (m.group(1), (float(m.group(2)), float(m.group(3))))
        for m in re.finditer(
            r"^\s*(calibrated|hold|hand-off 5)\s+6\s+([\d.]+)%\s+([\d.]+)%$", res.stdout, flags=re.M
        )
    )
    assert set(summary) == {"calibrated", "hold", "hand-off 5"}, res.stdout
    assert summary["calibrated"][1] > 300.0  # the uncontended chain: +400 % at 8 threads
    assert summary["hold"][1] > 40.0  # the hold alone: the lock idle while a waiter wakes is missing
    assert summary["hand-off 5"][0] < 6.0 and summary["hand-off 5"][1] < 15.0, res.stdout
    res = subprocess.run(
        [sys.executable, "-m", script, str(runs), "--handoff-us", "x"],
        capture_output=True, text=True, timeout=60, check=False, cwd=REPO,
    )  # fmt: skip
    assert res.returncode == 2 and res.stderr.strip().splitlines() == [
        "uring_shared_lock.py: error: --handoff-us: a comma list of µs, got 'x'"
    ]


# A lent many-core host has Python's standard library and numpy; bench/fidelity/device16.sh carries the rest.
DEVICE_GUARD = """
import importlib.machinery, sys
ALLOWED = set(sys.stdlib_module_names) | {allowed!r}
OURS = {ours!r}

class OnlyTheDevicesPackages:
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in ALLOWED or importlib.machinery.PathFinder.find_spec(top, OURS) is not None:
            return None
        raise ModuleNotFoundError(f"No module named {{top!r}} (not on a lent host)", name=top)

sys.meta_path.insert(0, OnlyTheDevicesPackages())
"""
DEVICE_PACKAGES = (
    *("numpy", "yaml", "_yaml", "jsonschema", "jsonschema_specifications", "referencing", "rpds", "attr"),
    *("attrs", "typing_extensions", "sitecustomize", "usercustomize"),
)


def device16(tmp_path: Path, kit: Path, **env: str) -> subprocess.CompletedProcess[str]:
    guard = tmp_path / "guard"
    guard.mkdir(exist_ok=True)
    (guard / "sitecustomize.py").write_text(
        DEVICE_GUARD.format(allowed=set(DEVICE_PACKAGES), ours=[str(REPO / "src"), str(REPO)])
    )
    return subprocess.run(
        ["bash", str(REPO / "bench" / "fidelity" / "device16.sh"), "measure"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={
            **os.environ,
            **{"PYTHON": sys.executable, "KIT": str(kit), "PYTHONPATH": str(guard), "TIME_LIMIT": "1"},
            **{"EXTRA": "--only reactor --duration 0.3 --warmup 0.1", **env},
        },
    )


def test_device16_measures_with_only_numpy_and_the_kits_packages(tmp_path: Path, server_bin: Path) -> None:
    """The lent host's call (bench/fidelity/device16.sh measure): the 16-core spec's runs, ω and the host's
    facts into $OUT, with nothing importable but the standard library, numpy and what the kit carries (here
    the venv's copies of those; anything else the bench came to need would fail this, as it would there)."""
    out = tmp_path / "out"
    version = f"py{sys.version_info[0]}{sys.version_info[1]}"
    res = device16(tmp_path, tmp_path / "kit", OUT=str(out))
    assert res.returncode == 2, res.stderr[-2000:]
    assert res.stderr.startswith(f"device16: no {tmp_path / 'kit' / version} for this host's Python 3.")
    (tmp_path / "kit" / version).mkdir(parents=True)
    res = device16(tmp_path, tmp_path / "kit", OUT=str(out))
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    done = run_lines(res.stdout)
    assert done and all(label.startswith("reactor/epoll-lt t1 ") for label in done), res.stdout
    doc = json.loads(gzip.decompress((out / "m16.json.gz").read_bytes()))
    assert len(doc["runs"]) == len(done) and doc["args"]["spec"] == [
        "bench/fidelity/specs/multicore-16-short.yaml"
    ]
    assert doc["wake_us"] > 0 and doc["args"]["measure_only"] and doc["args"]["time_limit"] == 1.0
    assert (out / "facts.txt").read_text().splitlines()[1] == str(os.cpu_count())

    # The guard is real: a package the lent host lacks (here: jsonschema's stand-in in the kit, which needs
    # scipy) fails the bench's import check before any run, named.
    (tmp_path / "kit" / version / "jsonschema.py").write_text("import scipy\n")
    res = device16(tmp_path, tmp_path / "kit", OUT=str(out))
    assert res.returncode == 2 and not run_lines(res.stdout), res.stdout[-2000:]
    assert res.stderr.startswith("device16: the bench cannot import its packages here:\n")
    assert "No module named 'scipy' (not on a lent host)" in res.stderr
