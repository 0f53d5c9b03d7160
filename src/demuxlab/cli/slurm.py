"""``demuxlab slurm …``: the Slurm sweep's progress per partition, its per-node report, unquarantine."""

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
def progress(state: str, as_json: bool) -> None:
    """Run jobs pending / running and attempts done / failed per partition; node health."""
    from demuxlab.slurm.progress import dump, format_progress, progress_doc, write_progress

    doc = progress_doc(Path(state))
    write_progress(Path(state), doc)
    click.echo(dump(doc) if as_json else format_progress(doc))


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
