"""The spine end to end: spec → Snakemake (local profile) → real binaries → real PostgreSQL → report.

Each test runs the real workflow in its own working directory against its own fresh database (the
``database_url`` fixture), then asserts on the rows.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from demuxlab.designs import valid_pairs
from demuxlab.spec import calibration_points, expand_points, load_spec
from helpers.load import Span, settle, under

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = REPO / "workflows"
SPECS = Path(__file__).with_name("specs")
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(900)]


def snakemake_cmd(
    workdir: Path, *config: str, specs: Path | None = SPECS, configfile: Path | None = None
) -> list[str]:
    cmd = [
        SNAKEMAKE,
        "--snakefile", str(WORKFLOWS / "Snakefile"),
        "--profile", str(WORKFLOWS / "local"),
        "--directory", str(workdir),
        "all",
        "--config", *config,
    ]  # fmt: skip
    if specs is not None:
        cmd.append(f"experiments_dir={specs}")
    if configfile is not None:
        cmd += ["--configfile", str(configfile)]
    return cmd


def run_workflow(
    workdir: Path, *config: str, specs: Path | None = SPECS, configfile: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        snakemake_cmd(workdir, *config, specs=specs, configfile=configfile),
        capture_output=True,
        text=True,
        timeout=840,
        check=False,
    )


def rows(url: str, sql: str, **params: Any) -> list[dict[str, Any]]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(sa.text(sql), params)]
    finally:
        engine.dispose()


RUNS_SQL = """
select r.run_id, r.status, r.failure_reason, r.repeat_index, r.attempt, r.launcher, r.throughput_msgs_per_s,
       r.server_messages, r.client_messages, r.pinning, r.server_artifact, r.measure_s, r.orchestration_s,
       p.point_key, p.pattern, p.notifier, p.threads,
       (select count(*) from samples s where s.run_id = r.run_id) as n_samples
from runs r join points p on p.id = r.point_id join experiments e on e.id = p.experiment_id
where e.name = :name order by p.point_key, r.repeat_index
"""


def test_smoke_spec_native_end_to_end(tmp_path: Path, database_url: str) -> None:
    spec = load_spec(REPO / "experiments" / "smoke.yaml", pairs=valid_pairs())
    points = expand_points(spec)
    calibration = calibration_points(spec)
    assert calibration and spec.calibration_repeats == 1
    with Span() as span:
        res = run_workflow(tmp_path, "experiments=[smoke]", specs=None)
    assert res.returncode == 0, res.stderr[-3000:]

    runs = rows(database_url, RUNS_SQL, name="smoke")
    assert len(runs) == len(points) * spec.repeats + len(calibration)
    assert {r["point_key"] for r in runs} == {p.point_key for p in points + calibration}
    failed = [(r["point_key"], r["failure_reason"]) for r in runs if r["status"] != "ok"]
    assert not failed
    for r in runs:
        assert r["launcher"] == "native"
        assert r["throughput_msgs_per_s"] > 0
        # One sample per second of the measure phase, all of them stored.
        assert r["n_samples"] == pytest.approx(spec.phases.measure_s, abs=1)
        # The server counted every message the client completed (plus warm-up and cool-down ones).
        assert r["server_messages"] >= r["client_messages"] > 0
        assert r["server_artifact"]["kind"] == "binary" and len(r["server_artifact"]["sha256"]) == 64
        assert r["pinning"]["server_cpus"] and r["pinning"]["client_cpus"]

    hosts = rows(database_url, "select hostname, cores from hosts")
    assert len(hosts) == 1 and hosts[0]["cores"] == os.cpu_count()

    report = tmp_path / "results" / "smoke" / "report"
    with (report / "points.csv").open() as f:
        table = list(csv.DictReader(f))
    # The calibration points are reported too (flagged), with their own number of runs.
    assert {row["point_key"]: row["instrument"] for row in table} == {
        p.point_key: str(p.instrument) for p in points + calibration
    }
    for row in table:
        assert int(row["runs_ok"]) == (
            spec.calibration_repeats if row["instrument"] == "True" else spec.repeats
        )
        if int(row["runs_ok"]) == 1:  # one run: a mean, no interval
            assert float(row["throughput_mean"]) > 0 and row["throughput_ci_low"] == ""
            continue
        keys = ("throughput_ci_low", "throughput_mean", "throughput_ci_high")
        low, mean, high = (float(row[k]) for k in keys)
        assert low <= mean <= high
    png = (report / "throughput_vs_threads.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
    check_model_stages(tmp_path / "results" / "smoke", database_url, spec)
    check_claims(report, table)
    check_snakemake_report(tmp_path, "smoke", table)
    # Each run's orchestration (start, stop, collect) under 10 s on a quiet host; the workflow's span
    # holds every run's, so its stall bounds what contention could have added to any one.
    settle(span, *(under(f"{r['point_key']}: orchestration (s)", r["orchestration_s"], 10) for r in runs))


def report_vars(html: str) -> dict[str, Any]:
    """The JSON documents a Snakemake HTML report embeds (results, categories, workflow description)."""
    found = {}
    for name, var in (
        ("results", "results"),
        ("categories", "categories"),
        ("workflow-desc", "workflow_desc"),
    ):
        m = re.search(rf'<script id="{name}">\s*var {var} = (.*?);\s*</script>', html, re.S)
        assert m, f"no {var} in the report"
        found[var] = json.loads(m.group(1))
    return found


def check_snakemake_report(workdir: Path, name: str, points: list[dict[str, str]]) -> None:
    """`snakemake --report` after the run holds the experiment's results: every table and figure under the
    experiment's category with its caption and labels, the bytes as the workflow wrote them."""
    html_path = workdir / "report.html"
    cmd = [
        SNAKEMAKE, "--snakefile", str(WORKFLOWS / "Snakefile"), "--directory", str(workdir),
        "--report", str(html_path), "--config", f"experiments=[{name}]",
    ]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    doc = report_vars(html_path.read_text())
    base = f"results/{name}/report"
    assert {cat: sorted(paths) for cat, paths in doc["categories"][name].items()} == {
        "Throughput": [f"{base}/points.csv", f"{base}/points.html", f"{base}/throughput_vs_threads.png"],
        "Model validation": [
            f"{base}/validation.csv",
            f"{base}/validation.html",
            f"{base}/validation.png",
            f"{base}/validation_summary.csv",
        ],
        "Claims": [
            f"{base}/claims.csv",
            f"{base}/claims.html",
            f"{base}/claims.md",
            f"{base}/recommendations.csv",
        ],
    } and set(doc["categories"]) == {name}
    assert name in doc["workflow_desc"] and "Throughput" in doc["workflow_desc"]
    results = doc["results"]
    assert set(results) == {p for subcat in doc["categories"][name].values() for p in subcat}
    for path, item in results.items():
        head, data = item["data_uri"].split(",", 1)
        assert head.endswith(";base64")
        assert base64.b64decode(data) == (workdir / path).read_bytes(), path
        assert f'<tt class="docutils literal">{name}</tt>' in item["caption"], (path, item["caption"])
        # one label per entry: two entries whose second label took two values became a toggle between
        # entries that did not exist (the section's script failed on 'mime_type'); the page of each
        # section first (the report shows HTML inline, a CSV only as a download)
        assert set(item["labels"]) == {"result"}, item["labels"]
        if item["labels"]["result"].startswith("1. "):
            assert item["mime_type"] == "text/html" and "<!DOCTYPE html>" in base64.b64decode(data).decode()
    figure = base64.b64decode(results[f"{base}/throughput_vs_threads.png"]["data_uri"].split(",", 1)[1])
    assert results[f"{base}/throughput_vs_threads.png"]["mime_type"] == "image/png"
    assert figure.startswith(b"\x89PNG") and len(figure) > 10_000
    text = base64.b64decode(results[f"{base}/points.csv"]["data_uri"].split(",", 1)[1]).decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [(r["point_key"], r["throughput_mean"]) for r in rows] == [
        (p["point_key"], p["throughput_mean"]) for p in points
    ]
    # In chromium: the home page leads to the results, every entry of every section opens without a script
    # error, each section saved as a screenshot with its page open (build/test-artifacts/report/).
    from helpers.report_browser import CHROMIUM, open_every_entry

    if Path(CHROMIUM).is_file():
        artifacts = Path(os.environ.get("DEMUXLAB_TEST_ARTIFACTS", REPO / "build" / "test-artifacts"))
        opened = open_every_entry(html_path, artifacts / "report")
        assert opened.home.lstrip().startswith("Results:") or "Results:" in opened.home[:400]
        assert set(opened.sections) == {f"{name}/{sub}" for sub in doc["categories"][name]}
        for sub, entries in opened.sections.items():
            assert entries[0][1] == "shown" and entries[0][0].startswith("1. "), (sub, entries)


def check_claims(report: Path, points: list[dict[str, str]]) -> None:
    """A verdict (with its reason) for every seed claim, and the best measured design per workload."""
    from demuxlab.claims import CLAIMS, NOT_TESTABLE, VERDICTS

    with (report / "claims.csv").open() as f:
        claims = list(csv.DictReader(f))
    assert [c["claim_id"] for c in claims] == [c.id for c in CLAIMS]
    hostname = os.uname().nodename
    for c in claims:
        assert c["verdict"] in VERDICTS and c["reason"], c
        assert c["host"] == hostname and f"{os.cpu_count()} cores" in c["hardware"]
    if (os.cpu_count() or 1) <= 3:  # the server gets one CPU: every thread-scaling test lacks points
        untestable = [c for c in claims if c["verdict"] == NOT_TESTABLE]
        assert any("oversubscribed" in c["reason"] for c in untestable), claims
    measured = [p for p in points if p["instrument"] == "False" and p["throughput_mean"]]
    # the best is among the points whose server threads fit the server's CPUs (never an oversubscribed one)
    measured = [p for p in measured if p["oversubscribed"] != "True"] or measured
    best = max(measured, key=lambda p: float(p["throughput_mean"]))
    with (report / "recommendations.csv").open() as f:
        (rec,) = list(csv.DictReader(f))  # the smoke spec has one workload
    assert (rec["pattern"], rec["notifier"], rec["threads"]) == (
        best["pattern"],
        best["notifier"],
        best["threads"],
    )
    assert float(rec["mean"]) == pytest.approx(float(best["throughput_mean"]))
    assert int(rec["candidates"]) == len(measured)
    md = (report / "claims.md").read_text()
    assert md.startswith("# Seed claims: smoke") and "## Recommendation" in md
    assert all(f"## {c['claim_id']}" in md for c in claims)


def check_model_stages(results: Path, url: str, spec: Any) -> None:
    """Calibrations from the real instrumented runs, predictions for every modelled point (every pattern,
    issue 19), validation."""
    calibration = calibration_points(spec)
    pairs = {(p.pattern, p.notifier) for p in calibration}
    # Each pair is calibrated, or refused with its reason and figures (issue 10: a calibration must
    # predict its own runs within 10 %; HSHA's two threads and the client share this host's 2 cores).
    outcomes = json.loads((results / "model" / "calibrations.json").read_text())["calibrations"]
    assert {(o["pattern"], o["notifier"]) for o in outcomes} == pairs
    fitted = {(o["pattern"], o["notifier"]) for o in outcomes if o["calibration_id"] is not None}
    for o in outcomes:
        if o["calibration_id"] is None:
            assert o["error"].startswith(f"calibrate {o['pattern']}/{o['notifier']}: refused: "), o
    every = "select pattern, notifier, rates, source_runs, host_id, artifacts, method from calibrations"
    cals = [c for c in rows(url, every) if c["method"] != "refused"]
    assert {(c["pattern"], c["notifier"]) for c in cals} == fitted
    # each refusal stored with its reason, for the dashboard to say why a model line is missing
    refused = {(c["pattern"], c["notifier"]): c for c in rows(url, every) if c["method"] == "refused"}
    assert set(refused) == pairs - fitted
    assert all(c["artifacts"]["error"] and c["rates"] == {} for c in refused.values())
    for c in cals:
        for check in c["artifacts"]["self_check"]:
            assert abs(check["rel_error"]) <= 0.10
        assert len(c["source_runs"]) == spec.calibration_repeats and c["host_id"] is not None
        # Every rate the server measures was fitted from it (per µs: positive, below 1 per ps); HSHA's and
        # LF's are seed 001's set, the other patterns' are their own (their module docstrings).
        measured = {k for k, v in c["rates"]["source"].items() if v != "paper"}
        if c["pattern"] in ("hsha", "lf"):
            assert {"r_l", "r_i", "r_o", "r_a", "r_e"} <= measured
        assert {"r_o", "r_x", "r_z"} <= measured
        assert all(0 < c["rates"][k] < 1e6 for k in ("r_l", "r_i", "r_o", "r_a", "r_e", "r_x", "r_z"))
        if c["notifier"] == "epoll-et":
            assert c["rates"]["source"]["r_a"].startswith("instant:")
    model_points = expand_points(spec)  # every pattern has a model
    preds = rows(
        url,
        "select p.point_key, x.rates_source, x.throughput_msgs_per_s, x.ci_halfwidth_rel from predictions x "
        "join points p on p.id = x.point_id",
    )
    assert sorted((x["point_key"], x["rates_source"]) for x in preds) == sorted(
        (p.point_key, source)
        for p in model_points
        for source in ("paper", "calibration")
        if source == "paper" or (p.pattern, p.notifier) in fitted
    )
    assert all(x["throughput_msgs_per_s"] > 0 and x["ci_halfwidth_rel"] <= 0.011 for x in preds)
    with (results / "report" / "validation.csv").open() as f:
        table = {row["point_key"]: row for row in csv.DictReader(f)}
    assert set(table) == {p.point_key for p in model_points}
    for row in table.values():
        if not row["calibration_msgs_per_s"]:
            continue
        meas, pred = float(row["measured_msgs_per_s"]), float(row["calibration_msgs_per_s"])
        assert float(row["calibration_rel_error"]) == pytest.approx((pred - meas) / meas)
    assert (results / "report" / "validation.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.docker
def test_docker_launcher_end_to_end(tmp_path: Path, database_url: str, docker_engine: None) -> None:
    res = run_workflow(tmp_path, "experiments=[tiny]", "launcher=docker")
    assert res.returncode == 0, res.stderr[-3000:]
    runs = rows(database_url, RUNS_SQL, name="tiny")
    assert len(runs) == 4 and all(r["status"] == "ok" for r in runs), runs
    for r in runs:
        assert r["launcher"] == "docker"
        assert r["server_artifact"]["kind"] == "image"
        assert r["server_artifact"]["digest"].startswith("sha256:")
        assert r["throughput_msgs_per_s"] > 0


def default_sigint() -> None:
    """In the child before exec: SIGINT back to its default action (an ignored signal stays ignored
    across exec; a default one becomes Python's KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_interrupted_workflow_resumes_without_duplicates(tmp_path: Path, database_url: str) -> None:
    runs_dir = tmp_path / "results" / "tiny" / "runs"
    log = tmp_path / "first.log"
    with log.open("w") as log_file:
        proc = subprocess.Popen(
            snakemake_cmd(tmp_path, "experiments=[tiny]"),
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            # Ctrl-C as in a terminal: a suite started in the background of a non-interactive shell
            # inherits SIGINT ignored (POSIX), Python then installs no KeyboardInterrupt, and Snakemake
            # would run the workflow to the end, exit 0 (CI saw it).
            preexec_fn=default_sigint,
        )
    try:
        # A run counts as finished once its ingest job has started: Snakemake registers a job's
        # completion only after its output appears, so a bare record may still be "incomplete".
        ingested_dir = tmp_path / "results" / "tiny" / "ingested"
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not any(ingested_dir.glob("*.json")):
            assert proc.poll() is None, log.read_text()[-3000:]
            time.sleep(0.2)
        first = {p.name: (runs_dir / p.name).stat().st_mtime_ns for p in ingested_dir.glob("*.json")}
        assert first, "no run finished before the deadline"
        # Interrupt the whole workflow (Snakemake and the run in flight) as Ctrl-C would.  Snakemake's log
        # handler swallows a KeyboardInterrupt that lands while it writes a line (snakemake/logging.py:
        # `except (KeyboardInterrupt, SystemExit): pass`), and the first ingest is just when it logs: a
        # Ctrl-C it did not take (no "Terminating processes" within half a second) is pressed again, as a
        # user would.
        os.killpg(proc.pid, signal.SIGINT)
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
            if proc.poll() is None and "Terminating processes on user request" not in log.read_text():
                os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode != 0

    res = run_workflow(tmp_path, "experiments=[tiny]")
    assert res.returncode == 0, res.stderr[-3000:]
    # The runs that had finished were not run again.
    for name, mtime in first.items():
        assert (runs_dir / name).stat().st_mtime_ns == mtime
    runs = rows(database_url, RUNS_SQL, name="tiny")
    assert len(runs) == 4 and all(r["status"] == "ok" for r in runs)
    assert len({r["run_id"] for r in runs}) == 4
    dup = rows(database_url, "select run_id, second, count(*) from samples group by 1, 2 having count(*) > 1")
    assert dup == []


def test_failed_run_is_retried_then_recorded_with_reason(tmp_path: Path, database_url: str) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    # 1 s of work per message against a 0.5 s stall timeout: the client must give up, every attempt.
    (specs / "stall.yaml").write_text(
        "name: stall\nreproduces: none\nrepeats: 1\nphases: {warmup_s: 0, measure_s: 1}\n"
        "calibration: {repeats: 0}\n"
        "designs:\n  - {pattern: reactor, notifiers: [epoll-lt]}\n"
        "matrix: {threads: [1], work_us: [1000000], connections: [1], msg_size: [1]}\n"
    )
    run_config = tmp_path / "run.yaml"
    run_config.write_text("run: {retries: 1, lanes: 1, stall_timeout_s: 0.5}\n")
    res = run_workflow(tmp_path / "work", "experiments=[stall]", specs=specs, configfile=run_config)
    assert res.returncode == 0, res.stderr[-3000:]
    runs = rows(database_url, RUNS_SQL, name="stall")
    assert len(runs) == 1
    run = runs[0]
    assert run["status"] == "failed" and run["attempt"] == 2
    assert "stall" in run["failure_reason"] or "no progress" in run["failure_reason"]
    failures = list((tmp_path / "work" / "results" / "stall" / "failures").glob("*.attempt1.json"))
    assert len(failures) == 1
    assert json.loads(failures[0].read_text())["status"] == "failed"
    with (tmp_path / "work" / "results" / "stall" / "report" / "points.csv").open() as f:
        (row,) = list(csv.DictReader(f))
    assert row["runs_ok"] == "0" and row["runs_failed"] == "1" and row["throughput_mean"] == ""


def test_bad_spec_stops_before_anything_runs(tmp_path: Path) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "bad.yaml").write_text(
        "name: bad\nreproduces: none\ndesigns:\n  - {pattern: uring, notifiers: [select]}\n"
        "matrix: {threads: [1], work_us: [0], connections: [4], msg_size: [1]}\n"
    )
    res = run_workflow(tmp_path / "work", "experiments=[bad]", specs=specs)
    assert res.returncode != 0
    assert "bad.yaml: designs[0].notifiers[0]" in res.stderr
    assert "Traceback" not in res.stderr
    # The spec is checked against the server's pairs, which the build writes: nothing else ran (no plan, no
    # run, no database, no report).
    results = tmp_path / "work" / "results"
    made = sorted(p.relative_to(results).as_posix() for p in results.rglob("*") if p.is_file())
    assert made == ["build/binaries.json", "build/pairs.json"]
