# One job per run (point x repeat). Runs of a lane form a chain in the spec's randomized order; the `pair`
# resource keeps two runs off one host pair. A failed run exits non-zero until its last attempt (so it is
# retried), then its record is written with status "failed" and the reason.


rule run_point:
    input:
        spec=spec_path,
        build=lambda wc: [ancient(p) for p in build_outputs(wc)],
        server_facts=ancient(expand(rules.host_facts.output.facts, pair=config["host_pair"])[0]),
        after=previous_in_lane,
    output:
        record="results/{experiment}/runs/{run_id}.json",
    log:
        "logs/{experiment}/runs/{run_id}.log",
    conda:
        "../envs/demuxlab.yaml"
    params:
        cli=DEMUXLAB,
        launcher=lambda wc: launcher_of(wc.experiment),
        pair=config["host_pair"],
        max_attempts=RUN["retries"] + 1,
        stall=RUN["stall_timeout_s"],
    retries: RUN["retries"]
    resources:
        pair=1,
        attempt=lambda wc, attempt: attempt,
    shell:
        "{params.cli} run-point {input.spec} --run-id {wildcards.run_id} --out {output.record}"
        " --server-facts {input.server_facts} --launcher {params.launcher} --pair {params.pair}"
        " --attempt {resources.attempt} --max-attempts {params.max_attempts}"
        " --stall-timeout {params.stall} 2> {log}"
