# How a run job starts. On the local pair: `demuxlab run-point SPEC` (it loads and checks the spec itself).
# On a cluster or in Slurm: the lean `demuxlab-run CHECKED` (demuxlab.runpoint_lean), which spares each run
# process the spec's YAML and schema checks, numpy, scipy and click: rule checked_spec writes what a run needs
# of its spec once per experiment (results/<experiment>/checked.json: digest, phases, launcher, pinned class,
# every point by its key), the job hashes the spec file against it, and the controller passes the git
# revision it started from (--git-rev).
from functools import lru_cache

_LEAN_RUN = REPO / ".venv" / "bin" / "demuxlab-run"
LEAN_RUN = str(_LEAN_RUN) if _LEAN_RUN.exists() else "demuxlab-run"


def write_checked_spec(spec, out, log):
    """In a thread of the controller: the spec was checked by the plan; its points, phases and class."""
    from demuxlab.errors import DemuxlabError
    from demuxlab.jsonio import write_json_atomic
    from demuxlab.runpoint_lean import checked_doc_of

    try:
        doc = checked_doc_of(Path(spec))
    except DemuxlabError as exc:
        raise WorkflowError(f"demuxlab: error: {exc.message}") from None
    write_json_atomic(Path(out), doc)
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    Path(log).write_text(f"{len(doc['points'])} points of {spec}, sha256 {doc['spec_sha256']}\n")


def checked_spec_path(experiment):
    return rules.checked_spec.output.checked.format(experiment=experiment)


def checked_spec_doc(experiment):
    """The experiment's checked spec once written (else its phases as 0: values re-read before a job runs)."""
    path = checked_spec_path(experiment)
    try:
        return read_json_indexed(path, os.stat(path).st_mtime_ns)
    except (OSError, ValueError):
        return {"phases": {"warmup_s": 0.0, "measure_s": 0.0, "cooldown_s": 0.0}}


def lean_runs():
    return config["host_pair"] != "local"


def checked_input(wildcards):
    """The checked spec, for run jobs that start with demuxlab-run (cluster and Slurm)."""
    return [checked_spec_path(wildcards.experiment)] if lean_runs() else []


@lru_cache(maxsize=None)
def controller_revision():
    """The checkout's git revision as the controller started (asked once, when the DAG is built)."""
    from demuxlab.runpoint import git_revision

    return git_revision() or "unknown"


def run_command(wildcards):
    """run-point on the local pair; the lean start-up with the checked spec elsewhere."""
    if not lean_runs():
        return f"{DEMUXLAB} run-point {shlex.quote(spec_file(wildcards))}"
    checked = checked_spec_path(wildcards.experiment)
    return f"{LEAN_RUN} {checked} --git-rev {shlex.quote(controller_revision())}"
