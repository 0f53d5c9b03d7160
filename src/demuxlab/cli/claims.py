"""``demuxlab claims``: a verdict for every seed claim and the best design per workload, from the database
(the workflow's ``claims`` rule). Thin: the work is :func:`demuxlab.claims.report.write_claims`."""

from __future__ import annotations

from pathlib import Path

import click

from demuxlab.vocab import METHOD_SSA, SOLVER_METHODS


@click.command("claims")
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option("--out-dir", required=True, type=click.Path(file_okay=False), help="Where the files go.")
@click.option(
    "--method",
    default=METHOD_SSA,
    type=click.Choice(SOLVER_METHODS),
    show_default=True,
    help="Which stored predictions the model claims and the recommendation use.",
)
@click.option(
    "--adaptive",
    "decisions",
    type=click.Path(dir_okay=False),
    help="An adaptive experiment's decisions.json: claims.md names its model-only points (never evidence).",
)
@click.option(
    "--calibrations",
    type=click.Path(dir_okay=False),
    help="The experiment's calibrations.json: the recommendation names each design without a calibration "
    "with its refusal (model_missing).",
)
def claims(
    spec: str, out_dir: str, method: str, decisions: str | None, calibrations: str | None = None
) -> None:
    """A verdict for every seed claim and the best design per workload: claims.csv, claims.md,
    recommendations.csv."""
    from demuxlab.claims.report import write_claims
    from demuxlab.spec import load_spec

    loaded = load_spec(Path(spec))
    why = None
    if calibrations:
        from demuxlab.validation.files import read_missing_reasons

        why = read_missing_reasons(Path(calibrations), loaded.sha256)
    notes: list[str] = []
    if decisions:
        from demuxlab.adaptive.records import read_decisions
        from demuxlab.adaptive.text import decisions_notes

        notes = decisions_notes(read_decisions(Path(decisions)))
    for path in write_claims(loaded, Path(out_dir), method, extra_notes=notes, why_missing=why):
        click.echo(f"wrote {path}", err=True)
