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
def claims(spec: str, out_dir: str, method: str) -> None:
    """A verdict for every seed claim and the best design per workload: claims.csv, claims.md,
    recommendations.csv."""
    from demuxlab.claims.report import write_claims
    from demuxlab.spec import load_spec

    loaded = load_spec(Path(spec))
    for path in write_claims(loaded, Path(out_dir), method):
        click.echo(f"wrote {path}", err=True)
