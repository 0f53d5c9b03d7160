"""``demuxlab slurm …``: the Slurm sweep's progress per partition, its per-node report, unquarantine, and
the workflow's Slurm steps (the settings' check, the sweep, jobs a killed controller left, a retry's
exclusions)."""

from __future__ import annotations

from pathlib import Path

import click

state_option = click.option(
    "--slurm-state",
    "state",
    type=click.Path(file_okay=False),
    default="results/slurm",
    show_default=True,
    help="The Slurm sweep's state (nodes/, attempts/, records/).",
)


@click.group()
def slurm() -> None:
    """Slurm sweeps (the slurm profile): progress per partition, the node report, quarantine."""


@slurm.command()
@state_option
@click.option("--json", "as_json", is_flag=True, help="Print progress.json instead of tables.")
@click.option(
    "--every",
    type=click.FloatRange(min=0.1),
    help="Rewrite progress.json every this many seconds (the workflow's controller starts one so).",
)
@click.option(
    "--while-parent", type=click.IntRange(min=1), help="With --every: while this process (the parent) lives."
)
def progress(state: str, as_json: bool, every: float | None, while_parent: int | None) -> None:
    """Run jobs pending / running and attempts done / failed per partition; node health."""
    from demuxlab.slurm.progress import dump, format_progress, progress_doc, watch_progress, write_progress

    if every is not None:
        watch_progress(Path(state), every, while_parent)
        return
    doc = progress_doc(Path(state))
    write_progress(Path(state), doc)
    click.echo(dump(doc) if as_json else format_progress(doc))


@slurm.command()
@click.argument("plans", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option(
    "--settings-json",
    required=True,
    help="The workflow config's `slurm:` settings, as JSON (its `conf` too).",
)
@state_option
@click.option("--out", required=True, type=click.Path(dir_okay=False))
def check(plans: tuple[str, ...], settings_json: str, state: str, out: str) -> None:
    """Check the Slurm settings against the cluster for these plans; write settings.json (the run jobs'
    partition, account, constraint and time limit). A wrong setting is one line naming it."""
    import json

    from demuxlab.cli import emit_json
    from demuxlab.errors import ConfigError
    from demuxlab.jsonio import read_json
    from demuxlab.slurm.check import settings_doc

    try:
        settings = json.loads(settings_json)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"--settings-json: not JSON ({exc.msg})") from None
    docs = [read_json(Path(p), "plan") for p in plans]
    emit_json(settings_doc(settings, docs, Path(state)), out)


@slurm.command()
@click.argument("plans", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--out", required=True, type=click.Path(dir_okay=False))
def sweep(plans: tuple[str, ...], out: str) -> None:
    """Write sweep.json: the runs each experiment's plan holds (progress counts what remains)."""
    from demuxlab.cli import emit_json
    from demuxlab.slurm.progress import sweep_doc

    emit_json(sweep_doc(list(plans)), out)


@slurm.command("group-size")
@click.option("--run-s", type=click.FloatRange(min=0), required=True, help="A run's phases, in seconds.")
@click.option("--slack-s", type=click.FloatRange(min=0), default=30.0, show_default=True)
@click.option("--margin-s", type=click.FloatRange(min=0), default=300.0, show_default=True)
@click.option("--partition", default="", help="The run jobs' partition; empty: the cluster's default.")
def group_size(run_s: float, slack_s: float, margin_s: float, partition: str) -> None:
    """Print K for slurm.group_runs: 0, the runs of a lane one job holds (the partition's time limit, at
    most an hour of runs)."""
    from demuxlab.slurm.check import partition_max_time
    from demuxlab.slurm.lanes import auto_group_runs

    click.echo(auto_group_runs(run_s, slack_s, margin_s, partition_max_time(partition)))


@slurm.command("live-jobs")
@click.option("--workdir", default=".", type=click.Path(file_okay=False), show_default=True)
def live_jobs(workdir: str) -> None:
    """Print, as JSON, run id -> job id of the workflow's run jobs still queued or running in Slurm."""
    import json

    from demuxlab.slurm.adopt import live_run_jobs

    click.echo(json.dumps(live_run_jobs(workdir)))


@slurm.command("wait-job")
@click.argument("job", type=click.IntRange(min=1))
@click.option("--out", required=True, type=click.Path(dir_okay=False))
def wait_job(job: int, out: str) -> None:
    """Wait until a Slurm job has left the queue; write its final state (a killed controller's run job)."""
    from demuxlab.cli import emit_json
    from demuxlab.slurm.adopt import wait_for_job

    emit_json(wait_for_job(job), out)


@slurm.command()
@click.argument("run_ids", nargs=-1, required=True)
@state_option
@click.option("--usable", default="", help="The usable nodes (settings.json), comma-separated.")
def excludes(run_ids: tuple[str, ...], state: str, usable: str) -> None:
    """Print the nodes the next job of these runs (a group's) must avoid (quarantined, and those the runs
    failed on), comma-separated."""
    from demuxlab.slurm import nodes as health

    nodes = [n for n in usable.split(",") if n]
    click.echo(",".join(health.group_excludes(Path(state), list(run_ids), nodes)))


@slurm.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@state_option
@click.option("--quarantine-after", type=click.IntRange(min=0), default=3, show_default=True)
@click.option("--drain", type=click.Choice(["auto", "never"]), default="auto", show_default=True)
@click.option("--out", required=True, type=click.Path(dir_okay=False))
def report(spec: str, state: str, quarantine_after: int, drain: str, out: str) -> None:
    """Per node of the sweep: runs ok / failed, failed attempts, quarantine and why (report/nodes.csv).

    First the failures of attempts whose jobs died (a node failure, the time limit) are counted, once."""
    from demuxlab.slurm import nodes as health
    from demuxlab.slurm.progress import nodes_report
    from demuxlab.spec import load_spec

    root = Path(state)
    for path in sorted((root / "attempts").glob("*.json")):
        for line in health.settle_dead(root, path.stem, None, quarantine_after, drain == "auto"):
            click.echo(line, err=True)
    rows = nodes_report(root, load_spec(Path(spec)), Path(out))
    quarantined = [r for r in rows if r["quarantined"]]
    for row in quarantined:
        how = "drained" if row["drained"] else "excluded"
        click.echo(f"node {row['node']} quarantined ({how}): {row['quarantine_reason']}", err=True)
    click.echo(f"wrote {out} ({len(rows)} nodes, {len(quarantined)} quarantined)", err=True)


@slurm.command()
@state_option
@click.argument("node")
def unquarantine(state: str, node: str) -> None:
    """Put a quarantined node back into the sweep (resume it in Slurm first if it was drained)."""
    from demuxlab.slurm import nodes as health

    st = health.read_node(Path(state), node)
    if not st.quarantined:
        click.echo(f"node {node}: not quarantined", err=True)
        return
    was_drained = st.drained
    health.unquarantine(Path(state), node)
    hint = f" (it was drained: `scontrol update nodename={node} state=resume`)" if was_drained else ""
    click.echo(f"node {node}: back in the sweep{hint}", err=True)
