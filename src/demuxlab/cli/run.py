"""The commands of one experiment's life, as the README and the Snakemake rules call them: validate,
plan, facts, pairs, artifacts, run-point, ingest, report. Each parses its options, calls the library, and
writes its output atomically (a file appears whole or not at all)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from demuxlab.cli import emit_json

spec_argument = click.argument("spec", type=click.Path(dir_okay=False))


@click.command()
@spec_argument
@click.option("--no-pairs", is_flag=True, help="Check the schema only, not the pairs of the server binary.")
def validate(spec: str, no_pairs: bool) -> None:
    """Validate an experiment spec: schema, names, and pattern × notifier pairs (via demux-server --list)."""
    from demuxlab.spec import calibration_points, expand_points, load_checked_spec

    loaded = load_checked_spec(spec, check_pairs=not no_pairs)
    points = expand_points(loaded)
    calibration = calibration_points(loaded)
    runs = len(points) * loaded.repeats + len(calibration) * loaded.calibration_repeats
    extra = (
        f" + {len(calibration)} calibration points × {loaded.calibration_repeats} repeats"
        if calibration
        else ""
    )
    click.echo(f"{spec}: ok: {len(points)} points × {loaded.repeats} repeats{extra} = {runs} runs")
    if loaded.adaptive is not None:
        from demuxlab.spec.adaptive import describe_adaptive

        click.echo(f"{spec}: {describe_adaptive(loaded, points, calibration)}")


@click.command()
@spec_argument
@click.option("--out", type=click.Path(dir_okay=False), help="Write the plan as JSON here (else stdout).")
@click.option(
    "--server-pairs",
    type=click.Path(dir_okay=False),
    help="Check the spec against these pairs (`demuxlab pairs` JSON) instead of demux-server --list.",
)
@click.option(
    "--tickets",
    type=click.Path(file_okay=False),
    help="Write each run's ticket here (<run id>.json, CONTRACTS.md §4a): what `demuxlab-run` runs.",
)
def plan(spec: str, out: str | None, server_pairs: str | None = None, tickets: str | None = None) -> None:
    """Expand a spec into its sweep points and randomized run order (run ids included), and each run's
    ticket."""
    from demuxlab.runpoint import relative_to_repo
    from demuxlab.spec import load_checked_spec, load_spec, run_id, run_order
    from demuxlab.ticket import ticket_doc, write_tickets
    from demuxlab.vocab import PATTERNS as MODELLED

    if server_pairs is None:
        loaded = load_checked_spec(spec)
    else:
        from demuxlab.designs import load_pairs_json
        from demuxlab.errors import ConfigError

        path = Path(server_pairs)
        if not path.is_file():
            raise ConfigError(f"{server_pairs}: the server's pairs not found (`demuxlab pairs` writes them)")
        loaded = load_spec(Path(spec), pairs=load_pairs_json(path.read_text(), source=server_pairs))
    order = [(point, rep, run_id(loaded, point, rep)) for point, rep in run_order(loaded)]
    # What the workflow's DAG needs of each run; the point itself is in the run's ticket only.
    runs = [
        {"run_id": rid, "point_key": point.point_key, "repeat": rep, "instrument": point.instrument}
        for point, rep, rid in order
    ]
    adaptive = loaded.adaptive is not None
    if tickets is not None:
        # An adaptive experiment's runs are decided round by round: their tickets come with each round.
        shown = relative_to_repo(Path(spec))
        write_tickets(
            Path(tickets), [] if adaptive else (ticket_doc(loaded, p, r, i, shown) for p, r, i in order)
        )
    # The launcher and the patterns the CTMC models describe: what the workflow builds and whether it runs
    # the model stages for this experiment; the phases and pinned class: what the Slurm jobs ask for.
    modelled = sorted({d.pattern for d in loaded.designs} & set(MODELLED))
    doc = {
        "experiment": loaded.name,
        "spec": str(Path(spec).resolve()),
        "spec_sha256": loaded.sha256,
        "launcher": loaded.launcher,
        "phases": loaded.phases.to_json(),
        "hardware_class": loaded.hardware_class,
        "modelled_patterns": modelled,
        # An adaptive experiment's runs are decided round by round (`demuxlab adaptive next`): none is
        # planned here; `fixed_design_runs` is how many its fixed design would have.
        "adaptive": adaptive,
        "fixed_design_runs": len(runs),
        "tickets": tickets,
        "runs": [] if adaptive else runs,
    }
    emit_json(doc, out)


@click.command()
@click.option("--out", type=click.Path(dir_okay=False), help="Write the facts here (else stdout).")
def facts(out: str | None) -> None:
    """Collect this host's topology and noise facts (NUMA nodes, cores, SMT, governor, turbo, irqbalance)."""
    from demuxlab.topology import collect_facts

    emit_json(collect_facts(), out)


@click.command()
@click.option(
    "--inventory",
    type=click.Path(),
    help="List the host pairs of this Ansible inventory (playbooks/README.md) instead.",
)
@click.option("--json", "as_json", is_flag=True, help="With --inventory: print JSON, not a table.")
def pairs(inventory: str | None, as_json: bool) -> None:
    """List the valid pattern × notifier pairs of build/bin/demux-server, or an inventory's host pairs.

    The pairs print as JSON; with --inventory, the host pairs of that inventory (name, server and client
    hosts, their pair-network addresses and CPU sets) print as a table, or as JSON with --json."""
    if inventory is not None:
        from demuxlab.inventory import format_pairs_table, load_inventory

        inv = load_inventory(Path(inventory))
        click.echo(json.dumps(inv.to_json(), indent=1) if as_json else format_pairs_table(inv))
        return
    from demuxlab.designs import valid_pairs

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
    pairs_from: str | None,
    cluster_state: str,
    lane: int,
    quarantine_after: int,
    pair_wait: float,
    noise_wait: float,
    point_key: str | None,
    repeat_hint: int | None,
) -> None:
    """Run one repeat of one sweep point and write its run record (docs/CONTRACTS.md §5).

    The spec is loaded and checked, the run found in it and its ticket built (what `demuxlab plan
    --tickets` writes); the run then goes the way of every workflow run job (`demuxlab-run TICKET`). The run
    holds its pair's lease (demuxlab.lease) from before its server starts until its server and client are
    gone; they die with this process, however it dies.
    """
    from demuxlab.runpoint import RunPointRequest, relative_to_repo, run_ticket
    from demuxlab.spec import find_run, load_checked_spec
    from demuxlab.ticket import ticket_doc, ticket_from_doc

    loaded = load_checked_spec(spec)
    found = find_run(loaded, rid, point_key, repeat_hint)
    if found is None:
        from demuxlab.errors import SpecError

        given = f" (point {point_key!r}, repeat {repeat_hint})" if point_key is not None else ""
        raise SpecError(
            f"{spec}: run id {rid!r}{given} is not a run of this spec (see `demuxlab plan {spec}`)"
        )
    doc = ticket_doc(loaded, found[0], found[1], rid, relative_to_repo(Path(spec)))
    ticket = ticket_from_doc(doc, loaded.text.encode(), f"{spec} (run-point)")
    cluster = None
    if pairs_from:
        from demuxlab.cluster.run import ClusterOptions

        cluster = ClusterOptions(
            pairs_from=pairs_from,
            state=Path(cluster_state),
            launcher=launcher_name or "remote",
            lane=lane,
            quarantine_after=quarantine_after,
            pair_wait_s=pair_wait,
            noise_wait_s=noise_wait,
        )
    req = RunPointRequest(
        out=Path(out),
        server_facts=Path(server_facts) if server_facts else None,
        client_facts=Path(client_facts) if client_facts else None,
        launcher=launcher_name,
        host_pair=host_pair,
        attempt=attempt,
        max_attempts=max_attempts,
        instrument=instrument,
        stall_timeout_s=stall_timeout,
        lease_wait_s=lease_wait,
        cluster=cluster,
    )
    result = run_ticket(ticket, req)
    click.echo(result.message, err=True)
    if result.retry:
        sys.exit(1)


@click.command()
@click.option("--launcher", "launcher_name", default="native", show_default=True, help="native | docker")
@click.option("--out", type=click.Path(dir_okay=False), help="Write the manifest here (else stdout).")
def artifacts(launcher_name: str, out: str | None) -> None:
    """Identify the code a launcher runs: binary SHA-256 hashes or image digests and labels."""
    from demuxlab.launch import get_launcher

    launcher = get_launcher(launcher_name)
    launcher.check()
    emit_json({"launcher": launcher_name, "artifacts": launcher.artifacts()}, out)


@click.command()
@click.argument("records", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--done", type=click.Path(dir_okay=False), help="Touch this file once all are ingested.")
@click.option(
    "--replace",
    is_flag=True,
    help="Replace a stored run by a different record of it (the stored one is kept in runs_history).",
)
def ingest(records: tuple[str, ...], done: str | None, replace: bool) -> None:
    """Load run records into PostgreSQL, all in one transaction; a stored run is never changed silently."""
    from demuxlab.ingest import load_record
    from demuxlab.jsonio import write_json_atomic

    # Every record read and checked before the database stack is even imported: a malformed one is
    # refused at once.
    prepared = [load_record(Path(r)) for r in records]
    from demuxlab.ingest import ingest_prepared

    results = ingest_prepared(prepared, replace="always" if replace else "never")
    for res in results:
        click.echo(res.describe(), err=True)
    if done:
        write_json_atomic(Path(done), {"ingested": [str(r) for r in records]})


@click.command()
@spec_argument
@click.option("--out-dir", required=True, type=click.Path(file_okay=False), help="Where CSV and figures go.")
@click.option(
    "--adaptive",
    "decisions",
    type=click.Path(dir_okay=False),
    help="An adaptive experiment's decisions.json: mark each point measured (and why) or model-only.",
)
def report(spec: str, out_dir: str, decisions: str | None) -> None:
    """Aggregate runs per point (mean, 95% CI) into a CSV and a throughput-vs-threads figure."""
    from demuxlab.report import write_report
    from demuxlab.spec import load_checked_spec

    loaded = load_checked_spec(spec, check_pairs=False)
    doc = None
    if decisions:
        from demuxlab.adaptive.records import read_decisions

        doc = read_decisions(Path(decisions))
    for path in write_report(loaded, Path(out_dir), doc):
        click.echo(f"wrote {path}", err=True)


@click.command("controller-lock")
@click.argument("directory", type=click.Path(file_okay=False), default=".")
@click.option("--fd", required=True, type=click.IntRange(min=0), help="The controller's open lock file.")
@click.option("--pid", required=True, type=click.IntRange(min=1), help="The controller's process id.")
def controller_lock(directory: str, fd: int, pid: int) -> None:
    """Take the workflow controller's lock on its descriptor (the workflow's onstart; refused while a live
    controller runs in the folder)."""
    from demuxlab.lease import take_controller

    take_controller(fd, directory, pid)
