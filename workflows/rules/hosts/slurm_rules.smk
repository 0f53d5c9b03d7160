# The rules of the Slurm host-pair execution (rules/hosts/slurm.smk); all run on the controller.


# The settings checked against the cluster before the first run job: partition, account, constraint (and
# the features of pinned hardware classes), two usable nodes, a time limit long enough for every run. One
# line naming the setting when one is wrong (demuxlab.slurm.check); the partition, account and usable nodes
# for the run jobs' options when all are right.
rule slurm_settings:
    input:
        checked=lambda wc: [checked_spec_path(name) for name in config["experiments"]],
    output:
        settings=f"{SLURM_STATE}/settings.json",
    log:
        "logs/slurm/settings.log",
    run:
        check_slurm_settings(input.checked, output.settings, log[0])


# A run job a killed controller left queued or running: wait (in a thread of the controller) until it has
# left the queue; the run's new job then finds that job's record (rules/hosts/slurm.smk).
rule slurm_adopt:
    output:
        done=f"{SLURM_STATE}/adopted/{{job}}.json",
    log:
        "logs/slurm/adopted/{job}.log",
    run:
        from demuxlab.slurm.adopt import wait_for_job

        write_json(output.done, wait_for_job(int(wildcards.job)), log[0])


# The runs this sweep plans (progress says how many remain), and a thread of the controller rewriting
# results/slurm/progress.json while it runs (demuxlab.slurm.progress).
rule slurm_sweep:
    input:
        plans=expand(rules.plan.output.plan, experiment=config["experiments"]),
    output:
        sweep=f"{SLURM_STATE}/sweep.json",
    log:
        "logs/slurm/sweep.log",
    run:
        from demuxlab.slurm.progress import sweep_doc

        write_json(output.sweep, sweep_doc(input.plans), log[0])


rule slurm_report:
    input:
        spec=spec_file,
        ingested=ingested_runs,
        sweep=rules.slurm_sweep.output.sweep,
    output:
        table=report(
            "results/{experiment}/report/nodes.csv",
            caption="../../report/nodes.rst",
            category="{experiment}",
            subcategory="Slurm nodes",
            labels={"result": "runs and quarantine per node", "type": "table"},
        ),
    log:
        "logs/{experiment}/slurm_report.log",
    conda:
        "../../envs/demuxlab.yaml"
    params:
        cli=DEMUXLAB,
        state=lambda wc, input: os.path.dirname(input.sweep),
        quarantine_after=CLUSTER_CONF["quarantine_after"],
        drain=SLURM_CONF_DOC["drain"],
    shell:
        "{params.cli} slurm report {input.spec} --slurm-state {params.state}"
        " --quarantine-after {params.quarantine_after} --drain {params.drain} --out {output.table} 2> {log}"
