# Read and validate only: the configuration against its schema, the specs named in it. Nothing here imports
# demuxlab or runs a binary. The input functions below read the checkpoints' outputs once they exist.
import json
import os
from functools import lru_cache
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.utils import validate


validate(config, schema="../schemas/config.schema.yaml")

REPO = Path(workflow.basedir).parent
EXPERIMENTS_DIR = Path(config["experiments_dir"] or REPO / "experiments").resolve()
_VENV_CLI = REPO / ".venv" / "bin" / "demuxlab"
DEMUXLAB = str(_VENV_CLI) if _VENV_CLI.exists() else "demuxlab"
# Every run job's one entry point (demuxlab.runpoint_lean: a run's ticket to its record).
_VENV_RUN = REPO / ".venv" / "bin" / "demuxlab-run"
DEMUXLAB_RUN = str(_VENV_RUN) if _VENV_RUN.exists() else "demuxlab-run"
RUN = config["run"]
MODEL = config["model"]

for _name in config["experiments"]:
    if not (EXPERIMENTS_DIR / f"{_name}.yaml").is_file():
        raise WorkflowError(
            f"demuxlab: error: config: experiments: {_name!r}: {EXPERIMENTS_DIR / _name}.yaml not found"
        )


wildcard_constraints:
    experiment="[a-z0-9][a-z0-9-]*",


def spec_file(wildcards):
    return str(EXPERIMENTS_DIR / f"{wildcards.experiment}.yaml")


def plan_of(experiment):
    """The experiment's plan (checkpoint `plan`): runs in the spec's randomized order with their points,
    the spec's launcher, the patterns the CTMC models describe. The host-pair execution's checkpoints are
    read too, so that every job that reads a plan depends on them directly: Snakemake re-evaluates only
    the direct dependents of a checkpoint, and a run job reached through the plan would otherwise keep
    <TBD> in its options when the inventory's pairs were already there."""
    plan = checkpoint_json(checkpoints.plan, experiment=experiment)
    host_checkpoints()
    return plan


_CHECKPOINT_PATHS = {}


def checkpoint_json(checkpoint, **wildcards):
    """A checkpoint's JSON output, once the checkpoint is done (else Snakemake waits for it). Once done it
    stays done in this controller: later calls skip the checkpoint's lookup (thousands per sweep)."""
    key = (checkpoint.rule.name, *sorted(wildcards.items()))
    path = _CHECKPOINT_PATHS.get(key)
    if path is None:
        path = _CHECKPOINT_PATHS[key] = checkpoint.get(**wildcards).output[0]
    return read_json_indexed(path, os.stat(path).st_mtime_ns)


@lru_cache(maxsize=None)
def read_json_indexed(path, mtime_ns):
    """A JSON file, once per version. A plan keeps of each run what the DAG needs (run id, point key,
    repeat, instrumented), and gets `run_ids` and `index` (run id -> position)."""
    with open(path) as f:
        doc = json.load(f)
    if "runs" in doc:
        keep = ("run_id", "point_key", "repeat", "instrument")
        doc["runs"] = [{k: run[k] for k in keep} for run in doc["runs"]]
        doc["run_ids"] = [run["run_id"] for run in doc["runs"]]
        doc["index"] = {rid: i for i, rid in enumerate(doc["run_ids"])}
    return doc
