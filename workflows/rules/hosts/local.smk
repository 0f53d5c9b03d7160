# Host-pair execution `local` (config host_pair: local, profile ./local): server and client on this
# machine, pinned to disjoint CPUs. One pair, so the `pair` resource lets one run (or model job) use it at a
# time; `run.lanes` chains of runs.
#
# A host-pair execution is two files, rules/hosts/<host_pair>.smk (these names) and <host_pair>_rules.smk
# (the rules making what host_inputs names). The Snakefile includes the one the config's host_pair names;
# run.smk, model.smk and the input functions use:
#   lane_count()              independent chains of runs (runs within a lane keep the spec's order)
#   host_inputs(wildcards)    files a run needs from its hosts (facts, provisioning), `ancient`
#   where_args(wildcards)     demuxlab-run's options saying where the run goes
#   run_launcher(experiment)  the launcher demuxlab-run uses
#   PAIR_RESOURCE             the `pair` resource a run holds (1: runs share one pair; 0: lanes are pairs)
#   MODEL_PAIR                the `pair` resource the model jobs hold (1 when they would share the CPUs
#                             of a measured run)
#   host_targets()            report outputs it adds per experiment (patterns with {experiment})
#   host_checkpoints()        reads its checkpoints' outputs (plan_of calls it too)
#   host_prerequisites()      every file upstream of the runs through `ancient` inputs (see
#                             run_prerequisites in rules/inputs.smk)
#   HOST_RESOURCES            resources a run job asks for besides `pair` (an executor's: rules/hosts/slurm.smk)
#   run_group(wildcards)      the run job's Snakemake group (runs one executor job holds), or None
#   run_retries()             the run rule's retries
#   attempt_of(wildcards, attempt)  the run's attempt, for demuxlab-run --attempt

PAIR_RESOURCE = 1
HOST_RESOURCES = {}
# The models compute on the machine that measures: keep them apart from runs.
MODEL_PAIR = 1


def local_facts():
    return rules.host_facts.output.facts.format(pair="local")


def host_checkpoints():
    pass


def lane_count():
    return RUN["lanes"]


def host_inputs(wildcards):
    return [ancient(local_facts())]


def where_args(wildcards):
    return f"--server-facts {local_facts()} --pair local"


def run_launcher(experiment):
    return plan_of(experiment)["launcher"] if config["launcher"] == "spec" else config["launcher"]


def host_targets():
    return []


def host_prerequisites():
    return [local_facts()]


include: "local_rules.smk"


def run_group(wildcards):
    return None


def run_retries():
    return RUN["retries"]


def attempt_of(wildcards, attempt):
    return attempt
