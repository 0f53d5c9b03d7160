# Host-pair execution `slurm` (config host_pair: slurm, profile ./slurm): the runs (point x repeat) of a
# lane go to Slurm K at a time (slurm.group_runs), each K consecutive runs of a lane one Snakemake group
# (`group:` below), which the executor plugin (snakemake-executor-plugin-slurm) submits as one job of two
# whole nodes; the job's own Snakemake runs the group's runs one after the other in that allocation. Inside
# each run one node runs the server and the other the client (demuxlab-run --slurm, demuxlab.slurm.job).
# Every other rule runs on the controller (the Snakefile makes them local rules). The names this file
# defines are listed in rules/hosts/local.smk; docs/ARCHITECTURE.md, "Slurm", says how a group maps to Slurm.
#
# Before the first run job, slurm_settings checks the settings against the cluster (a bad one fails in
# one line: demuxlab.slurm.check). Jobs an earlier, killed controller left queued or running are found when
# the DAG is built (squeue: the plugin puts each job's rule and wildcards, hence its run id, in its
# comment, and a group job's group id); a run with such a job (or whose group has one) first waits for it
# (slurm_adopt) instead of being submitted beside it, and its new job then only puts back the record that
# job wrote (demuxlab.slurm.job.restore_adopted).

import math
import subprocess

SLURM_CONF_DOC = config["slurm"]
SLURM_STATE = "results/slurm"
CLUSTER_CONF = config["cluster"]
# $SLURM_CONF (Slurm's own variable) wins, else the setting (relative to the repository). Set here, at
# parse time, because the executor plugin runs Slurm's commands (scontrol, sacctmgr) when it starts. Not
# to a file that does not exist: each of Slurm's commands would wait 59 s for it before failing (the
# workflow asks squeue and sinfo before its settings check); the check names the missing file in one line.
if SLURM_CONF_DOC["conf"] and (REPO / SLURM_CONF_DOC["conf"]).is_file():
    os.environ.setdefault("SLURM_CONF", str(REPO / SLURM_CONF_DOC["conf"]))
# The lanes are the runs in flight; each runs on whichever two nodes Slurm gives it.
PAIR_RESOURCE = 0
MODEL_PAIR = 0
# Seconds of a group job's time limit per run beyond its phases: the run's start in the job (its Snakemake,
# the facts step) and its stop.
RUN_SLACK_S = 30


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


def run_seconds(experiment):
    """A run's warm-up + measure + cool-down (its plan's phases)."""
    return sum(float(v) for v in plan_of(experiment)["phases"].values())


_GROUP_RUNS = {}


def group_runs(experiment):
    """K, the runs of a lane one Slurm job holds: slurm.group_runs, or for 0 as many as the partition's time
    limit allows, at most an hour of runs (`demuxlab slurm group-size`: demuxlab.slurm.lanes). Decided once
    per experiment by the controller, which writes it down for the jobs' own Snakemake (results/slurm/
    group_runs.json: a job's Snakemake must name the same groups and time shares)."""
    if experiment in _GROUP_RUNS:
        return _GROUP_RUNS[experiment]
    path = Path(SLURM_STATE) / "group_runs.json"
    setting = int(SLURM_CONF_DOC.get("group_runs") or 0)  # a string when given with --config
    if not workflow.is_main_process:
        try:
            setting = int(json.loads(path.read_text())[experiment])
        except (OSError, ValueError, KeyError, TypeError):
            pass
    elif setting == 0:
        res = subprocess.run(
            [DEMUXLAB, "slurm", "group-size", "--run-s", str(run_seconds(experiment)),
             "--slack-s", str(RUN_SLACK_S), "--margin-s", str(SLURM_CONF_DOC["time_margin_s"]),
             "--partition", SLURM_CONF_DOC["partition"]],
            capture_output=True,
            text=True,
            check=False,
        )  # fmt: skip
        if res.returncode != 0:
            raise WorkflowError((res.stderr.strip().splitlines() or ["slurm group-size failed"])[-1])
        setting = int(res.stdout.strip())
    _GROUP_RUNS[experiment] = max(1, setting)
    if workflow.is_main_process and not workflow.dryrun:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(_GROUP_RUNS, sort_keys=True))
        tmp.replace(path)
    return _GROUP_RUNS[experiment]


def run_group(wildcards):
    """The run's group, hence its Slurm job: the experiment (and adaptive round), the lane, and which K runs
    of the lane (runs i, i + lanes, … of the plan; lane_of). Snakemake joins the runs of a group that depend
    on one another (the lane's chain: previous_in_lane) into one group job."""
    index, plan = run_index(wildcards)
    lanes = lane_count()
    chunk = (index // lanes) // group_runs(wildcards.experiment)
    return f"lane-{wildcards.experiment}-r{plan.get('round', 0)}-l{index % lanes}-g{chunk}"


def group_members(wildcards):
    """The run ids of the run's group (its lane's K runs), in lane order."""
    index, plan = run_index(wildcards)
    lanes = lane_count()
    k = group_runs(wildcards.experiment)
    first = (index // lanes) // k * k * lanes + index % lanes
    ids = plan["run_ids"]
    return [ids[i] for i in range(first, min(len(ids), first + k * lanes), lanes)]


def run_retries():
    """Snakemake's retries of a run job (the rule's, fixed when the workflow is parsed). Snakemake retries
    a group job whole: its finished runs put their kept records back at once (demuxlab.slurm.job.
    restore_adopted) and the run that failed makes its next attempt, so each retry is one run's; a group
    gets run.retries for each of its K runs (K unknown before the plan for group_runs: 0, hence its most,
    AUTO_GROUP_S / RUN_SLACK_S), and each run counts its own attempts (attempt_of) and stops at its last."""
    return RUN["retries"] * (int(SLURM_CONF_DOC.get("group_runs") or 0) or 3600 // RUN_SLACK_S)


def attempt_of(wildcards, attempt):
    """The run's own attempt: one more than the attempts of it that Slurm jobs started (results/slurm/
    attempts; Snakemake's count is its group's)."""
    path = Path(SLURM_STATE) / "attempts" / f"{wildcards.run_id}.json"
    try:
        started = len(json.loads(path.read_text()).get("attempts") or [])
    except (OSError, ValueError, AttributeError):
        started = 0
    return started + 1


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
    live = adopted_jobs()
    job = live.get(wildcards.run_id) or live.get(run_group(wildcards))
    if job:
        out.append(rules.slurm_adopt.output.done.format(job=job))
    return out


def host_prerequisites():
    return [rules.slurm_settings.output.settings]


def where_args(wildcards):
    """demuxlab-run's options inside the job."""
    args = (
        f"--slurm --slurm-state {SLURM_STATE} --stage {SLURM_CONF_DOC['stage']}"
        f" --slurm-group {run_group(wildcards)}"
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
    """The run's share of its group job's time limit, in minutes rounded up: its phases (from the plan, so
    the same before and after the settings' check) and RUN_SLACK_S (its start and stop in the job), and
    slurm.time_margin_s for the first run of the group still to run. Snakemake sums the shares of a group's
    runs for the job's --time: K runs plus the margin (demuxlab.slurm.lanes.group_time_limit_min, which the
    settings' check holds against the partition's limit)."""
    pending = [
        r for r in group_members(wildcards)
        if not os.path.exists(rules.run_point.output.record.format(experiment=wildcards.experiment, run_id=r))
    ]  # fmt: skip
    first = not pending or pending[0] == wildcards.run_id
    margin = float(SLURM_CONF_DOC["time_margin_s"]) if first else 0.0
    return max(1, math.ceil((run_seconds(wildcards.experiment) + RUN_SLACK_S + margin) / 60.0))


def slurm_extra(wildcards, attempt):
    """Whole nodes, no requeue by Slurm (Snakemake retries, elsewhere), and the nodes this attempt must
    avoid: the quarantined ones and those earlier attempts of the group's runs failed on (`demuxlab slurm
    excludes`, asked only when there is a quarantine or an earlier attempt of one of them to read, and only
    by the controller, which submits: a job's own Snakemake on the node evaluates the resources of each of
    its runs too, and there every run after the group's first has an earlier attempt in the group)."""
    state = Path(SLURM_STATE)
    avoid = ""
    if not workflow.is_main_process:
        return "--exclusive"
    # One group, one job: every run of it asks for the same nodes to avoid (those of all the group's runs;
    # Snakemake takes a group's string resources from its first job).
    members = group_members(wildcards)
    tried = any((state / "attempts" / f"{r}.json").exists() for r in members)
    if (state / "quarantine.json").exists() or tried:
        res = subprocess.run(
            [DEMUXLAB, "slurm", "excludes", *members, "--slurm-state", SLURM_STATE,
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
    absolute, also where it names no file: the check says so), each experiment's K and the per-run slack
    (for the group jobs' time limits)."""
    sizes = {e: group_runs(e) for e in config["experiments"]}
    setting = str(REPO / SLURM_CONF_DOC["conf"]) if SLURM_CONF_DOC["conf"] else ""
    doc = {**SLURM_CONF_DOC, "conf": os.environ.get("SLURM_CONF") or setting}
    return shlex.quote(json.dumps({**doc, "group_sizes": sizes, "run_slack_s": RUN_SLACK_S}))


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
