# Host-pair execution `cluster` (config host_pair: cluster, profile ./cluster): sweeps over the pairs of an
# Ansible inventory (or a simulated cluster file), one lane per pair; each run takes whichever healthy pair
# of its class is free, under the pair's lease (`demuxlab-run --pairs-from`, demuxlab.cluster.schedule). The
# names this file defines are listed in rules/hosts/local.smk.
#
# Provision every host (playbooks/site.yml: Docker engine, tuning, facts, images), collect each host's
# facts, and after the runs a per-pair table of the sweep. A simulated cluster needs no host (the sim
# launcher). site.yml runs again only when the inventory, the playbooks or the images change.

CLUSTER_CONF = config["cluster"]
CLUSTER_STATE = "results/cluster"
INVENTORY = os.environ.get("DEMUXLAB_INVENTORY") or config["inventory"]
if not INVENTORY:
    raise WorkflowError(
        "demuxlab: error: config: inventory: no inventory for the cluster profile (set DEMUXLAB_INVENTORY, "
        "or `inventory` in the workflow config: --config inventory=PATH)"
    )
INVENTORY = str(Path(INVENTORY) if os.path.isabs(INVENTORY) else REPO / INVENTORY)
if not os.path.exists(INVENTORY):
    raise WorkflowError(
        f"demuxlab: error: {INVENTORY}: inventory not found (DEMUXLAB_INVENTORY or the workflow's `inventory`)"
    )
# The lanes (one per pair) already keep a run per pair at most; models compute on the controller.
PAIR_RESOURCE = 0
HOST_RESOURCES = {}
MODEL_PAIR = 0


def inventory_files(wildcards):
    """The inventory's files, or the simulated cluster file (a change re-reads the pairs)."""
    path = Path(INVENTORY)
    if path.is_file():
        return [str(path)]
    return sorted(str(p) for p in path.rglob("*") if p.is_file())


def cluster_pairs():
    """The inventory's pairs and hosts, and whether they are simulated (checkpoint cluster_pairs)."""
    return checkpoint_json(checkpoints.cluster_pairs)


def host_checkpoints():
    cluster_pairs()


def playbook_files(wildcards):
    """The playbooks (a change re-provisions); not the inventories, nor Python's byte-code caches."""
    return sorted(
        str(p)
        for p in (REPO / "playbooks").rglob("*")
        if p.is_file() and not {"inventories", "__pycache__"} & set(p.parts) and p.suffix != ".pyc"
    )


def provisioned(wildcards):
    """Real hosts are provisioned first; a simulated cluster needs no host (its file, as JSON, instead)."""
    if cluster_pairs()["simulated"]:
        return [rules.simulated_pairs.output.pairs]
    return [ancient(rules.provision.output.done)]


def hosts_facts(wildcards):
    """Every real host's facts."""
    pairs = cluster_pairs()
    if pairs["simulated"]:
        return []
    return [ancient(f) for f in expand(rules.cluster_facts.output.facts, host=pairs["hosts"])]


def lane_count():
    return len(cluster_pairs()["pairs"])


def host_inputs(wildcards):
    return [ancient(rules.cluster_ready.output.ready)]


def where_args(wildcards):
    """Any free healthy pair of the inventory, starting at the run's lane (demuxlab-run --pairs-from). A
    simulated cluster's file is read as JSON, written by simulated_pairs, so the run process needs no
    PyYAML."""
    source = rules.simulated_pairs.output.pairs if cluster_pairs()["simulated"] else INVENTORY
    return (
        f"--pairs-from {source} --cluster-state {CLUSTER_STATE} --lane {lane_of(wildcards)}"
        f" --quarantine-after {CLUSTER_CONF['quarantine_after']} --pair-wait {CLUSTER_CONF['pair_wait_s']}"
        f" --noise-wait {CLUSTER_CONF['noise_wait_s']}"
    )


def run_launcher(experiment):
    if config["launcher"] != "spec":
        return config["launcher"]
    return "sim" if cluster_pairs()["simulated"] else "remote"


def host_targets():
    return [rules.pairs_report.output.table]


def host_prerequisites():
    pairs = cluster_pairs()
    files = [rules.cluster_ready.output.ready]
    if not pairs["simulated"]:
        hosts = expand(rules.cluster_facts.output.facts, host=pairs["hosts"])
        files += [rules.provision.output.done, *hosts]
    return files


include: "cluster_rules.smk"


def run_group(wildcards):
    return None


def run_retries():
    return RUN["retries"]


def attempt_of(wildcards, attempt):
    return attempt
