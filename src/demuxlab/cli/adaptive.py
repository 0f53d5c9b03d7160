"""``demuxlab adaptive``: adaptive sweeps (docs/adaptive.md). Thin: the work is :mod:`demuxlab.adaptive`."""

from __future__ import annotations

from pathlib import Path

import click

MECHANISMS = ("repeats", "steady", "points")


@click.group()
def adaptive() -> None:
    """Adaptive sweeps: sequential repeats, runs that end when steady, model-guided points."""


def _mechanisms(value: str | None) -> list[str] | None:
    if value is None:
        return None
    names = [v.strip() for v in value.split(",") if v.strip()]
    for name in names:
        if name not in MECHANISMS:
            raise click.BadParameter(
                f"{name!r} is not one of {', '.join(MECHANISMS)}", param_hint="--mechanisms"
            )
    return names


@adaptive.command("replay")
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option(
    "--records",
    required=True,
    type=click.Path(file_okay=False),
    help="Folder of run records (run-point's files) of the full fixed design, or of the experiment itself.",
)
@click.option(
    "--mechanisms",
    default=None,
    help="Only these of the spec's mechanisms (comma-separated: repeats, steady, points); default: all.",
)
@click.option("--no-models", is_flag=True, help="Guide the points by the measurements only (no CTMC fit).")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), help="Also write the comparison here.")
def replay(spec: str, records: str, mechanisms: str | None, no_models: bool, json_out: str | None) -> None:
    """Run the spec's adaptive policy over recorded runs and compare it with the full fixed design:
    run-minutes, verdicts, best designs, largest gap."""
    from demuxlab.adaptive.policy import design_of
    from demuxlab.adaptive.records import read_runs
    from demuxlab.adaptive.replay import replay as run_replay
    from demuxlab.adaptive.text import replay_lines
    from demuxlab.errors import SpecError
    from demuxlab.spec import load_checked_spec

    loaded = load_checked_spec(spec)
    if loaded.adaptive is None:
        raise SpecError(f"{spec}: adaptive: the spec has no adaptive block to replay (docs/adaptive.md)")
    chosen = _mechanisms(mechanisms)
    settings = loaded.adaptive if chosen is None else loaded.adaptive.only(chosen)
    for name in chosen or []:
        if getattr(loaded.adaptive, name) is None:
            raise SpecError(f"{spec}: adaptive.{name}: null in the spec, so --mechanisms cannot replay it")
    runs = read_runs(Path(records))
    rep = run_replay(
        design_of(loaded, settings),
        runs,
        models=not no_models,
        experiment=loaded.name,
        spec_sha256=loaded.sha256,
    )
    click.echo(f"adaptive replay of {spec} over {len(runs)} records in {records}")
    for line in replay_lines(rep):
        click.echo(line)
    if json_out:
        from demuxlab.jsonio import write_json_atomic

        write_json_atomic(Path(json_out), {"spec": spec, "records": records, **rep.comparison.to_json()})


@adaptive.command("next")
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option(
    "--records", required=True, type=click.Path(file_okay=False), help="The experiment's run records."
)
@click.option("--round", "index", required=True, type=click.IntRange(min=0), help="Which round to write.")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Where the round goes (JSON).")
@click.option(
    "--tickets",
    type=click.Path(file_okay=False),
    help="Write the round's run tickets here (<run id>.json, CONTRACTS.md §4a): what `demuxlab-run` runs.",
)
def next_round(spec: str, records: str, index: int, out: str, tickets: str | None) -> None:
    """Write round N of an adaptive experiment: its runs and why, or its stop (the workflow's checkpoint)."""
    from demuxlab.adaptive.experiment import decide, round_doc
    from demuxlab.adaptive.records import read_runs
    from demuxlab.jsonio import write_json_atomic
    from demuxlab.runpoint import relative_to_repo
    from demuxlab.spec import load_checked_spec, run_id
    from demuxlab.ticket import ticket_doc, write_tickets

    loaded = load_checked_spec(spec)
    folder = Path(records)
    runs = read_runs(folder) if folder.is_dir() and any(folder.glob("*.json")) else []
    _, outcome, _ = decide(loaded, runs)
    doc = round_doc(loaded, outcome, index)
    if tickets is not None:
        shown = relative_to_repo(Path(spec))
        asked = outcome.rounds[index].requests
        write_tickets(
            Path(tickets),
            (ticket_doc(loaded, r.point, r.repeat, run_id(loaded, r.point, r.repeat), shown) for r in asked),
        )
    write_json_atomic(Path(out), doc)
    what = f"stop: {doc['stop']}" if doc["stop"] else f"{len(doc['runs'])} runs"
    click.echo(f"{loaded.name}: adaptive round {index}: {what}", err=True)


@adaptive.command("decisions")
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option(
    "--records", required=True, type=click.Path(file_okay=False), help="The experiment's run records."
)
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Where the decisions go (JSON).")
def decisions(spec: str, records: str, out: str) -> None:
    """Write what an adaptive experiment decided, once it stopped: every round, every point measured (and
    why) or model-only."""
    from demuxlab.adaptive.experiment import decide, decisions_doc
    from demuxlab.adaptive.records import read_runs
    from demuxlab.jsonio import write_json_atomic
    from demuxlab.spec import load_checked_spec

    loaded = load_checked_spec(spec)
    design, outcome, shapes = decide(loaded, read_runs(Path(records)))
    doc = decisions_doc(loaded, design, outcome, shapes)
    write_json_atomic(Path(out), doc)
    spent, full = doc["run_s"]["spent"], doc["run_s"]["fixed_design"]
    click.echo(
        f"{loaded.name}: {doc['points']['measured']} of {doc['points']['grid']} points measured, "
        f"{spent / 60:.1f} of the fixed design's {full / 60:.1f} run-minutes; {doc['stop']}",
        err=True,
    )


@adaptive.command("store")
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option("--decisions", required=True, type=click.Path(dir_okay=False), help="Its decisions.json.")
@click.option("--done", type=click.Path(dir_okay=False), help="Touch this file once stored.")
def store(spec: str, decisions: str, done: str | None) -> None:
    """Store an adaptive experiment's decisions in the database (the dashboard draws its model-only points
    from them)."""
    from demuxlab.adaptive.records import read_decisions, store_decisions
    from demuxlab.jsonio import write_json_atomic
    from demuxlab.spec import load_spec

    loaded = load_spec(Path(spec))
    exp_id = store_decisions(loaded.name, loaded.sha256, read_decisions(Path(decisions)))
    click.echo(f"{loaded.name}: adaptive decisions stored (experiment id {exp_id})", err=True)
    if done:
        write_json_atomic(Path(done), {"experiment_id": exp_id, "decisions": decisions})
