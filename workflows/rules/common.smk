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
    the spec's launcher, the patterns the CTMC models describe. Read once per version of the file."""
    path = checkpoints.plan.get(experiment=experiment).output.plan
    return read_json_indexed(path, os.stat(path).st_mtime_ns)


@lru_cache(maxsize=None)
def read_json_indexed(path, mtime_ns):
    """A checkpoint's JSON output; a plan also gets `index` (run id -> position) and `run_ids`."""
    with open(path) as f:
        doc = json.load(f)
    if "runs" in doc:
        doc["run_ids"] = [run["run_id"] for run in doc["runs"]]
        doc["index"] = {rid: i for i, rid in enumerate(doc["run_ids"])}
    return doc

