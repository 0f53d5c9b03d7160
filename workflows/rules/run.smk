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
    output:
        record="results/{experiment}/runs/{run_id}.json",
    log:
        "logs/{experiment}/runs/{run_id}.log",
    conda:
        "../envs/demuxlab.yaml"
    params:
        cli=DEMUXLAB,
        launcher=lambda wc: run_launcher(wc.experiment),
        max_attempts=RUN["retries"] + 1,
        stall=RUN["stall_timeout_s"],
        where=where_args,
        which=which_run,
    retries: RUN["retries"]
    resources:
        pair=PAIR_RESOURCE,
        attempt=lambda wc, attempt: attempt,
    shell:
        "{params.cli} run-point {input.spec} --run-id {wildcards.run_id} {params.which} --out {output.record}"
        " {params.where} --launcher {params.launcher}"
        " --attempt {resources.attempt} --max-attempts {params.max_attempts}"
        " --stall-timeout {params.stall} 2> {log}"
