# Host-pair execution `slurm` (config host_pair: slurm, profile ./slurm): each run (point x repeat) is one
# Slurm job of two whole nodes, submitted by Snakemake's own executor plugin (snakemake-executor-plugin-
# slurm); inside it one node runs the server and the other the client (demuxlab-run --slurm,
# demuxlab.slurm.job). Every other rule runs on the controller (the Snakefile makes them local rules). The
# names this file defines are listed in rules/hosts/local.smk.
#
# Before the first run job, slurm_settings checks the settings against the cluster (a bad one fails in
# one line: demuxlab.slurm.check). Jobs an earlier, killed controller left queued or running are found when
# the DAG is built (squeue: the plugin puts each job's rule and wildcards, hence its run id, in its
# comment); a run with such a job first waits for it (slurm_adopt) instead of being submitted beside
# it, and its new job then only puts back the record that job wrote (demuxlab.slurm.job.restore_adopted).

import subprocess

SLURM_CONF_DOC = config["slurm"]
SLURM_STATE = "results/slurm"
CLUSTER_CONF = config["cluster"]
# $SLURM_CONF (Slurm's own variable) wins, else the setting (relative to the repository). Set here, at
# parse time, because the executor plugin runs Slurm's commands (scontrol, sacctmgr) when it starts.
if SLURM_CONF_DOC["conf"]:
    os.environ.setdefault("SLURM_CONF", str(REPO / SLURM_CONF_DOC["conf"]))
# The lanes are the runs in flight; each runs on whichever two nodes Slurm gives it.
PAIR_RESOURCE = 0
MODEL_PAIR = 0


def slurm_settings():
    """The settings as checked against the cluster (rule slurm_settings), or None before it ran."""
    path = Path(f"{SLURM_STATE}/settings.json")
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def host_checkpoints():
    pass


def lane_count():
    return int(SLURM_CONF_DOC["pairs"])  # a string when given with --config


_ADOPTED = {}


def adopted_jobs():
    """Run id -> Slurm job id of this workflow's run jobs still queued or running (a killed controller's):
    asked once, when the DAG is built, in the controller only (`demuxlab slurm live-jobs`: squeue)."""
    if "done" not in _ADOPTED:
        _ADOPTED["done"] = True
        if workflow.is_main_process and not workflow.dryrun:
            res = subprocess.run(
                [DEMUXLAB, "slurm", "live-jobs", "--workdir", os.getcwd()],
                capture_output=True,
                text=True,
                check=False,
            )
            if res.returncode != 0:
                raise WorkflowError((res.stderr.strip().splitlines() or ["slurm live-jobs failed"])[-1])
            _ADOPTED.update(json.loads(res.stdout))
    return {k: v for k, v in _ADOPTED.items() if k != "done"}


def host_inputs(wildcards):
    """The checked settings, and a job of the run that a killed controller left in Slurm (waited for)."""
    out = [ancient(rules.slurm_settings.output.settings)]
    job = adopted_jobs().get(wildcards.run_id)
    if job:
        out.append(rules.slurm_adopt.output.done.format(job=job))
    return out


def host_prerequisites():
    return [rules.slurm_settings.output.settings]


def where_args(wildcards):
    """demuxlab-run's options inside the job."""
    args = (
        f"--slurm --slurm-state {SLURM_STATE} --stage {SLURM_CONF_DOC['stage']}"
        f" --drain {SLURM_CONF_DOC['drain']} --quarantine-after {CLUSTER_CONF['quarantine_after']}"
        f" --noise-wait {CLUSTER_CONF['noise_wait_s']}"
    )
    if SLURM_CONF_DOC["classes"]:
        args += f" --class-features {','.join(SLURM_CONF_DOC['classes'])}"
    return args


def run_launcher(experiment):
    return SLURM_CONF_DOC["launcher"]


def host_targets():
    return [rules.slurm_report.output.table]


def slurm_runtime(wildcards):
    """The job's time limit in minutes, as the settings' check computed it (the run's phases plus
    slurm.time_margin_s); 1 until the check ran (Snakemake evaluates a job's resources again once its
    inputs, the checked settings among them, exist)."""
    return (slurm_settings() or {}).get("time_limit_min", {}).get(wildcards.experiment, 1)


def slurm_extra(wildcards, attempt):
    """Whole nodes, no requeue by Slurm (Snakemake retries, elsewhere), and the nodes this attempt must
    avoid: the quarantined ones and those earlier attempts of the run failed on (`demuxlab slurm excludes`,
    asked only when there is a quarantine or an earlier attempt of the run to read)."""
    state = Path(SLURM_STATE)
    avoid = ""
    if (state / "quarantine.json").exists() or (state / "attempts" / f"{wildcards.run_id}.json").exists():
        res = subprocess.run(
            [DEMUXLAB, "slurm", "excludes", wildcards.run_id, "--slurm-state", SLURM_STATE,
             "--usable", ",".join((slurm_settings() or {}).get("nodes") or [])],
            capture_output=True,
            text=True,
            check=False,
        )  # fmt: skip
        if res.returncode != 0:
            raise WorkflowError((res.stderr.strip().splitlines() or ["slurm excludes failed"])[-1])
        avoid = res.stdout.strip()
    return "--exclusive" + (f" --exclude={avoid}" if avoid else "")


def slurm_partition(wildcards):
    return (slurm_settings() or {}).get("partition") or SLURM_CONF_DOC["partition"]


def slurm_account(wildcards):
    return (slurm_settings() or {}).get("account") or SLURM_CONF_DOC["account"]


def slurm_constraint(wildcards):
    return (slurm_settings() or {}).get("constraints", {}).get(wildcards.experiment) or ""


# The run jobs' Slurm resources (rules/run.smk adds them): two whole nodes, one task each (the plugin gives
# a job one task unless asked, and one task on two nodes makes Slurm shrink the job to one node).
HOST_RESOURCES = {
    "nodes": 2,
    "tasks": 2,
    "mem_mb": 1000,
    "runtime": slurm_runtime,
    "slurm_partition": slurm_partition,
    "slurm_account": slurm_account,
    "slurm_extra": slurm_extra,
}
if SLURM_CONF_DOC["constraint"] or SLURM_CONF_DOC["classes"]:
    HOST_RESOURCES["constraint"] = slurm_constraint


def slurm_check_settings():
    """The slurm settings for `demuxlab slurm check`: slurm.conf in effect ($SLURM_CONF, or the setting made
    absolute above)."""
    return shlex.quote(json.dumps({**SLURM_CONF_DOC, "conf": os.environ.get("SLURM_CONF", "")}))


def start_slurm_progress():
    """`demuxlab slurm progress --every 10` beside the controller, rewriting results/slurm/progress.json
    until the controller is gone (it watches this process)."""
    Path("logs/slurm").mkdir(parents=True, exist_ok=True)
    with open("logs/slurm/progress.log", "ab") as log:
        CONTROLLER.append(
            subprocess.Popen(
                [DEMUXLAB, "slurm", "progress", "--slurm-state", SLURM_STATE, "--every", "10",
                 "--while-parent", str(os.getpid())],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        )  # fmt: skip


def only_runs_in_slurm():
    """Every rule but run_point runs on the controller (builds, plans, ingest, reports, models) as
    local rules, named once every rule is known (Snakemake asks whether a job is local as it schedules)."""
    workflow.localrules(*(r.name for r in workflow.rules if r.name != "run_point"))


ONSTART_HOOKS.append(only_runs_in_slurm)  # rules/lock.smk's onstart runs these
ONSTART_HOOKS.append(start_slurm_progress)


include: "slurm_rules.smk"
