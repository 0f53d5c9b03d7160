"""``demuxlab model``: predictions, calibration and the paper's rates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from demuxlab.errors import DemuxlabError
from demuxlab.vocab import METHOD_SSA, SOLVER_METHODS


def parse_int_list(text: str, what: str = "threads") -> list[int]:
    """'1-16', '2,4,8', '1-4,8' → sorted unique ints."""
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        try:
            if "-" in part:
                lo_s, hi_s = part.split("-", 1)
                lo, hi = int(lo_s), int(hi_s)
                if lo > hi:
                    raise ValueError
                out.update(range(lo, hi + 1))
            else:
                out.add(int(part))
        except ValueError:
            raise DemuxlabError(f"--{what}: bad list or range {text!r} (e.g. 1-16 or 2,4,8)") from None
    if not out or min(out) < 1:
        raise DemuxlabError(f"--{what}: values must be positive integers, got {text!r}")
    return sorted(out)


def parse_float_list(text: str, what: str) -> list[float]:
    try:
        vals = [float(v) for v in text.split(",")]
    except ValueError:
        raise DemuxlabError(f"--{what}: bad number list {text!r}") from None
    if any(not (v > 0) for v in vals):
        raise DemuxlabError(f"--{what}: values must be positive, got {text!r}")
    return vals


class ModelledPattern(click.ParamType[str]):
    """A pattern the CTMC package has a model of (:data:`demuxlab.ctmc.rates.PATTERNS`), looked up when a
    value is given: the list grows with the models, and ``demuxlab --help`` imports no numpy."""

    name = "pattern"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from demuxlab.ctmc.rates import PATTERNS

        return str(click.Choice(PATTERNS).convert(value, param, ctx))


@click.group()
def model() -> None:
    """CTMC performance models of HSHA and LF (seed 001)."""


@model.command()
@click.option("--pattern", required=True, type=ModelledPattern(), help="a modelled pattern: hsha, lf, ...")
@click.option("--threads", "threads_text", required=True, help="total threads: 4, 1-16 or 2,4,8")
@click.option("--work-us", "work_text", required=True, help="work per message in µs (or a list 10,20,50)")
@click.option("--method", default=METHOD_SSA, type=click.Choice(SOLVER_METHODS), show_default=True)
@click.option("--connections", default=512, type=click.IntRange(min=1), show_default=True)
@click.option("--rel-ci", default=0.01, type=float, show_default=True, help="SSA: target relative CI")
@click.option("--seed", default=0, type=int, show_default=True)
@click.option("--calibration", "calibration_id", type=int, default=None, help="stored calibration id")
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
    as_json: bool,
) -> None:
    """Predict throughputs (msgs/s) for each thread count."""
    from demuxlab.ctmc.predict import predict as run_predict
    from demuxlab.ctmc.rates import Rates, min_threads

    threads = parse_int_list(threads_text)
    works = parse_float_list(work_text, "work-us")
    if threads[0] < min_threads(pattern):
        raise DemuxlabError(
            f"--threads: {pattern} needs at least {min_threads(pattern)} threads, got {threads[0]}"
        )
    rates: Rates | None = None
    if calibration_id is not None:
        from demuxlab.validation.store import load_calibration

        cal_pattern, _, rates = load_calibration(calibration_id)
        if cal_pattern != pattern:
            raise DemuxlabError(f"--calibration {calibration_id}: calibrates {cal_pattern}, not {pattern}")
    if not as_json:
        click.echo(f"{'pattern':<8}{'threads':>8}{'work_us':>9}{'method':>7}{'msgs/s':>14}{'ci_rel':>9}")
    for w in works:
        for n in threads:
            p = run_predict(
                pattern, n, w, method=method, connections=connections, rates=rates, rel_ci=rel_ci, seed=seed
            )
            d = p.as_dict()
            if calibration_id is not None:
                d["calibration_id"] = calibration_id
            if as_json:
                click.echo(json.dumps(d))
            else:
                ci = "-" if p.ci_halfwidth_rel is None else f"{p.ci_halfwidth_rel:.4f}"
                click.echo(f"{pattern:<8}{n:>8}{w:>9g}{method:>7}{p.throughput_msgs_per_s:>14.0f}{ci:>9}")


def _read_record(path: Path) -> dict[str, Any]:
    from demuxlab.jsonio import read_json

    data = read_json(path, "run record")
    if not isinstance(data, dict) or data.get("format") != "demuxlab.run/1":
        raise DemuxlabError(f"{path}: format: not a demuxlab.run/1 run record")
    if not isinstance(data.get("server"), dict):
        raise DemuxlabError(f"{path}: server: no server exit JSON in this record")
    return data


def _measured(rec: dict[str, Any]) -> float | None:
    client = rec.get("client")
    value = client.get("throughput_msgs_per_s") if isinstance(client, dict) else None
    return float(value) if isinstance(value, int | float) and value > 0 else None


def _connections(rec: dict[str, Any]) -> int | None:
    point = rec.get("point")
    value = point.get("connections") if isinstance(point, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@model.command()
@click.option("--run-record", "records", required=True, multiple=True, type=click.Path(path_type=Path))
@click.option("--store", is_flag=True, help="store the calibration in the database")
def calibrate(records: tuple[Path, ...], store: bool) -> None:
    """Fit the rates from lowest-concurrency instrumented run records (one JSON line per pattern)."""
    from demuxlab.ctmc.calibrate import SelfCheck
    from demuxlab.ctmc.calibrate import calibrate as fit

    groups: dict[tuple[str, str], list[tuple[Path, dict[str, Any]]]] = {}
    for path in records:
        rec = _read_record(path)
        server = rec["server"]
        key = (str(server.get("pattern")), str(server.get("notifier")))
        groups.setdefault(key, []).append((path, rec))
    for (pattern, notifier), items in sorted(groups.items()):
        labels = [f"{p} (run {r.get('run_id')})" for p, r in items]
        checks: list[SelfCheck] = []
        rates = fit(
            [r["server"] for _, r in items],
            pattern,
            labels,
            measured=[_measured(r) for _, r in items],
            connections=[_connections(r) for _, r in items],
            checks=checks,
        )
        out: dict[str, Any] = {
            "pattern": pattern,
            "notifier": notifier,
            "rates": rates.as_dict(),
            "source": rates.source,
            "source_runs": [str(r.get("run_id")) for _, r in items],
            "self_check": [c.as_dict() for c in checks],
        }
        if store:
            from demuxlab.validation.store import save_calibration

            out["calibration_id"] = save_calibration(
                rates,
                pattern,
                notifier,
                out["source_runs"],
                artifacts={"records": [str(p) for p, _ in items]},
            )
        click.echo(json.dumps(out))


@model.command()
@click.option("--json", "as_json", is_flag=True)
def rates(as_json: bool) -> None:
    """Print the paper's rates (seed 001 §V-A, per µs) for both patterns."""
    from demuxlab.ctmc.rates import PATTERNS, RATE_FIELDS, paper_rates

    for pattern in PATTERNS:
        r = paper_rates(pattern).as_dict()
        if as_json:
            click.echo(json.dumps({"pattern": pattern, "rates_per_us": r}))
        else:
            click.echo(f"{pattern}:")
            for k in RATE_FIELDS:
                click.echo(f"  {k:<4} = 1/{1.0 / r[k]:.4g} µs⁻¹  ({r[k]:.6g} per µs)")


# -- the workflow's model stages (their logic: demuxlab.validation.stages) -------------------------------


def _spec(path: str) -> Any:
    from demuxlab.spec import load_spec

    return load_spec(Path(path))


@model.command("calibrate-experiment")
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="The calibrations as JSON.")
def calibrate_experiment(spec: str, out: str) -> None:
    """Fit and store the rates of every HSHA/LF pattern × notifier from the ingested calibration runs."""
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
    """Predict every measured HSHA/LF point (paper and calibrated rates) and store the predictions."""
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
    """Model vs measurement per HSHA/LF point, with relative errors: CSVs and a figure (seed 001 Fig. 3)."""
    from demuxlab.validation.stages import write_validation

    for path in write_validation(_spec(spec), Path(out_dir), method):
        click.echo(f"wrote {path}", err=True)
