# The rules of the cluster's host-pair execution (rules/hosts/cluster.smk).


# The pairs and hosts of the inventory, and whether they are simulated: the lanes of the DAG.
checkpoint cluster_pairs:
    input:
        inventory=inventory_files,
    output:
        pairs=f"{CLUSTER_STATE}/inventory.json",
    log:
        "logs/cluster/pairs.log",
    conda:
        "../../envs/demuxlab.yaml"
    params:
        cli=DEMUXLAB,
        inventory=INVENTORY,
    shell:
        "{params.cli} cluster pairs --pairs-from {params.inventory} --out {output.pairs} 2> {log}"


rule provision:
    input:
        inventory=inventory_files,
        playbooks=playbook_files,
        images=rules.build_images.output.manifest,
    output:
        done=f"{CLUSTER_STATE}/provisioned.json",
    log:
        "logs/cluster/provision.log",
    conda:
        "../../envs/demuxlab.yaml"
    params:
        cli=DEMUXLAB,
        inventory=INVENTORY,
    shell:
        "{params.cli} cluster provision --inventory {params.inventory} --out {output.done} > {log} 2>&1"


rule cluster_facts:
    input:
        provisioned=ancient(rules.provision.output.done),
    output:
        facts=f"{CLUSTER_STATE}/facts/{{host}}.json",
    log:
        "logs/cluster/facts/{host}.log",
    conda:
        "../../envs/demuxlab.yaml"
    params:
        cli=DEMUXLAB,
        inventory=INVENTORY,
    shell:
        "{params.cli} cluster facts --inventory {params.inventory} --host {wildcards.host}"
        " --out {output.facts} 2> {log}"


# A simulated cluster's file as JSON, for the run processes (demuxlab-run reads it without PyYAML).
rule simulated_pairs:
    input:
        inventory=inventory_files,
    output:
        pairs=f"{CLUSTER_STATE}/simulated-pairs.json",
    log:
        "logs/cluster/simulated-pairs.log",
    conda:
        "../../envs/demuxlab.yaml"
    params:
        cli=DEMUXLAB,
        inventory=INVENTORY,
    shell:
        "{params.cli} cluster simulated-pairs --pairs-from {params.inventory} --out {output.pairs} 2> {log}"


# The runs this sweep plans, so that progress (results/cluster/progress.json) can say how many remain.
rule sweep_plan:
    input:
        plans=expand(rules.plan.output.plan, experiment=config["experiments"]),
        pairs=rules.cluster_pairs.output.pairs,
    output:
        sweep=f"{CLUSTER_STATE}/sweep.json",
    log:
        "logs/cluster/sweep.log",
    conda:
        "../../envs/demuxlab.yaml"
    params:
        cli=DEMUXLAB,
    shell:
        "{params.cli} cluster sweep {input.plans} --pairs {input.pairs} --out {output.sweep} 2> {log}"


# The cluster is ready for the sweep: hosts provisioned with their facts, the sweep planned. One file, so a
# run has one cluster input (one DAG edge per run, not one per run and host).
rule cluster_ready:
    input:
        sweep=rules.sweep_plan.output.sweep,
        provisioned=provisioned,
        facts=hosts_facts,
    output:
        ready=f"{CLUSTER_STATE}/ready.json",
    log:
        "logs/cluster/ready.log",
    conda:
        "../../envs/demuxlab.yaml"
    params:
        cli=DEMUXLAB,
    shell:
        "{params.cli} cluster ready {input.facts} --out {output.ready} 2> {log}"


rule pairs_report:
    input:
        spec=spec_file,
        ingested=ingested_runs,
    output:
        table=report(
            "results/{experiment}/report/pairs.csv",
            caption="../../report/pairs.rst",
            category="{experiment}",
            subcategory="Host pairs",
            labels={"result": "runs and quarantine per pair", "type": "table"},
        ),
    log:
        "logs/{experiment}/pairs_report.log",
    conda:
        "../../envs/demuxlab.yaml"
    params:
        cli=DEMUXLAB,
        inventory=INVENTORY,
        state=CLUSTER_STATE,
    shell:
        "{params.cli} cluster report {input.spec} --pairs-from {params.inventory}"
        " --cluster-state {params.state} --out {output.table} 2> {log}"
