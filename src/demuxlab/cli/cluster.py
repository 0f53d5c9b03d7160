"""``demuxlab cluster …``: provisioning, host facts, progress, quarantine and the per-pair report."""

from __future__ import annotations

import json
from pathlib import Path

import click

from demuxlab.cli import emit_json

state_option = click.option(
    "--cluster-state",
    "state",
    type=click.Path(file_okay=False),
    default="results/cluster",
    show_default=True,
    help="The sweep's cluster state (pairs/, facts/, progress.json).",
)


@click.group()
def cluster() -> None:
    """Sweeps across host pairs: provisioning, facts, progress, quarantine."""


@cluster.command()
@click.option("--inventory", required=True, type=click.Path(), help="Ansible inventory of the pairs.")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Marker written on success.")
@click.option("--playbook", default="site.yml", show_default=True, help="Playbook under playbooks/.")
def provision(inventory: str, out: str, playbook: str) -> None:
    """Run playbooks/site.yml against the inventory (Docker engine, tuning, facts, images)."""
    from demuxlab.cluster.provision import run_playbook
    from demuxlab.jsonio import write_json_atomic

    write_json_atomic(Path(out), run_playbook(Path(inventory), playbook))


@cluster.command()
@click.option("--inventory", required=True, type=click.Path(), help="Ansible inventory of the pairs.")
@click.option("--host", "host_name", required=True, help="Inventory hostname.")
@click.option("--out", type=click.Path(dir_okay=False), help="Write the facts here (else stdout).")
def facts(inventory: str, host_name: str, out: str | None) -> None:
    """Collect one host's topology and noise facts over SSH (the collector of `demuxlab facts`)."""
    from demuxlab.errors import ConfigError
    from demuxlab.remote.facts import remote_facts
    from demuxlab.remote.hostpairs import load_pairs

    source = load_pairs(inventory)
    hosts = {h.name: h for h in source.hosts()}
    if host_name not in hosts:
        raise ConfigError(f"{inventory}: host {host_name!r} is not in this inventory")
    emit_json(remote_facts(hosts[host_name], source.hosts()), out)


@cluster.command("pairs")
@click.option("--pairs-from", required=True, type=click.Path(), help="Inventory or simulated cluster file.")
@click.option("--out", type=click.Path(dir_okay=False), help="Write the JSON here (else stdout).")
def pairs_command(pairs_from: str, out: str | None) -> None:
    """The sweep's host pairs as JSON: pair names (one lane each), hosts, and whether they are simulated."""
    from demuxlab.remote.hostpairs import load_pairs

    source = load_pairs(pairs_from)
    doc = {
        "inventory": source.path,
        "simulated": source.simulated,
        "pairs": [p.name for p in source.pairs],
        "hosts": [h.name for h in source.hosts()],
    }
    emit_json(doc, out)


@cluster.command("simulated-pairs")
@click.option(
    "--pairs-from", required=True, type=click.Path(), help="A simulated cluster file (YAML or JSON)."
)
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Where its JSON copy goes.")
def simulated_pairs(pairs_from: str, out: str) -> None:
    """Write a simulated cluster file as JSON, which the run jobs read without PyYAML."""
    import yaml

    from demuxlab.errors import ConfigError
    from demuxlab.remote.hostpairs import load_pairs

    if not load_pairs(pairs_from).simulated:  # read and checked as the runs will read it
        raise ConfigError(f"{pairs_from}: not a simulated cluster file (an inventory needs no JSON copy)")
    emit_json(yaml.safe_load(Path(pairs_from).read_text()), out)


@cluster.command()
@click.argument("plans", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--pairs", required=True, type=click.Path(dir_okay=False), help="`cluster pairs` JSON.")
@click.option("--out", required=True, type=click.Path(dir_okay=False))
def sweep(plans: tuple[str, ...], pairs: str, out: str) -> None:
    """Write sweep.json: the runs each experiment's plan holds, the pairs, the inventory (for progress)."""
    from demuxlab.cluster.progress import sweep_doc

    emit_json(sweep_doc([Path(p) for p in plans], Path(pairs)), out)


@cluster.command()
@click.argument("facts", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--out", required=True, type=click.Path(dir_okay=False))
def ready(facts: tuple[str, ...], out: str) -> None:
    """Write ready.json once the hosts are provisioned and their facts collected: the runs' one cluster
    input."""
    from demuxlab.jsonio import read_json

    for path in facts:  # each one readable: a run would fail on it later
        read_json(Path(path), "host facts")
    emit_json({"facts": sorted(facts)}, out)


@cluster.command()
@state_option
@click.option("--pairs-from", type=click.Path(), help="Inventory or simulated cluster file.")
@click.option("--json", "as_json", is_flag=True, help="Print progress.json instead of a table.")
def progress(state: str, pairs_from: str | None, as_json: bool) -> None:
    """Runs done / failed / running per pair, quarantined pairs, and the sweep's remaining runs."""
    from demuxlab.cluster.progress import format_progress, progress_doc, write_progress

    names = None
    if pairs_from:
        from demuxlab.remote.hostpairs import load_pairs

        names = [p.name for p in load_pairs(pairs_from).pairs]
    slurm_state = Path(state).parent / "slurm"
    if (slurm_state / "sweep.json").exists() and not (Path(state) / "sweep.json").exists():
        # A Slurm sweep (the slurm profile): per partition and per node (demuxlab.slurm.progress).
        from demuxlab.slurm.progress import dump
        from demuxlab.slurm.progress import format_progress as format_slurm
        from demuxlab.slurm.progress import progress_doc as slurm_doc

        sdoc = slurm_doc(slurm_state)
        click.echo(dump(sdoc) if as_json else format_slurm(sdoc))
        return
    doc = progress_doc(Path(state), names)
    write_progress(Path(state), doc)
    click.echo(json.dumps(doc, indent=1) if as_json else format_progress(doc))


@cluster.command()
@state_option
@click.argument("pair")
def unquarantine(state: str, pair: str) -> None:
    """Put a quarantined pair back into service (after its fault is fixed)."""
    from demuxlab import lease
    from demuxlab.cluster.state import read_state, write_state

    with lease.acquire(pair, "unquarantine", wait_s=3600):
        st = read_state(Path(state), pair)
        if not st.quarantined:
            click.echo(f"pair {pair}: not quarantined", err=True)
            return
        st.quarantined, st.consecutive_failures = False, 0
        st.quarantine_reason = st.quarantined_at = None
        write_state(Path(state), st)
    click.echo(f"pair {pair}: back in service", err=True)


@cluster.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option("--pairs-from", required=True, type=click.Path())
@state_option
@click.option("--out", required=True, type=click.Path(dir_okay=False))
def report(spec: str, pairs_from: str, state: str, out: str) -> None:
    """Per pair of the sweep: hardware class, runs ok / failed in the database, quarantine and why.

    First, every free pair is cleared of containers that killed runs left on its hosts.
    """
    from demuxlab.cluster.progress import pairs_report
    from demuxlab.cluster.run import sweep_orphans
    from demuxlab.spec import load_checked_spec

    for line in sweep_orphans(pairs_from):
        click.echo(line, err=True)

    loaded = load_checked_spec(spec, check_pairs=False)
    rows = pairs_report(loaded, pairs_from, Path(state), Path(out))
    quarantined = [r for r in rows if r["quarantined"]]
    for row in quarantined:
        click.echo(f"pair {row['pair']} quarantined: {row['quarantine_reason']}", err=True)
    click.echo(f"wrote {out} ({len(rows)} pairs, {len(quarantined)} quarantined)", err=True)
