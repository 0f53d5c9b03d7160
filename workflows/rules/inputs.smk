# The input functions: what each job reads, derived from the checkpoints' outputs (rules/common.smk:
# plan_of). They run when Snakemake builds the DAG, never at parse time.
import shlex


def all_targets(wildcards):
    """Every experiment's report: tables and figures, the model's validation when its plan has modelled
    points (every pattern since issue 19), and what the host-pair execution adds (the cluster's per-pair
    table)."""
    return [path for name in config["experiments"] for path in experiment_targets(name)]


def experiment_targets(experiment):
    targets = [*rules.report.output, *rules.claims.output, *host_targets()]
    if plan_of(experiment)["modelled_patterns"]:
        targets += rules.validate_model.output
    return expand(targets, experiment=experiment) + run_prerequisites(experiment)


def run_prerequisites(experiment):
    """What the runs take as `ancient` inputs (the build, the hosts' files), named again as plain targets.
    When a job upstream of the runs must run again (a rebuild, a new sweep plan, re-provisioning),
    Snakemake evaluates what lies downstream of it only by following its outputs, and it does not follow an
    `ancient` one: without these, runs still missing (a new experiment) would be left out, and the
    workflow would end after the rebuild. Listed here they lead from the rerun job to `all`, and from
    there back to every missing output. Finished runs stay finished (their inputs are still ancient)."""
    build = [rules.build_binaries.output.manifest]
    if run_launcher(experiment) == "docker":
        build.append(rules.build_images.output.manifest)
    return build + host_prerequisites()


def c_sources(wildcards):
    """Every C source, header and Makefile of images/: a change rebuilds the binaries."""
    return sorted(
        str(p) for p in (REPO / "images").rglob("*") if p.suffix in (".c", ".h") or p.name == "Makefile"
    )


def build_inputs(wildcards):
    """What a run needs built: the binaries, plus the images when it runs in Docker. `ancient`: a rebuild
    does not redo measurements (each record names the binaries' SHA-256 or the image digest it ran)."""
    out = [ancient(rules.build_binaries.output.manifest)]
    if run_launcher(wildcards.experiment) == "docker":
        out.append(ancient(rules.build_images.output.manifest))
    return out


def run_index(wildcards):
    """The run's position in its experiment's plan, and the plan."""
    plan = plan_of(wildcards.experiment)
    try:
        return plan["index"][wildcards.run_id], plan
    except KeyError:
        raise WorkflowError(
            f"demuxlab: error: run {wildcards.run_id!r} is not in the plan of {wildcards.experiment!r}"
        ) from None


def lane_of(wildcards):
    """Runs are dealt to the lanes in plan order: run i is in lane i mod lanes."""
    return run_index(wildcards)[0] % lane_count()


def previous_in_lane(wildcards):
    """The run before this one in its lane: runs happen in the spec's randomized order."""
    index, plan = run_index(wildcards)
    lanes = lane_count()
    if index < lanes:
        return []
    previous = plan["run_ids"][index - lanes]
    return [rules.run_point.output.record.format(experiment=wildcards.experiment, run_id=previous)]


def which_run(wildcards):
    """run-point's options naming the run's point and repeat (it checks them against the run id), so that
    it finds its run without listing the sweep."""
    index, plan = run_index(wildcards)
    run = plan["runs"][index]
    return f"--point-key {shlex.quote(run['point_key'])} --repeat {run['repeat']}"


def ingested_runs(wildcards):
    """Every run of the experiment, in the database."""
    run_ids = plan_of(wildcards.experiment)["run_ids"]
    return expand(rules.ingest_run.output.done, experiment=wildcards.experiment, run_id=run_ids)


def calibration_runs_ingested(wildcards):
    """The instrumented runs of the calibration points, in the database."""
    runs = [run["run_id"] for run in plan_of(wildcards.experiment)["runs"] if run["instrument"]]
    return expand(rules.ingest_run.output.done, experiment=wildcards.experiment, run_id=runs)


def claims_predictions(wildcards):
    """The claims of modelled experiments use the model's predictions: wait for them."""
    if plan_of(wildcards.experiment)["modelled_patterns"]:
        return [rules.predict.output.predictions]
    return []


def ingest_in_controller(record, done, log):
    """One run record in one transaction, in a thread of this controller (demuxlab.ingest.ingest_for_workflow:
    no process per run). The profiles set force-use-threads, so that `run:` jobs run in the controller."""
    from demuxlab.errors import DemuxlabError
    from demuxlab.ingest import ingest_for_workflow

    try:
        ingest_for_workflow(record, done, log)
    except DemuxlabError as exc:
        raise WorkflowError(f"demuxlab: error: {exc.message}") from None
