# Cluster profile only: provision every host of the inventory (playbooks/site.yml: Docker engine, tuning,
# facts, images), collect each host's facts, and after the runs a per-pair table of the sweep. Skipped for
# a simulated cluster (the sim launcher needs no host). site.yml runs again only when the inventory, the
# playbooks or the images change.

if CLUSTER and not SIMULATED:

    rule provision:
        input:
            inventory=inventory_files(),
            playbooks=playbook_files(),
            images=rules.build_images.output.manifest,
        output:
            done=f"{CLUSTER_STATE}/provisioned.json",
        log:
            "logs/cluster/provision.log",
        conda:
            "../envs/demuxlab.yaml"
        params:
            cli=DEMUXLAB,
            inventory=lambda wc: INVENTORY,
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
            "../envs/demuxlab.yaml"
        params:
            cli=DEMUXLAB,
            inventory=lambda wc: INVENTORY,
        shell:
            "{params.cli} cluster facts --inventory {params.inventory} --host {wildcards.host}"
            " --out {output.facts} 2> {log}"

    rule cluster_ready:
        input:
            provisioned=ancient(rules.provision.output.done),
            facts=[ancient(f"{CLUSTER_STATE}/facts/{host.name}.json") for host in PAIRS.hosts()],
        output:
            ready=f"{CLUSTER_STATE}/ready.json",
        log:
            "logs/cluster/ready.log",
        run:
            write_cluster_ready(output.ready, input.facts, log[0])


if CLUSTER:

    rule pairs_report:
        input:
            spec=spec_path,
            ingested=ingested_runs,
        output:
            table="results/{experiment}/report/pairs.csv",
        log:
            "logs/{experiment}/pairs_report.log",
        conda:
            "../envs/demuxlab.yaml"
        params:
            cli=DEMUXLAB,
            inventory=lambda wc: INVENTORY,
            state=CLUSTER_STATE,
        shell:
            "{params.cli} cluster report {input.spec} --pairs-from {params.inventory}"
            " --cluster-state {params.state} --out {output.table} 2> {log}"

    ONSTART_HOOKS.append(write_sweep_plan)  # rules/lock.smk's onstart runs it
