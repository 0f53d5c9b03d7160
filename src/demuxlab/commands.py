"""The thin commands the README and the Snakemake rules call: each parses options, calls the library, and
writes its output atomically (a file appears whole or not at all)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import click

from demuxlab.errors import ConfigError, DemuxlabError, SpecError
from demuxlab.paths import repo_root


def write_json_atomic(path: Path, doc: Any) -> None:
    """Write ``doc`` to ``path`` via a temporary file and rename, so readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    os.replace(tmp, path)


def read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: {what} not found") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: {what} is not valid JSON (line {exc.lineno}: {exc.msg})") from None


def git_revision() -> str | None:
    try:
        res = subprocess.run(
            ["git", "-C", str(repo_root()), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except OSError:
        return None
    if res.returncode != 0:
        return None
    rev = res.stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(repo_root()), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    return rev + ("-dirty" if dirty.stdout.strip() else "")


def _load_spec(spec_path: str, with_pairs: bool = True) -> Any:
    from demuxlab.pairs import valid_pairs
    from demuxlab.spec import load_spec

    pairs = valid_pairs() if with_pairs else None
    return load_spec(Path(spec_path), pairs=pairs)


spec_argument = click.argument("spec", type=click.Path(dir_okay=False))


@click.command()
@spec_argument
@click.option("--no-pairs", is_flag=True, help="Check the schema only, not the pairs of the server binary.")
def validate(spec: str, no_pairs: bool) -> None:
    """Validate an experiment spec: schema, names, and pattern × notifier pairs (via demux-server --list)."""
    loaded = _load_spec(spec, with_pairs=not no_pairs)
    from demuxlab.spec import calibration_points, expand_points

    points = expand_points(loaded)
    calibration = calibration_points(loaded)
    runs = len(points) * loaded.repeats + len(calibration) * loaded.calibration_repeats
    extra = (
        f" + {len(calibration)} calibration points × {loaded.calibration_repeats} repeats"
        if calibration
        else ""
    )
    click.echo(f"{spec}: ok: {len(points)} points × {loaded.repeats} repeats{extra} = {runs} runs")


@click.command()
@spec_argument
@click.option("--out", type=click.Path(dir_okay=False), help="Write the plan as JSON here (else stdout).")
@click.option(
    "--server-pairs",
    type=click.Path(dir_okay=False),
    help="Check the spec against these pairs (`demuxlab pairs` JSON) instead of demux-server --list.",
)
def plan(spec: str, out: str | None, server_pairs: str | None = None) -> None:
    """Expand a spec into its sweep points and randomized run order (run ids included)."""
    from demuxlab.ctmc.rates import PATTERNS as MODELLED
    from demuxlab.spec import load_spec, run_id, run_order

    if server_pairs is None:
        loaded = _load_spec(spec)
    else:
        from demuxlab.pairs import load_pairs_json

        path = Path(server_pairs)
        if not path.is_file():
            raise ConfigError(f"{server_pairs}: the server's pairs not found (`demuxlab pairs` writes them)")
        loaded = load_spec(Path(spec), pairs=load_pairs_json(path.read_text(), source=server_pairs))
    runs = [
        {"run_id": run_id(loaded, point, rep), "repeat": rep, "point_key": point.point_key, **point.to_json()}
        for point, rep in run_order(loaded)
    ]
    # The launcher and the patterns the CTMC models describe: what the workflow builds and whether it runs
    # the model stages for this experiment.
    modelled = sorted({d.pattern for d in loaded.designs} & set(MODELLED))
    doc = {
        "experiment": loaded.name,
        "spec_sha256": loaded.sha256,
        "launcher": loaded.launcher,
        "modelled_patterns": modelled,
        "runs": runs,
    }
    if out:
        write_json_atomic(Path(out), doc)
    else:
        click.echo(json.dumps(doc, indent=1))


@click.command()
@click.option("--out", type=click.Path(dir_okay=False), help="Write the facts here (else stdout).")
def facts(out: str | None) -> None:
    """Collect this host's topology and noise facts (NUMA nodes, cores, SMT, governor, turbo, irqbalance)."""
    from demuxlab.topology import collect_facts

    doc = collect_facts()
    if out:
        write_json_atomic(Path(out), doc)
    else:
        click.echo(json.dumps(doc, indent=1))


@click.command()
@click.option(
    "--inventory",
    type=click.Path(),
    help="List the host pairs of this Ansible inventory (playbooks/README.md) instead.",
)
@click.option("--json", "as_json", is_flag=True, help="With --inventory: print JSON, not a table.")
def pairs(inventory: str | None, as_json: bool) -> None:
    """List the valid pattern × notifier pairs of build/bin/demux-server as JSON, or with --inventory the
    host pairs of an inventory (name, server and client hosts, their pair-network addresses and CPU sets)."""
    if inventory is not None:
        from demuxlab.inventory import format_pairs_table, load_inventory

        inv = load_inventory(Path(inventory))
        click.echo(json.dumps(inv.to_json(), indent=1) if as_json else format_pairs_table(inv))
        return
    from demuxlab.pairs import valid_pairs

    click.echo(json.dumps([p.to_json() for p in valid_pairs()], indent=1))


@click.command("run-point")
@spec_argument
@click.option("--run-id", "rid", required=True, help="The run to perform (see `demuxlab plan`).")
@click.option("--point-key", help="The run's point key (with --repeat: found without listing every run).")
@click.option("--repeat", "repeat_hint", type=click.IntRange(min=0), help="The run's repeat index.")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Where to write the run record.")
@click.option("--server-facts", type=click.Path(dir_okay=False), help="Server host facts (else collected).")
@click.option("--client-facts", type=click.Path(dir_okay=False), help="Client host facts (else = server's).")
@click.option("--launcher", "launcher_name", help="Override the spec's launcher (native|docker|remote|sim).")
@click.option("--pair", "host_pair", default="local", show_default=True, help="Host pair name.")
@click.option(
    "--pairs-from",
    type=click.Path(),
    help="Run on a free healthy pair of this inventory (or simulated cluster file), under its lease.",
)
@click.option(
    "--cluster-state",
    type=click.Path(file_okay=False),
    default="results/cluster",
    show_default=True,
    help="With --pairs-from: per-pair health (pairs/) and host facts (facts/).",
)
@click.option("--lane", type=click.IntRange(min=0), default=0, show_default=True, help="With --pairs-from.")
@click.option(
    "--quarantine-after",
    type=click.IntRange(min=0),
    default=3,
    show_default=True,
    help="With --pairs-from: quarantine a pair after this many failed runs in a row (0: never).",
)
@click.option(
    "--pair-wait",
    type=click.FloatRange(min=0),
    default=3600.0,
    show_default=True,
    help="With --pairs-from: seconds to wait for a free pair.",
)
@click.option(
    "--noise-wait",
    type=click.FloatRange(min=0),
    default=60.0,
    show_default=True,
    help="With --pairs-from: seconds a noisy host may delay the run before it runs flagged.",
)
@click.option("--attempt", type=click.IntRange(min=1), default=1, show_default=True)
@click.option(
    "--max-attempts",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="A failed run exits 1 (the workflow retries it) before this attempt; then it is recorded as failed.",
)
@click.option(
    "--instrument",
    is_flag=True,
    help="Run the server with per-operation timings (--instrument); calibration points always are.",
)
@click.option(
    "--stall-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=5.0,
    show_default=True,
    help="Seconds without progress after which the client fails the run.",
)
@click.option(
    "--lease-wait",
    type=click.FloatRange(min=0),
    default=None,
    help="Seconds to wait while another run holds the pair (default: the longest a run of the spec takes).",
)
def run_point(
    spec: str,
    rid: str,
    out: str,
    server_facts: str | None,
    client_facts: str | None,
    launcher_name: str | None,
    host_pair: str,
    attempt: int,
    max_attempts: int,
    instrument: bool,
    stall_timeout: float,
    lease_wait: float | None,
    pairs_from: str | None = None,
    cluster_state: str = "results/cluster",
    lane: int = 0,
    quarantine_after: int = 3,
    pair_wait: float = 3600.0,
    noise_wait: float = 60.0,
    point_key: str | None = None,
    repeat_hint: int | None = None,
) -> None:
    """Run one repeat of one sweep point and write its run record (docs/CONTRACTS.md §5).

    The run holds its pair's lease (demuxlab.lease) from before its server starts until its server and
    client are gone; they die with this process, however it dies.
    """
    from demuxlab.launch import RunRequest, get_launcher
    from demuxlab.plan import plan_pinning
    from demuxlab.spec import find_run

    loaded = _load_spec(spec)
    found = find_run(loaded, rid, point_key, repeat_hint)
    if found is None:
        given = f" (point {point_key!r}, repeat {repeat_hint})" if point_key is not None else ""
        raise SpecError(
            f"{spec}: run id {rid!r}{given} is not a run of this spec (see `demuxlab plan {spec}`)"
        )
    point, repeat = found
    if pairs_from:
        _run_point_on_cluster(
            loaded, point, repeat, rid, Path(out), Path(spec), pairs_from, Path(cluster_state), launcher_name,
            lane, quarantine_after, pair_wait, noise_wait, attempt, max_attempts, instrument, stall_timeout,
        )  # fmt: skip
        return
    from demuxlab.topology import collect_facts

    server_host = read_json(Path(server_facts), "server facts") if server_facts else collect_facts()
    client_host = read_json(Path(client_facts), "client facts") if client_facts else server_host
    same_host = server_host.get("hostname") == client_host.get("hostname")
    pinning = plan_pinning(server_host, client_host, point.threads, point.client_threads, same_host)
    launcher = get_launcher(launcher_name or loaded.launcher)
    req = RunRequest(
        run_id=rid,
        experiment={
            "name": loaded.name,
            "spec_sha256": loaded.sha256,
            "git_rev": git_revision(),
            "spec_path": _relative(Path(spec)),
            "spec_text": loaded.text,
        },
        point=point,
        repeat=repeat,
        phases=loaded.phases,
        pinning=pinning,
        hosts={"server": server_host, "client": client_host},
        attempt=attempt,
        host_pair=host_pair,
        instrument=bool(instrument) or point.instrument,
        stall_timeout_s=stall_timeout,
    )
    record = run_leased(launcher, req, lease_wait)
    _write_run_record(record, Path(out), rid, point, repeat, attempt, max_attempts)


def _run_point_on_cluster(
    loaded: Any,
    point: Any,
    repeat: int,
    rid: str,
    out_path: Path,
    spec_path: Path,
    pairs_from: str,
    state: Path,
    launcher_name: str | None,
    lane: int,
    quarantine_after: int,
    pair_wait: float,
    noise_wait: float,
    attempt: int,
    max_attempts: int,
    instrument: bool,
    stall_timeout: float,
) -> None:
    from demuxlab.cluster.run import ClusterOptions, run_on_cluster, update_progress

    opts = ClusterOptions(
        pairs_from=pairs_from,
        state=state,
        launcher=launcher_name or "remote",
        lane=lane,
        quarantine_after=quarantine_after,
        pair_wait_s=pair_wait,
        noise_wait_s=noise_wait,
    )
    experiment = {
        "name": loaded.name,
        "spec_sha256": loaded.sha256,
        "git_rev": git_revision(),
        "spec_path": _relative(spec_path),
        "spec_text": loaded.text,
    }
    record = run_on_cluster(
        loaded,
        point,
        repeat,
        rid,
        experiment,
        opts,
        attempt=attempt,
        stall_timeout_s=stall_timeout,
        instrument=bool(instrument) or point.instrument,
        failures_dir=out_path.parent.parent / "failures",
    )
    try:
        _write_run_record(record, out_path, rid, point, repeat, attempt, max_attempts)
    finally:
        update_progress(opts)


def _write_run_record(
    record: dict[str, Any], out_path: Path, rid: str, point: Any, repeat: int, attempt: int, max_attempts: int
) -> None:
    if record["status"] == "failed" and attempt < max_attempts:
        # Keep the failed attempt's record beside the runs; the workflow retries the job.
        failed = out_path.parent.parent / "failures" / f"{rid}.attempt{attempt}.json"
        write_json_atomic(failed, record)
        click.echo(f"run {rid}: attempt {attempt} failed: {record['failure_reason']}", err=True)
        sys.exit(1)
    write_json_atomic(out_path, record)
    status = record["status"]
    if status == "ok":
        tput = (record.get("stats") or {}).get("throughput_msgs_per_s")
        click.echo(f"run {rid}: {point.point_key} repeat {repeat}: ok, {tput:,.0f} msgs/s", err=True)
    else:
        click.echo(
            f"run {rid}: {point.point_key} repeat {repeat}: failed: {record['failure_reason']}", err=True
        )


def run_leased(launcher: Any, req: Any, lease_wait: float | None) -> dict[str, Any]:
    """``launcher.run(req)`` holding ``req.host_pair``'s lease; SIGTERM unwinds it (server stopped)."""
    import dataclasses
    import signal

    from demuxlab import lease as pair_lease
    from demuxlab.errors import LaunchError
    from demuxlab.launch.base import SERVER_START_TIMEOUT_S, SERVER_STOP_TIMEOUT_S, total_s

    if lease_wait is None:  # another run of this spec ends within this
        lease_wait = total_s(req.phases) + req.stall_timeout_s + SERVER_START_TIMEOUT_S
        lease_wait += SERVER_STOP_TIMEOUT_S + 60.0

    def stop(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        raise LaunchError(f"run {req.run_id}: terminated (SIGTERM), run stopped", exit_code=143)

    signal.signal(signal.SIGTERM, stop)
    pair, rid = req.host_pair, req.run_id
    busy = pair_lease.holder(pair)
    if busy is not None:
        click.echo(f"run {rid}: waiting up to {lease_wait:g} s: {pair_lease.describe(pair, busy)}", err=True)
    with pair_lease.acquire(pair, rid, wait_s=lease_wait) as held:
        ended = launcher.end_orphans(pair)
        if ended:
            click.echo(f"run {rid}: ended {len(ended)} orphan(s) left on pair {pair!r}", err=True)
        record: dict[str, Any] = launcher.run(dataclasses.replace(req, lease=held))
    return record


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(repo_root()))
    except ValueError:
        return str(path)


@click.command()
@click.option("--launcher", "launcher_name", default="native", show_default=True, help="native | docker")
@click.option("--out", type=click.Path(dir_okay=False), help="Write the manifest here (else stdout).")
def artifacts(launcher_name: str, out: str | None) -> None:
    """Identify the code a launcher runs: binary SHA-256 hashes or image digests and labels."""
    from demuxlab.launch import get_launcher

    launcher = get_launcher(launcher_name)
    launcher.check()
    doc = {"launcher": launcher_name, "artifacts": launcher.artifacts()}
    if out:
        write_json_atomic(Path(out), doc)
    else:
        click.echo(json.dumps(doc, indent=1))


@click.command()
@click.argument("records", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--done", type=click.Path(dir_okay=False), help="Touch this file once all are ingested.")
def ingest(records: tuple[str, ...], done: str | None) -> None:
    """Load run records into PostgreSQL; idempotent per run id, all records in one transaction."""
    from demuxlab.ingest import ingest_files

    results = ingest_files([Path(r) for r in records])
    for res in results:
        click.echo(f"ingested {res}", err=True)
    if done:
        write_json_atomic(Path(done), {"ingested": [str(r) for r in records]})


@click.command()
@spec_argument
@click.option("--out-dir", required=True, type=click.Path(file_okay=False), help="Where CSV and figures go.")
def report(spec: str, out_dir: str) -> None:
    """Aggregate runs per point (mean, 95% CI) into a CSV and a throughput-vs-threads figure."""
    from demuxlab.report import write_report

    loaded = _load_spec(spec, with_pairs=False)
    for path in write_report(loaded, Path(out_dir)):
        click.echo(f"wrote {path}", err=True)


__all__ = [
    "DemuxlabError",
    "artifacts",
    "facts",
    "ingest",
    "pairs",
    "plan",
    "report",
    "run_point",
    "validate",
]
