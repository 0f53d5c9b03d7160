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
