# One job per run (point x repeat). Runs form lanes in the spec's randomized order: run i waits for run
# i - lanes of its experiment's plan, so drift in the machine does not line up with one design. Where the
# runs go (the local pair, any free pair of a cluster) is the host-pair execution's: rules/hosts/. A failed
# run exits non-zero until its last attempt (so it is retried), then its record is written with status
# "failed" and the reason.


rule run_point:
    input:
        spec=spec_file,
        build=build_inputs,
        hosts=host_inputs,
        after=previous_in_lane,
        checked=checked_input,
    output:
        record="results/{experiment}/runs/{run_id}.json",
    log:
        "logs/{experiment}/runs/{run_id}.log",
    conda:
        "../envs/demuxlab.yaml"
    params:
        run=run_command,
        launcher=lambda wc: run_launcher(wc.experiment),
        max_attempts=RUN["retries"] + 1,
        stall=RUN["stall_timeout_s"],
        where=where_args,
        which=which_run,
    # The controller retries a failed run; a job's own Snakemake (a remote executor's, rules/hosts/slurm.smk)
    # must not run the command again where it failed (a rule's retries override its --retries 0).
    retries: RUN["retries"] if workflow.is_main_process else 0
    resources:
        pair=PAIR_RESOURCE,
        attempt=lambda wc, attempt: attempt,
        **HOST_RESOURCES,
    shell:
        "{params.run} --run-id {wildcards.run_id} {params.which} --out {output.record}"
        " {params.where} --launcher {params.launcher}"
        " --attempt {resources.attempt} --max-attempts {params.max_attempts}"
        " --stall-timeout {params.stall} 2> {log}"
