# The input functions: what each job reads, derived from the checkpoints' outputs (rules/common.smk:
# plan_of). They run when Snakemake builds the DAG, never at parse time.
import shlex
import subprocess


def all_targets(wildcards):
    """Every experiment's report: tables and figures, the model's validation when its plan has modelled
    points (every pattern since issue 19), and what the host-pair execution adds (the cluster's per-pair
    table)."""
    return [path for name in config["experiments"] for path in experiment_targets(name)]


def experiment_targets(experiment):
    targets = [*rules.report.output, *rules.claims.output, *host_targets()]
    plan = plan_of(experiment)
    if plan["modelled_patterns"]:
        targets += rules.validate_model.output
    if plan["adaptive"]:
        # `all` reads every round itself: Snakemake re-evaluates the direct dependents of a checkpoint
        # round after round (a resumed sweep), so the jobs that read the rounds (report, claims, ingests)
        # are made once all of them are known.
        targets += [adaptive_round_file(experiment, doc["round"]) for doc in adaptive_rounds(experiment)]
        targets += rules.adaptive_store.output
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
    """The run's position in its experiment's plan, and the plan; for an adaptive experiment, in its round
    (rounds/adaptive.smk), and the round."""
    plan = plan_of(wildcards.experiment)
    if plan["adaptive"]:
        return adaptive_run(wildcards.experiment, wildcards.run_id)
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
        # An adaptive round's first runs wait for the round's decision (itself after the round before).
        return [adaptive_round_file(wildcards.experiment, plan["round"])] if "round" in plan else []
    previous = plan["run_ids"][index - lanes]
    return [rules.run_point.output.record.format(experiment=wildcards.experiment, run_id=previous)]


def run_ticket(wildcards):
    """The run's ticket (its plan's, or its adaptive round's): the one copy of its point, which its job
    reads. `ancient`: a plan written again (same tickets, new files) does not redo measurements."""
    _, plan = run_index(wildcards)
    if "round" in plan:
        folder = rules.adaptive_round.output.tickets.format(experiment=wildcards.experiment, round=plan["round"])
    else:
        folder = rules.plan.output.tickets.format(experiment=wildcards.experiment)
    return ancient(f"{folder}/{wildcards.run_id}.json")


@lru_cache(maxsize=None)
def controller_revision():
    """The checkout's git revision as the controller saw it when it built the DAG (asked once; `-dirty` when
    tracked files differ), for the records' experiment.git_rev. A Slurm job's own Snakemake evaluates it on a
    node that may have no git: "unknown" there (the job's command already has the controller's)."""

    def git(*args):
        try:
            res = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=False)
        except OSError:
            return None
        return res.stdout.strip() if res.returncode == 0 else None

    rev = git("rev-parse", "HEAD")
    if rev is None:
        return "unknown"
    return rev + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def experiment_runs(experiment):
    """Every run of the experiment: its plan's, or every round's of an adaptive experiment (to its stop)."""
    plan = plan_of(experiment)
    if plan["adaptive"]:
        return [run for doc in adaptive_rounds(experiment) for run in doc["runs"]]
    return plan["runs"]


def ingested_runs(wildcards):
    """Every run of the experiment, in the database."""
    run_ids = [run["run_id"] for run in experiment_runs(wildcards.experiment)]
    return expand(rules.ingest_run.output.done, experiment=wildcards.experiment, run_id=run_ids)


def calibration_runs_ingested(wildcards):
    """The instrumented runs of the calibration points, in the database (an adaptive experiment's are all
    in its first round)."""
    plan = plan_of(wildcards.experiment)
    runs = adaptive_rounds(wildcards.experiment, upto=1)[0]["runs"] if plan["adaptive"] else plan["runs"]
    done = [run["run_id"] for run in runs if run["instrument"]]
    return expand(rules.ingest_run.output.done, experiment=wildcards.experiment, run_id=done)


# -- adaptive experiments (rules/adaptive.smk) -------------------------------------------------------------


def adaptive_round_file(experiment, index):
    return rules.adaptive_round.output.round.format(experiment=experiment, round=index)


def adaptive_rounds(experiment, upto=None):
    """Rounds 0, 1, ... of an adaptive experiment (checkpoint adaptive_round), up to `upto` (excluded) or
    to the round that stops. Snakemake waits at the first round not decided yet, which waits for every
    record of the rounds before it: so the DAG grows a round at a time."""
    rounds = []
    while upto is None or len(rounds) < upto:
        doc = checkpoint_json(checkpoints.adaptive_round, experiment=experiment, round=str(len(rounds)))
        rounds.append({**doc, "round": len(rounds)})
        if doc["stop"]:
            break
    return rounds


def adaptive_run(experiment, run_id):
    """(position in its round, the round) of a run of an adaptive experiment. Only the rounds up to the
    run's own are read: they are decided, since the run was asked for by one of them."""
    index = 0
    while True:
        doc = checkpoint_json(checkpoints.adaptive_round, experiment=experiment, round=str(index))
        if run_id in doc["index"]:
            return doc["index"][run_id], {**doc, "round": index}
        if doc["stop"]:
            raise WorkflowError(f"demuxlab: error: run {run_id!r} is in no round of {experiment!r}")
        index += 1


def records_before_round(wildcards):
    """Every record of the rounds before this one: a round is decided from them."""
    rounds = adaptive_rounds(wildcards.experiment, upto=int(wildcards.round))
    return [
        rules.run_point.output.record.format(experiment=wildcards.experiment, run_id=run["run_id"])
        for doc in rounds
        for run in doc["runs"]
    ]


def adaptive_round_files(wildcards):
    return [adaptive_round_file(wildcards.experiment, doc["round"]) for doc in adaptive_rounds(wildcards.experiment)]


def adaptive_records(wildcards):
    return [
        rules.run_point.output.record.format(experiment=wildcards.experiment, run_id=run["run_id"])
        for run in experiment_runs(wildcards.experiment)
    ]


def adaptive_decisions(wildcards):
    """An adaptive experiment's decisions.json, for the report and the claims (none for a fixed design)."""
    if not plan_of(wildcards.experiment)["adaptive"]:
        return []
    return [rules.adaptive_decisions.output.decisions.format(experiment=wildcards.experiment)]


def adaptive_option(wildcards, input):
    """`--adaptive FILE` for the report and the claims of an adaptive experiment."""
    return f"--adaptive {input.decisions}" if input.decisions else ""


def claims_predictions(wildcards):
    """The claims of modelled experiments use the model's predictions: wait for them."""
    if plan_of(wildcards.experiment)["modelled_patterns"]:
        return [rules.predict.output.predictions]
    return []


def claims_calibrations(wildcards):
    """The claims of modelled experiments name each design without a calibration with its refusal."""
    if plan_of(wildcards.experiment)["modelled_patterns"]:
        return [rules.calibrate.output.calibrations]
    return []


def calibrations_option(wildcards, input):
    """`--calibrations FILE` for the claims of a modelled experiment (the recommendation's model_missing)."""
    return f"--calibrations {input.calibrations}" if input.calibrations else ""


def ingest_in_controller(record, done, log):
    """One run record in one transaction, in a thread of this controller (demuxlab.ingest.ingest_for_workflow:
    no process per run). The profiles set force-use-threads, so that `run:` jobs run in the controller."""
    from demuxlab.errors import DemuxlabError
    from demuxlab.ingest import ingest_for_workflow

    try:
        ingest_for_workflow(record, done, log)
    except DemuxlabError as exc:
        raise WorkflowError(f"demuxlab: error: {exc.message}") from None
