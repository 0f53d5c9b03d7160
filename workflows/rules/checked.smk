# The controller's checked copy of each spec (results/<experiment>/checked.json): what a run job needs of it
# (digest, phases, points by key, git revision), so that run jobs on a cluster or in Slurm start with the
# lean `demuxlab-run` (demuxlab.runpoint_lean) instead of loading and checking the spec again. The spec is
# already loaded and checked here (common.smk); the job only hashes the file against this copy.
from demuxlab.commands import git_revision

GIT_REV = git_revision() if workflow.is_main_process else None
LEAN_RUN = str(REPO / ".venv" / "bin" / "demuxlab-run") if (REPO / ".venv" / "bin" / "demuxlab-run").exists() else "demuxlab-run"


rule checked_spec:
    input:
        spec=spec_path,
    output:
        checked="results/{experiment}/checked.json",
    log:
        "logs/{experiment}/checked.log",
    params:
        # A new revision rewrites the file (the runs' provenance); the runs take it as `ancient`.
        rev=lambda wc: GIT_REV,
    run:
        write_checked_spec(wildcards.experiment, output.checked, log[0])


def write_checked_spec(name, out, log):
    from demuxlab.jsonio import write_json_atomic
    from demuxlab.runpoint_lean import checked_doc

    spec = SPECS[name]
    points = {}
    for point, _ in run_order(spec):
        points.setdefault(point.point_key, point)
    doc = checked_doc(spec, list(points.values()), GIT_REV, str(spec.path))
    write_json_atomic(Path(out), doc)
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    Path(log).write_text(f"{len(points)} points of {spec.path}, sha256 {spec.sha256}, revision {GIT_REV}\n")


def checked_input(wildcards):
    """The checked spec, for run jobs that start with demuxlab-run (cluster and Slurm profiles)."""
    if config["host_pair"] == "local":
        return []
    return [ancient(f"results/{wildcards.experiment}/checked.json")]


def run_command(wildcards):
    """How a run job starts: `demuxlab run-point SPEC` on the local pair (it checks the spec itself),
    the lean `demuxlab-run CHECKED` on a cluster or in Slurm (the controller checked the spec)."""
    if config["host_pair"] == "local":
        return f"{DEMUXLAB} run-point {shlex.quote(spec_path(wildcards))}"
    return f"{LEAN_RUN} results/{wildcards.experiment}/checked.json"
