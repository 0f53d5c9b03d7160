"""``demuxlab model``: predictions, calibration and the paper's rates, and the workflow's model stages.

Thin: each command parses its options and calls the library — :mod:`demuxlab.validation.manual` (predict,
calibrate), :mod:`demuxlab.ctmc.rates` (rates), :mod:`demuxlab.validation.stages` (the ``*-experiment``
stages) — imported inside the command, so ``demuxlab --help`` imports no numpy.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from demuxlab.vocab import METHOD_SSA, SOLVER_METHODS


class ModelledPattern(click.ParamType[str]):
    """A pattern the CTMC package has a model of (:data:`demuxlab.ctmc.rates.PATTERNS`), looked up when a
    value is given: the list grows with the models, and ``demuxlab --help`` imports no numpy."""

    name = "pattern"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from demuxlab.ctmc.rates import PATTERNS

        return str(click.Choice(PATTERNS).convert(value, param, ctx))


@click.group()
def model() -> None:
    """CTMC performance models of every pattern (seed 001 for HSHA and LF)."""


@model.command()
@click.option("--pattern", required=True, type=ModelledPattern(), help="a modelled pattern: hsha, lf, ...")
@click.option("--threads", "threads_text", required=True, help="total threads: 4, 1-16 or 2,4,8")
@click.option("--work-us", "work_text", required=True, help="work per message in µs (or a list 10,20,50)")
@click.option("--method", default=METHOD_SSA, type=click.Choice(SOLVER_METHODS), show_default=True)
@click.option("--connections", default=512, type=click.IntRange(min=1), show_default=True)
@click.option("--rel-ci", default=0.01, type=float, show_default=True, help="SSA: target relative CI")
@click.option("--seed", default=0, type=int, show_default=True)
@click.option("--calibration", "calibration_id", type=int, default=None, help="stored calibration id")
@click.option(
    "--cores", type=click.IntRange(min=1), default=None, help="the server's cores (default: one per thread)"
)
@click.option("--notifier", default=None, help="the notifier (epoll-et: no re-arm with the paper's rates)")
@click.option("--json", "as_json", is_flag=True, help="one JSON line per point")
def predict(
    pattern: str,
    threads_text: str,
    work_text: str,
    method: str,
    connections: int,
    rel_ci: float,
    seed: int,
    calibration_id: int | None,
    cores: int | None,
    notifier: str | None,
    as_json: bool,
) -> None:
    """Predict throughputs (msgs/s) for each thread count."""
    from demuxlab.ctmc.params import parse_float_list, parse_int_list
    from demuxlab.validation.manual import predict_grid

    threads = parse_int_list(threads_text)
    works = parse_float_list(work_text, "work-us", zero=True)
    predictions = predict_grid(
        pattern,
        threads,
        works,
        method=method,
        connections=connections,
        rel_ci=rel_ci,
        seed=seed,
        calibration_id=calibration_id,
        cores=cores,
        notifier=notifier,
    )
    if not as_json:
        click.echo(f"{'pattern':<8}{'threads':>8}{'work_us':>9}{'method':>7}{'msgs/s':>14}{'ci_rel':>9}")
    stalled: list[str] = []
    for p in predictions:  # printed as they come
        d = p.as_dict()
        if calibration_id is not None:
            d["calibration_id"] = calibration_id
        if not p.settled:  # no value: a stalled fluid's is no answer (Prediction.settled)
            d |= {"throughput_msgs_per_s": None, "settled": False}
            if p.failure:
                d["failure"] = p.failure
            stalled.append(
                f"{p.threads} threads at {p.work_us:g} µs" + (f" ({p.failure})" if p.failure else "")
            )
        if as_json:
            click.echo(json.dumps(d))
        else:
            ci = "-" if p.ci_halfwidth_rel is None else f"{p.ci_halfwidth_rel:.4f}"
            thr = f"{p.throughput_msgs_per_s:>14.0f}" if p.settled else f"{'-':>14}"
            click.echo(f"{pattern:<8}{p.threads:>8}{p.work_us:>9g}{method:>7}{thr}{ci:>9}")
    if stalled:
        from demuxlab.validation.prediction import FLUID_STALLED

        # a stalled chain is a small one: its exact solution is within reach too (ctmc.predict.predict_small)
        click.echo(
            f"{', '.join(stalled)}: no value, {FLUID_STALLED} (--method ssa) or the exact solution (--method "
            "exact)",
            err=True,
        )


@model.command()
@click.option("--run-record", "records", required=True, multiple=True, type=click.Path(path_type=Path))
@click.option("--store", is_flag=True, help="store the calibration in the database")
def calibrate(records: tuple[Path, ...], store: bool) -> None:
    """Fit the rates from lowest-concurrency instrumented run records (one JSON line per pattern)."""
    from demuxlab.validation.manual import calibrate_records

    for out in calibrate_records(records, store=store):
        click.echo(json.dumps(out))


@model.command()
@click.option("--json", "as_json", is_flag=True)
def rates(as_json: bool) -> None:
    """Print the paper's rates (seed 001 §V-A, per µs) for every modelled pattern."""
    from demuxlab.ctmc.rates import PATTERNS, RATE_FIELDS, paper_rates

    for pattern in PATTERNS:
        r = paper_rates(pattern).as_dict()
        if as_json:
            click.echo(json.dumps({"pattern": pattern, "rates_per_us": r}))
        else:
            click.echo(f"{pattern}:")
            for k in RATE_FIELDS:
                click.echo(f"  {k:<4} = 1/{1.0 / r[k]:.4g} µs⁻¹  ({r[k]:.6g} per µs)")


# -- the workflow's model stages (demuxlab.validation.stages) ---------------------------------------------


def _spec(path: str) -> Any:
    from demuxlab.spec import load_spec

    return load_spec(Path(path))


@model.command("calibrate-experiment")
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="The calibrations as JSON.")
def calibrate_experiment(spec: str, out: str) -> None:
    """Fit and store the rates of every modelled pattern × notifier from the ingested calibration runs."""
    from demuxlab.validation.stages import calibrate_stage

    for outcome in calibrate_stage(_spec(spec), Path(out)):
        click.echo(outcome.message, err=True)


@model.command("predict-experiment")
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option(
    "--calibrations",
    "calibrations_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Output of calibrate-experiment; without it only the paper's rates are used.",
)
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="The predictions as JSON.")
@click.option("--method", default=METHOD_SSA, type=click.Choice(SOLVER_METHODS), show_default=True)
@click.option("--rel-ci", default=0.01, type=float, show_default=True, help="SSA: target relative CI")
@click.option("--seed", default=0, type=int, show_default=True)
@click.option("--jobs", default=1, type=click.IntRange(min=0), show_default=True, help="0: one per CPU")
def predict_experiment(
    spec: str,
    calibrations_path: Path | None,
    out: str,
    method: str,
    rel_ci: float,
    seed: int,
    jobs: int,
) -> None:
    """Predict every measured point of a modelled pattern (paper and calibrated rates); store them."""
    from demuxlab.validation.prediction import predictions_message
    from demuxlab.validation.stages import predict_stage

    entries = predict_stage(
        _spec(spec), calibrations_path, Path(out), method=method, rel_ci=rel_ci, seed=seed, jobs=jobs
    )
    click.echo(predictions_message(entries), err=True)


@model.command("validate-experiment")
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option(
    "--out-dir", required=True, type=click.Path(file_okay=False), help="Where the table and figure go."
)
@click.option("--method", default=METHOD_SSA, type=click.Choice(SOLVER_METHODS), show_default=True)
def validate_experiment(spec: str, out_dir: str, method: str) -> None:
    """Model vs measurement per modelled point, with relative errors: CSVs and a figure (seed 001 Fig. 3)."""
    from demuxlab.validation.stages import write_validation

    for path in write_validation(_spec(spec), Path(out_dir), method):
        click.echo(f"wrote {path}", err=True)
