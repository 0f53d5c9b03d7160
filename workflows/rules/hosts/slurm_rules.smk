# The rules of the Slurm host-pair execution (rules/hosts/slurm.smk); all run on the controller.


# The settings checked against the cluster before the first run job: partition, account, constraint (and
# the features of pinned hardware classes), two usable nodes, a time limit long enough for every run. One
# line naming the setting when one is wrong (demuxlab.slurm.check; in the log, which the slurm profile's
# show-failed-logs prints on the controller's terminal once, since it stops the sweep); the partition,
# account, usable nodes and time limits for the run jobs' options when all are right.
rule slurm_settings:
    input:
        plans=expand(rules.plan.output.plan, experiment=config["experiments"]),
    output:
        settings=f"{SLURM_STATE}/settings.json",
    log:
        "logs/slurm/settings.log",
    conda:
        "../../envs/demuxlab.yaml"
    params:
        cli=DEMUXLAB,
        settings=lambda wc: slurm_check_settings(),
        state=lambda wc, output: os.path.dirname(output.settings),
    shell:
        "{params.cli} slurm check {input.plans} --settings-json {params.settings} --slurm-state {params.state}"
        " --out {output.settings} 2> {log}"


# A run job a killed controller left queued or running: wait until it has left the queue; the run's new
# job then finds that job's record (rules/hosts/slurm.smk).
rule slurm_adopt:
    output:
        done=f"{SLURM_STATE}/adopted/{{job}}.json",
    log:
        "logs/slurm/adopted/{job}.log",
    conda:
        "../../envs/demuxlab.yaml"
    params:
        cli=DEMUXLAB,
    shell:
        "{params.cli} slurm wait-job {wildcards.job} --out {output.done} 2> {log}"


# The runs this sweep plans (progress says how many remain; `demuxlab slurm progress`, started beside the
# controller, rewrites results/slurm/progress.json while it runs).
rule slurm_sweep:
    input:
        plans=expand(rules.plan.output.plan, experiment=config["experiments"]),
    output:
        sweep=f"{SLURM_STATE}/sweep.json",
    log:
        "logs/slurm/sweep.log",
    conda:
        "../../envs/demuxlab.yaml"
    params:
        cli=DEMUXLAB,
    shell:
        "{params.cli} slurm sweep {input.plans} --out {output.sweep} 2> {log}"


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
