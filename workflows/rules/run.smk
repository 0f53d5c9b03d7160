# One job per run (point x repeat). Runs of a lane form a chain in the spec's randomized order; the `pair`
# resource keeps two runs off the local pair; on a cluster there is one lane per pair and each run takes a
# free healthy pair under its lease (`run-point --pairs-from`). A failed run exits non-zero until its last attempt (so it is
# retried), then its record is written with status "failed" and the reason.


rule run_point:
    input:
        spec=spec_path,
        build=lambda wc: [ancient(p) for p in build_outputs(wc)],
        server_facts=host_facts_input,
        cluster=cluster_inputs,
        after=previous_in_lane,
    output:
        record="results/{experiment}/runs/{run_id}.json",
    log:
        "logs/{experiment}/runs/{run_id}.log",
    conda:
        "../envs/demuxlab.yaml"
    params:
        run=run_command,
        launcher=lambda wc: launcher_of(wc.experiment),
        max_attempts=RUN["retries"] + 1,
        stall=RUN["stall_timeout_s"],
        where=where_args,
        which=which_run,
    retries: RUN["retries"]
    resources:
        # Local: the one pair. Cluster: the lanes (one per pair) already keep a run per pair at most.
        pair=0 if CLUSTER else 1,
        attempt=lambda wc, attempt: attempt,
    shell:
        "{params.run} --run-id {wildcards.run_id} {params.which} --out {output.record}"
        " {params.where} --launcher {params.launcher}"
        " --attempt {resources.attempt} --max-attempts {params.max_attempts}"
        " --stall-timeout {params.stall} 2> {log}"
