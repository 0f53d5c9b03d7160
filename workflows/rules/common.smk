# Shared helpers: load the specs, list every run, and name the targets of `all`.
import json
import os
import shlex
from pathlib import Path

from snakemake.exceptions import WorkflowError

from demuxlab.ctmc.rates import PATTERNS as MODEL_PATTERNS
from demuxlab.errors import DemuxlabError
from demuxlab.spec import load_spec, run_id, run_order

REPO = Path(workflow.basedir).parent
EXPERIMENTS_DIR = Path(config.get("experiments_dir") or REPO / "experiments").resolve()
DEMUXLAB = str(REPO / ".venv" / "bin" / "demuxlab") if (REPO / ".venv" / "bin" / "demuxlab").exists() else "demuxlab"
RUN = config.get("run", {})
MODEL = config.get("model", {})
# The models compute on the machine that measures when the pair is local: keep them apart from runs.
MODEL_PAIR = 1 if config["host_pair"] == "local" else 0


def _pairs():
    """The server's valid pairs, or None before the first build (the plan then checks them later)."""
    from demuxlab.pairs import valid_pairs

    try:
        return valid_pairs()
    except DemuxlabError:
        return None


def _load_specs():
    pairs = _pairs()
    specs = {}
    for name in config["experiments"]:
        path = EXPERIMENTS_DIR / f"{name}.yaml"
        try:
            specs[name] = load_spec(path, pairs=pairs)
        except DemuxlabError as exc:
            raise WorkflowError(f"demuxlab: error: {exc.message}") from None
    return specs


if config["host_pair"] != "local":
    raise WorkflowError(
        f"demuxlab: error: host pair {config['host_pair']!r} is not defined: this version runs on the "
        "'local' pair only (remote pairs need the Ansible inventory and remote launcher of playbooks/)"
    )

SPECS = _load_specs()

# run id -> (experiment, lane, index within lane); lanes keep each spec's randomized order.
RUNS = {}
LANES = {}
CALIBRATION_RUNS = set()  # instrumented runs of the calibration points
for _name, _spec in SPECS.items():
    for _i, (_point, _repeat) in enumerate(run_order(_spec)):
        _rid = run_id(_spec, _point, _repeat)
        _lane = _i % RUN["lanes"]
        LANES.setdefault((_name, _lane), []).append(_rid)
        RUNS[_rid] = (_name, _lane, len(LANES[(_name, _lane)]) - 1)
        if _point.instrument:
            CALIBRATION_RUNS.add(_rid)


def spec_path(wildcards):
    return str(EXPERIMENTS_DIR / f"{wildcards.experiment}.yaml")


def launcher_of(experiment):
    return SPECS[experiment].launcher if config["launcher"] == "spec" else config["launcher"]


def previous_in_lane(wildcards):
    """The run before this one in its lane: runs happen in the spec's randomized order."""
    name, lane, index = RUNS[wildcards.run_id]
    if index == 0:
        return []
    return [f"results/{name}/runs/{LANES[(name, lane)][index - 1]}.json"]


def runs_of(experiment):
    return [rid for rid, (name, _, _) in RUNS.items() if name == experiment]


def ingested_runs(wildcards):
    return expand(rules.ingest_run.output.done, experiment=wildcards.experiment, run_id=runs_of(wildcards.experiment))


def calibration_runs_ingested(wildcards):
    runs = [rid for rid in runs_of(wildcards.experiment) if rid in CALIBRATION_RUNS]
    return expand(rules.ingest_run.output.done, experiment=wildcards.experiment, run_id=runs)


def has_model(experiment):
    """Whether the experiment runs a pattern the CTMC models describe (HSHA or LF)."""
    return any(d.pattern in MODEL_PATTERNS for d in SPECS[experiment].designs)


def c_sources(wildcards):
    """Every C source, header and Makefile of images/: a change rebuilds the binaries."""
    return sorted(
        str(p) for p in (REPO / "images").rglob("*") if p.suffix in (".c", ".h") or p.name == "Makefile"
    )


DOCKERFILES = [str(REPO / "images" / role / "Dockerfile") for role in ("server", "client")]


def build_outputs(wildcards):
    """What a run needs built: the binaries, plus the images when the experiment runs in Docker."""
    out = [rules.build_binaries.output.manifest]
    if launcher_of(wildcards.experiment) == "docker":
        out.append(rules.build_images.output.manifest)
    return out


def claims_predictions(wildcards):
    """The claims of HSHA/LF experiments use the model's predictions: wait for them."""
    if has_model(wildcards.experiment):
        return [f"results/{wildcards.experiment}/model/predictions.json"]
    return []


def report_targets(wildcards):
    """The report files of one experiment (what its bundle holds)."""
    return [t for t in all_targets() if t.startswith(f"results/{wildcards.experiment}/")]


def all_targets():
    targets = []
    for name in SPECS:
        targets += [
            f"results/{name}/report/points.csv",
            f"results/{name}/report/throughput_vs_threads.png",
            f"results/{name}/report/claims.csv",
            f"results/{name}/report/claims.md",
            f"results/{name}/report/recommendations.csv",
        ]
        if has_model(name):
            targets += [
                f"results/{name}/report/validation.csv",
                f"results/{name}/report/validation_summary.csv",
                f"results/{name}/report/validation.png",
            ]
    return targets
