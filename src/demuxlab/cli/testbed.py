"""``demuxlab testbed up|down|status``: the test cluster on this machine (:mod:`demuxlab.testbed`)."""

from __future__ import annotations

import json
import time

import click


@click.group()
def testbed() -> None:
    """The test cluster on this machine: K pairs of hosts reached over real SSH (playbooks/README.md)."""


@testbed.command("up")
@click.option("--pairs", type=click.IntRange(min=1, max=8), default=2, show_default=True)
@click.option(
    "--slurm",
    is_flag=True,
    help="Also run Slurm on the hosts (slurmctld, slurmdbd, a slurmd each; the checkout shared with them).",
)
@click.option(
    "--share",
    "shared",
    multiple=True,
    type=click.Path(file_okay=False),
    help="With --slurm: another folder the hosts share at the same path (e.g. a workflow's working folder).",
)
def testbed_up(pairs: int, slurm: bool, shared: tuple[str, ...]) -> None:
    """Create the testbed (host image built once and cached) and write inventories/testbed."""
    from demuxlab.testbed import up

    t0 = time.monotonic()
    if slurm:
        from demuxlab.slurm import testbed as slurm_testbed

        state = slurm_testbed.up(pairs, log=lambda msg: click.echo(msg, err=True), shared=shared)
    else:
        state = up(pairs, log=lambda msg: click.echo(msg, err=True))
    for h in state["hosts"]:
        note = " (CPUs shared with other hosts)" if h["cpus_shared"] else ""
        click.echo(f"{h['name']:<12} {h['address']:<15} cpus {h['cpus']}{note}")
    how = "built" if state["image_built"] else "cached"
    click.echo(
        f"testbed {state['id']}: {len(state['hosts'])} hosts up in {time.monotonic() - t0:.1f} s "
        f"(image {how}); inventory {state['inventory']}"
    )
    if "slurm" in state:
        sl = state["slurm"]
        click.echo(
            f"slurm: cluster {sl['cluster']}, controller {sl['controller']}, partitions "
            f"{', '.join(sl['partitions'])}, accounts {', '.join(sl['accounts'])}; client commands: "
            f"SLURM_CONF={sl['conf']}"
        )


@testbed.command("down")
@click.option("--purge", is_flag=True, help="Also remove the cached host image.")
def testbed_down(purge: bool) -> None:
    """Remove everything `testbed up` made (the cached host image only with --purge)."""
    from demuxlab.testbed import down

    removed = down(purge=purge)
    for item in removed:
        click.echo(f"removed {item}")
    if not removed:
        click.echo("testbed: nothing to remove")


@testbed.command("status")
@click.option("--json", "as_json", is_flag=True)
def testbed_status(as_json: bool) -> None:
    """Say what exists: image, network, volumes, each host's container."""
    from demuxlab.testbed import status

    doc = status()
    if as_json:
        click.echo(json.dumps(doc, indent=1))
        return
    click.echo(f"testbed {doc['id']}: image {doc['image']} {'present' if doc['image_present'] else 'absent'}")
    click.echo(f"network: {', '.join(doc['network']) or 'none'}; volumes: {len(doc['volumes'])}")
    for h in doc["hosts"]:
        state = "running" if h["running"] else ("stopped" if h["exists"] else "missing")
        click.echo(f"{h['name']:<12} {h['address']:<15} cpus {h['cpus']:<4} {state}")
    if not doc["hosts"]:
        click.echo("no hosts")
    for name in doc["unknown_containers"]:
        click.echo(f"container {name}: labelled as this testbed's but not in its state")
    click.echo(f"inventory: {doc['inventory'] or 'none'}")
