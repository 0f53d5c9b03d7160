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
CLUSTER_CONF = config.get("cluster", {})
MODEL = config.get("model", {})
# The models compute on the machine that measures when the pair is local: keep them apart from runs.
MODEL_PAIR = 1 if config["host_pair"] == "local" else 0


def _pairs():
    """The server's valid pairs, or None before the first build (the plan then checks them later)."""
    from demuxlab.designs import valid_pairs

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


# Cluster execution (profile `cluster`): the pairs of an Ansible inventory (or a simulated cluster file),
# one lane per pair; each run takes whichever healthy pair is free (demuxlab.cluster.schedule).
CLUSTER = config["host_pair"] == "cluster"
if config["host_pair"] not in ("local", "cluster"):
    raise WorkflowError(
        f"demuxlab: error: config: host_pair: {config['host_pair']!r} is not 'local' (this machine) or "
        "'cluster' (the pairs of the inventory)"
    )
INVENTORY = ""
PAIRS = None
if CLUSTER:
    from demuxlab.remote.hostpairs import load_pairs

    INVENTORY = os.environ.get("DEMUXLAB_INVENTORY") or config.get("inventory") or ""
    if not INVENTORY:
        raise WorkflowError(
            "demuxlab: error: config: inventory: no inventory for the cluster profile (set DEMUXLAB_INVENTORY, "
            "or `inventory` in the workflow config: --config inventory=PATH)"
        )
    INVENTORY = str((REPO / INVENTORY) if not os.path.isabs(INVENTORY) else Path(INVENTORY))
    try:
        PAIRS = load_pairs(INVENTORY)
    except DemuxlabError as exc:
        raise WorkflowError(f"demuxlab: error: {exc.message}") from None
LANE_COUNT = len(PAIRS.pairs) if PAIRS is not None else RUN["lanes"]
SIMULATED = PAIRS is not None and PAIRS.simulated
CLUSTER_STATE = "results/cluster"

SPECS = _load_specs()

# run id -> (experiment, lane, index within lane); lanes keep each spec's randomized order.
RUNS = {}
LANES = {}
RUN_POINTS = {}  # run id -> (point key, repeat): run-point finds its run without listing the sweep
CALIBRATION_RUNS = set()  # instrumented runs of the calibration points
for _name, _spec in SPECS.items():
    for _i, (_point, _repeat) in enumerate(run_order(_spec)):
        _rid = run_id(_spec, _point, _repeat)
        _lane = _i % LANE_COUNT
        LANES.setdefault((_name, _lane), []).append(_rid)
        RUNS[_rid] = (_name, _lane, len(LANES[(_name, _lane)]) - 1)
        RUN_POINTS[_rid] = (_point.point_key, _repeat)
        if _point.instrument:
            CALIBRATION_RUNS.add(_rid)


def spec_path(wildcards):
    return str(EXPERIMENTS_DIR / f"{wildcards.experiment}.yaml")


def launcher_of(experiment):
    if CLUSTER and config["launcher"] == "spec":
        return "sim" if SIMULATED else "remote"
    return SPECS[experiment].launcher if config["launcher"] == "spec" else config["launcher"]


def which_run(wildcards):
    """run-point's options naming the run's point and repeat (it checks them against the run id)."""
    key, repeat = RUN_POINTS[wildcards.run_id]
    return f"--point-key {shlex.quote(key)} --repeat {repeat}"


def lane_of(wildcards):
    return RUNS[wildcards.run_id][1]


def cluster_inputs(wildcards):
    """What a run on the cluster needs: the provisioned hosts and every host's facts, through one file
    (rule cluster_ready), so that a sweep's DAG has one edge per run, not one per run and host."""
    if not CLUSTER or SIMULATED:
        return []
    return [ancient(rules.cluster_ready.output.ready)]


LOCAL_FACTS = f"results/facts/{config['host_pair']}/server.json"


def host_facts_input(wildcards):
    """The local pair's facts (the cluster's hosts have theirs in cluster_inputs)."""
    return [] if CLUSTER else [ancient(LOCAL_FACTS)]


def where_args(wildcards):
    """run-point's options saying where the run goes: the local pair, or any pair of the inventory."""
    if not CLUSTER:
        return f"--server-facts {LOCAL_FACTS} --pair {config['host_pair']}"
    return (
        f"--pairs-from {INVENTORY} --cluster-state {CLUSTER_STATE} --lane {lane_of(wildcards)}"
        f" --quarantine-after {CLUSTER_CONF['quarantine_after']} --pair-wait {CLUSTER_CONF['pair_wait_s']}"
        f" --noise-wait {CLUSTER_CONF['noise_wait_s']}"
    )


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
    """Whether the experiment runs a pattern the CTMC models describe (every pattern since issue 19)."""
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
    """The claims of modelled experiments use the model's predictions: wait for them."""
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
        if CLUSTER:
            targets.append(f"results/{name}/report/pairs.csv")
        if has_model(name):
            targets += [
                f"results/{name}/report/validation.csv",
                f"results/{name}/report/validation_summary.csv",
                f"results/{name}/report/validation.png",
            ]
    return targets


def inventory_files():
    """The inventory's files (a change re-provisions)."""
    path = Path(INVENTORY)
    if path.is_file():
        return [str(path)]
    return sorted(str(p) for p in path.rglob("*") if p.is_file())


def playbook_files():
    """The playbooks (a change re-provisions); not the inventories, nor Python's byte-code caches."""
    return sorted(
        str(p)
        for p in (REPO / "playbooks").rglob("*")
        if p.is_file() and not {"inventories", "__pycache__"} & set(p.parts) and p.suffix != ".pyc"
    )


def ingest_in_controller(record, done, log):
    """One run record in one transaction, in a thread of this controller (demuxlab.ingest.ingest_for_workflow:
    no process per run). The profiles set force-use-threads, so that `run:` jobs run in the controller."""
    from demuxlab.ingest import ingest_for_workflow

    try:
        ingest_for_workflow(record, done, log)
    except DemuxlabError as exc:
        raise WorkflowError(f"demuxlab: error: {exc.message}") from None


def write_cluster_ready(path, facts, log):
    """results/cluster/ready.json: the hosts are provisioned and their facts collected (run_point's input)."""
    from demuxlab.jsonio import write_json_atomic

    write_json_atomic(Path(path), {"facts": sorted(str(f) for f in facts)})
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    Path(log).write_text(f"{len(facts)} hosts' facts collected\n")


def write_sweep_plan():
    """results/cluster/sweep.json: the runs this sweep plans, so progress can say how many remain."""
    import json

    doc = {
        "experiments": {name: len(runs_of(name)) for name in SPECS},
        "pairs": [p.name for p in PAIRS.pairs],
        "inventory": INVENTORY,
    }
    os.makedirs(CLUSTER_STATE, exist_ok=True)
    tmp = f"{CLUSTER_STATE}/.sweep.json.tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, f"{CLUSTER_STATE}/sweep.json")
