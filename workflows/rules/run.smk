# One job per run (point x repeat), started the same way wherever it runs: `demuxlab-run TICKET`
# (demuxlab.runpoint_lean), the run's ticket from its plan or adaptive round (rules/plan.smk). The job hashes
# the spec file against the ticket (a spec edited since the plan refuses the run in one line) and never
# loads or expands the spec again. Runs form lanes in the spec's randomized order: run i waits for run
# i - lanes of its experiment's plan, so drift in the machine does not line up with one design. Where the
# runs go (the local pair, any free pair of a cluster, two nodes Slurm allocates) is the host-pair
# execution's: rules/hosts/ (where_args). A failed run exits non-zero until its last attempt (so it is
# retried), then its record is written with status "failed" and the reason.


rule run_point:
    input:
        ticket=run_ticket,
        spec=spec_file,
        build=build_inputs,
        hosts=host_inputs,
        after=previous_in_lane,
    output:
        record="results/{experiment}/runs/{run_id}.json",
    log:
        "logs/{experiment}/runs/{run_id}.log",
    conda:
        "../envs/demuxlab.yaml"
    params:
        run=DEMUXLAB_RUN,
        git_rev=lambda wc: shlex.quote(controller_revision()),
        launcher=lambda wc: run_launcher(wc.experiment),
        max_attempts=RUN["retries"] + 1,
        stall=RUN["stall_timeout_s"],
        where=where_args,
    # The controller retries a failed run; a job's own Snakemake (a remote executor's, rules/hosts/slurm.smk)
    # must not run the command again where it failed (a rule's retries override its --retries 0).
    retries: run_retries() if workflow.is_main_process else 0
    # Runs one job of an executor holds together (rules/hosts/slurm.smk: K runs of a lane); none elsewhere.
    group: run_group
    resources:
        pair=PAIR_RESOURCE,
        attempt=attempt_of,
        **HOST_RESOURCES,
    shell:
        "{params.run} {input.ticket} --out {output.record} {params.where} --launcher {params.launcher}"
        " --attempt {resources.attempt} --max-attempts {params.max_attempts}"
        " --stall-timeout {params.stall} --git-rev {params.git_rev} 2> {log}"
