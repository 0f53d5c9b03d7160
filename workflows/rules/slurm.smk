# Slurm profile only (host_pair: slurm): each run (point x repeat) is one Slurm job of two whole nodes,
# submitted by Snakemake's own executor plugin (snakemake-executor-plugin-slurm); inside the job one node
# runs the server and the other the client (demuxlab-run --slurm, demuxlab.slurm.job). Every other rule
# runs on the controller (the Snakefile makes them local rules).
#
# When the controller starts (not in the jobs): the settings are checked against the cluster, so a bad one
# fails before the first job (demuxlab.slurm.check), and the jobs an earlier, killed controller left queued
# or running are found (squeue: the plugin puts each job's rule and wildcards, hence its run id, in its
# comment). A run with such a job waits for it (rule slurm_adopt) instead of being submitted beside it; its
# job then finds the record that job wrote and only puts it back (demuxlab.slurm.job.restore_adopted).
import dataclasses
import subprocess
import time

from demuxlab.slurm import nodes as slurm_nodes
from demuxlab.slurm.check import SlurmSettings, check_settings, minutes

SLURM_SETTINGS = SlurmSettings.from_config(config.get("slurm", {}))
SLURM_STATE = "results/slurm"
# $SLURM_CONF (Slurm's own variable) wins, else the setting (relative to the repository): the plugin's
# sbatch/sacct calls and the checks below inherit it.
_conf = os.environ.get("SLURM_CONF") or (str(REPO / SLURM_SETTINGS.conf) if SLURM_SETTINGS.conf else "")
if _conf:
    os.environ["SLURM_CONF"] = _conf
SLURM_SETTINGS = dataclasses.replace(SLURM_SETTINGS, conf=_conf)


def run_seconds(experiment):
    ph = SPECS[experiment].phases
    return ph.warmup_s + ph.measure_s + ph.cooldown_s


def pinned_feature(experiment):
    """The node feature of the hardware class an experiment pins (learned from earlier runs' records)."""
    pinned = SPECS[experiment].hardware_class
    if pinned is None:
        return None
    known = slurm_nodes._read(Path(SLURM_STATE) / "classes.json")
    features = known.get(pinned)
    if not features:
        raise WorkflowError(
            f"demuxlab: error: {SPECS[experiment].path}: hardware_class: {pinned}: no Slurm node feature is "
            "known for this class yet (its runs record it: run the experiment unpinned once, or use "
            "slurm.constraint)"
        )
    return features[0]


SLURM_VIEW = None
ADOPTED = {}  # run id -> Slurm job id of a job a killed controller left queued or running
if workflow.is_main_process:
    try:
        for _name in SPECS:
            SLURM_VIEW = check_settings(
                SLURM_SETTINGS,
                max(run_seconds(n) for n in SPECS),
                pinned_class=pinned_feature(_name),
                quarantined=list(slurm_nodes.quarantined(Path(SLURM_STATE))),
            )
    except DemuxlabError as exc:
        raise WorkflowError(f"demuxlab: error: {exc.message}") from None
    _live = subprocess.run(
        ["squeue", "--me", "-h", "-o", "%i|%k|%Z"], capture_output=True, text=True, check=False
    )
    _here = os.path.realpath(os.getcwd())
    for _line in _live.stdout.splitlines():
        _job, _, _rest = _line.strip().partition("|")
        _comment, _, _workdir = _rest.rpartition("|")
        if not _comment.startswith("rule_run_point_wildcards_") or os.path.realpath(_workdir) != _here:
            continue
        _rid = _comment.rsplit("_", 1)[-1]
        if _rid in RUNS and _job.isdigit():
            ADOPTED[_rid] = int(_job)


def adopted_input(wildcards):
    job = ADOPTED.get(wildcards.run_id)
    return [f"{SLURM_STATE}/adopted/{job}.json"] if job else []


def slurm_runtime(wildcards):
    """The job's time limit in minutes: the run's phases plus slurm.time_margin_s."""
    return minutes(run_seconds(wildcards.experiment) + SLURM_SETTINGS.time_margin_s)


def slurm_extra(wildcards, attempt):
    """Whole nodes, no requeue by Slurm (Snakemake retries, elsewhere), and the nodes this attempt must
    avoid: quarantined ones and those earlier attempts of the run failed on (demuxlab.slurm.nodes)."""
    usable = SLURM_VIEW.nodes if SLURM_VIEW is not None else ()
    avoid = slurm_nodes.retry_excludes(Path(SLURM_STATE), wildcards.run_id, usable)
    return "--exclusive --no-requeue" + (f" --exclude={','.join(avoid)}" if avoid else "")


def slurm_constraint(wildcards):
    return SLURM_SETTINGS.full_constraint(pinned_feature(wildcards.experiment)) or None


def slurm_where(wildcards):
    """demuxlab-run's options inside the job."""
    args = (
        f"--slurm --slurm-state {SLURM_STATE} --stage {SLURM_SETTINGS.stage} --drain {SLURM_SETTINGS.drain}"
        f" --quarantine-after {CLUSTER_CONF['quarantine_after']} --noise-wait {CLUSTER_CONF['noise_wait_s']}"
    )
    if SLURM_SETTINGS.classes:
        args += f" --class-features {','.join(SLURM_SETTINGS.classes)}"
    return args


SLURM_RESOURCES = {
    "slurm_partition": SLURM_VIEW.partition if SLURM_VIEW is not None else (SLURM_SETTINGS.partition or ""),
    "slurm_account": SLURM_VIEW.account if SLURM_VIEW is not None else (SLURM_SETTINGS.account or ""),
}
if SLURM_SETTINGS.constraint or SLURM_SETTINGS.classes or any(s.hardware_class for s in SPECS.values()):
    SLURM_RESOURCES["constraint"] = slurm_constraint


rule run_point:
    input:
        spec=spec_path,
        build=lambda wc: [ancient(p) for p in build_outputs(wc)],
        after=previous_in_lane,
        adopted=adopted_input,
    output:
        record="results/{experiment}/runs/{run_id}.json",
    log:
        "logs/{experiment}/runs/{run_id}.log",
    params:
        run=run_command,
        launcher=lambda wc: launcher_of(wc.experiment),
        max_attempts=RUN["retries"] + 1,
        stall=RUN["stall_timeout_s"],
        where=slurm_where,
        which=which_run,
    # The controller retries a failed run in a new job (other nodes); the job's own Snakemake must not
    # run the command again on the same nodes (a rule's retries would override its --retries 0).
    retries: RUN["retries"] if workflow.is_main_process else 0
    resources:
        # Two whole nodes: one task each (the plugin gives a job one task unless asked, and one task
        # would shrink the job to one node), the server on the first, the client on the second.
        nodes=2,
        tasks=2,
        mem_mb=1000,
        runtime=slurm_runtime,
        slurm_extra=slurm_extra,
        attempt=lambda wc, attempt: attempt,
        **SLURM_RESOURCES,
    shell:
        "{params.run} --run-id {wildcards.run_id} {params.which} --out {output.record}"
        " {params.where} --launcher {params.launcher}"
        " --attempt {resources.attempt} --max-attempts {params.max_attempts}"
        " --stall-timeout {params.stall} 2> {log}"


rule slurm_adopt:
    output:
        done=f"{SLURM_STATE}/adopted/{{job}}.json",
    log:
        "logs/slurm/adopted/{job}.log",
    run:
        wait_for_slurm_job(int(wildcards.job), output.done, log[0])


def wait_for_slurm_job(job, out, log):
    """Wait (in a thread of the controller) until the job a killed controller left has left the queue."""
    import time

    from demuxlab.jsonio import write_json_atomic

    t0 = time.monotonic()
    while True:
        proc = subprocess.run(["squeue", "-h", "-j", str(job), "-o", "%T"], capture_output=True, text=True)
        state = proc.stdout.strip()
        if proc.returncode != 0 or not state or state in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"):
            break
        time.sleep(5)
    final = slurm_nodes.slurm_job_state(job)
    write_json_atomic(Path(out), {"job_id": job, "state": final, "waited_s": round(time.monotonic() - t0, 1)})
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    Path(log).write_text(f"job {job} of an earlier controller ended {final} after {time.monotonic() - t0:.0f} s\n")


rule slurm_report:
    input:
        spec=spec_path,
        ingested=ingested_runs,
    output:
        table="results/{experiment}/report/nodes.csv",
    log:
        "logs/{experiment}/slurm_report.log",
    params:
        cli=DEMUXLAB,
        state=SLURM_STATE,
        quarantine_after=CLUSTER_CONF["quarantine_after"],
        drain=SLURM_SETTINGS.drain,
    shell:
        "{params.cli} slurm report {input.spec} --slurm-state {params.state}"
        " --quarantine-after {params.quarantine_after} --drain {params.drain} --out {output.table} 2> {log}"


def start_slurm_sweep():
    """When the controller starts: the runs the sweep plans, and a thread that rewrites
    results/slurm/progress.json every 10 s (runs pending / running / done / failed per partition)."""
    import threading

    from demuxlab.slurm.progress import progress_doc, sweep_plan, write_progress

    state = Path(SLURM_STATE)
    sweep_plan(state, {name: len(runs_of(name)) for name in SPECS})

    def loop():
        while True:
            try:
                write_progress(state, progress_doc(state))
            except Exception:  # progress is for people watching; the sweep does not depend on it
                pass
            time.sleep(10)

    threading.Thread(target=loop, name="demuxlab-slurm-progress", daemon=True).start()


ONSTART_HOOKS.append(start_slurm_sweep)  # rules/lock.smk's onstart runs it
