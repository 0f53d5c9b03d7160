# The controller's checked copy of each spec (results/<experiment>/checked.json): what a run job needs of it
# (digest, phases, points by key, git revision), so that run jobs on a cluster or in Slurm start with the
# lean `demuxlab-run` (demuxlab.runpoint_lean) instead of loading and checking the spec again. The spec is
# already loaded and checked here (common.smk); the job only hashes the file against this copy.
#
# Written when the controller starts (rules/lock.smk's onstart), not by a rule: it is a cache of the spec,
# which is the run jobs' tracked input, and a rule would have to be an `ancient` input of every run (a new
# git revision rewrites it), which Snakemake 9 mishandles (a rerun of the rule leaves the rest of the DAG
# out of that invocation).
from demuxlab.commands import git_revision

LEAN_RUN = str(REPO / ".venv" / "bin" / "demuxlab-run") if (REPO / ".venv" / "bin" / "demuxlab-run").exists() else "demuxlab-run"


def checked_path(experiment):
    return f"results/{experiment}/checked.json"


def write_checked_specs():
    """Every experiment's checked spec, with the revision of this controller's start."""
    from demuxlab.jsonio import write_text_if_changed, dumps
    from demuxlab.runpoint_lean import checked_doc

    rev = git_revision()
    for name, spec in SPECS.items():
        points = {}
        for point, _ in run_order(spec):
            points.setdefault(point.point_key, point)
        doc = checked_doc(spec, list(points.values()), rev, str(spec.path))
        write_text_if_changed(Path(checked_path(name)), dumps(doc))


if config["host_pair"] != "local":
    ONSTART_HOOKS.append(write_checked_specs)


def write_simulated_pairs():
    """results/cluster/simulated-pairs.json: the simulated cluster file as JSON, for the run processes."""
    import yaml

    from demuxlab.jsonio import dumps, write_text_if_changed

    doc = yaml.safe_load(Path(INVENTORY).read_text())
    write_text_if_changed(Path(f"{CLUSTER_STATE}/simulated-pairs.json"), dumps(doc))


if CLUSTER and SIMULATED:
    ONSTART_HOOKS.append(write_simulated_pairs)


def run_command(wildcards):
    """How a run job starts: `demuxlab run-point SPEC` on the local pair (it checks the spec itself),
    the lean `demuxlab-run CHECKED` on a cluster or in Slurm (the controller checked the spec)."""
    if config["host_pair"] == "local":
        return f"{DEMUXLAB} run-point {shlex.quote(spec_path(wildcards))}"
    return f"{LEAN_RUN} {checked_path(wildcards.experiment)}"
