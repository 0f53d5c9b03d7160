"""``demuxlab bundle``: create, verify, import, reproduce and rerun reproducibility bundles."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from demuxlab.bundle.safety import Limits

_GIB = 1 << 30
max_size_option = click.option(
    "--max-size",
    "max_size_gib",
    type=click.FloatRange(min=0, min_open=True),
    default=16.0,
    show_default=True,
    help="Refuse archives that decompress to more than this many GiB (or hold a bigger file).",
)


def _limits(max_size_gib: float) -> Limits:
    from demuxlab.bundle.safety import Limits

    return Limits.scaled(int(max_size_gib * _GIB))


@click.group()
def bundle() -> None:
    """Reproducibility bundles a paper can attach (one verified, importable archive per paper)."""


@bundle.command()
@click.argument("experiments", nargs=-1, required=True)
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="FILE.tar.zst or FILE.tar.gz")
@click.option(
    "--workdir",
    type=click.Path(file_okay=False),
    help="The workflow's working directory, holding results/ (default: workflows/ of the repository).",
)
@click.option(
    "--experiments-dir", type=click.Path(file_okay=False), help="Where the specs are (default: experiments/)."
)
@click.option("--database", "url", help="Database URL (default: DEMUXLAB_DATABASE_URL or the embedded one).")
@click.option("--images", is_flag=True, help="Also `docker save` the container images the runs used.")
@click.option(
    "--workflow-config-json", help="The workflow's effective configuration as JSON (the rule passes it)."
)
def create(
    experiments: tuple[str, ...],
    out: str,
    workdir: str | None,
    experiments_dir: str | None,
    url: str | None,
    images: bool,
    workflow_config_json: str | None,
) -> None:
    """Bundle EXPERIMENT... (as the workflow left them) into one deterministic archive."""
    from demuxlab import paths
    from demuxlab.bundle.archive import BundleError
    from demuxlab.bundle.create import Options
    from demuxlab.bundle.create import create as run_create

    config = None
    if workflow_config_json:
        try:
            config = json.loads(workflow_config_json)
        except json.JSONDecodeError as exc:
            raise BundleError(f"--workflow-config-json: not JSON ({exc.msg})") from None
    opts = Options(
        experiments=list(experiments),
        out=Path(out),
        workdir=Path(workdir) if workdir else paths.repo_root() / "workflows",
        experiments_dir=Path(experiments_dir) if experiments_dir else paths.experiments_dir(),
        url=url,
        images=images,
        workflow_config=config,
    )
    doc = run_create(opts)
    size = Path(out).stat().st_size
    runs = sum(e["runs"] for e in doc["experiments"])
    click.echo(f"{out}: {len(doc['experiments'])} experiment(s), {runs} runs, {size / 1e6:.1f} MB")


@bundle.command()
@click.argument("file", type=click.Path(dir_okay=False))
@max_size_option
def verify(file: str, max_size_gib: float) -> None:
    """Check every checksum and the RO-Crate; name each tampered, missing or extra file."""
    from demuxlab.bundle.ops import verify as run_verify

    problems, n = run_verify(Path(file), _limits(max_size_gib))
    for problem in problems:
        click.echo(f"{file}: {problem}", err=True)
    if problems:
        raise click.exceptions.Exit(1)
    click.echo(f"{file}: ok: {n} files match the manifest and the RO-Crate")


@bundle.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--database", "url", help="Load into this database (SQLAlchemy URL) instead of an embedded one."
)
@click.option(
    "--home",
    type=click.Path(file_okay=False),
    help="State folder of the embedded database to load into (default: .demuxlab/bundles, made on demand).",
)
@max_size_option
def import_(file: str, url: str | None, home: str | None, max_size_gib: float) -> None:
    """Load a bundle into a demuxlab database, idempotently, leaving other experiments alone."""
    from demuxlab.bundle.ops import default_import_home, import_bundle, target_url

    target = target_url(url, Path(home) if home else None)
    res = import_bundle(Path(file), target, _limits(max_size_gib))
    names = ", ".join(f"{n} ({s[:12]})" for n, s in res.experiments)
    replaced = (
        f"; {res.replaced} stored runs differed and were replaced, kept in runs_history"
        if res.replaced
        else ""
    )
    click.echo(f"imported {names}: {res.runs} runs, {res.samples} samples{replaced}")
    if not url:
        click.echo(
            f"database: {target}\n(use it: DEMUXLAB_HOME={Path(home) if home else default_import_home()} "
            "demuxlab db psql, or DEMUXLAB_DATABASE_URL='<that URL>' for the dashboard)"
        )


@bundle.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Where regenerated files go.")
@click.option(
    "--tolerance",
    type=click.FloatRange(min=0),
    default=None,
    help="Largest RMS pixel difference (0–255) a figure may have (default: the bundle's, 1.0).",
)
@max_size_option
def reproduce(file: str, out: str, tolerance: float | None, max_size_gib: float) -> None:
    """Regenerate every figure and table from the bundle alone and compare each with the bundled one."""
    from demuxlab.bundle.create import FIGURE_RMS_TOLERANCE
    from demuxlab.bundle.ops import reproduce as run_reproduce

    checks = run_reproduce(
        Path(file), Path(out), FIGURE_RMS_TOLERANCE if tolerance is None else tolerance, _limits(max_size_gib)
    )
    for c in checks:
        click.echo(f"{c.status:9} {c.path}: {c.detail}")
    bad = [c for c in checks if c.status == "differs"]
    unchecked = sum(1 for c in checks if c.status == "unchecked")
    ok = sum(1 for c in checks if c.status == "ok")
    click.echo(f"{ok} reproduced, {len(bad)} differ, {unchecked} not regenerated; output in {out}")
    if bad or not checks:
        raise click.exceptions.Exit(1)


@bundle.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--profile", type=click.Choice(["local", "cluster"]), default="local", show_default=True)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False),
    help="Where the extracted bundle, the specs and the workflow's results go (default: ./rerun-<bundle>).",
)
@click.option("--database", "url", help="Database to record the reruns in (default: as `import`).")
@click.option(
    "--home", type=click.Path(file_okay=False), help="Embedded database state folder (as `import`)."
)
@click.option(
    "--suffix", default="rerun", show_default=True, help="The reruns are named <experiment>-<suffix>."
)
@max_size_option
def rerun(
    file: str,
    profile: str,
    workdir: str | None,
    url: str | None,
    home: str | None,
    suffix: str,
    max_size_gib: float,
) -> None:
    """Run the bundle's experiments again from its binaries and specs, as new experiments linked to them."""
    from demuxlab.bundle.ops import rerun as run_rerun
    from demuxlab.bundle.ops import target_url

    stem = Path(file).name.split(".tar")[0]
    target = target_url(url, Path(home) if home else None)
    res = run_rerun(
        Path(file),
        profile,
        Path(workdir) if workdir else Path(f"rerun-{stem}"),
        target,
        suffix,
        _limits(max_size_gib),
    )
    for new, orig in res.experiments:
        click.echo(f"rerun {new} (of {orig}): results in {res.workdir / 'work' / 'results' / new}")
