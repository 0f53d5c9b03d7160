# Load each run record into PostgreSQL (one transaction per run), in the controller. The same record again is a
# no-op; a different one replaces the stored run only when it started later (the run ran again), keeping the
# earlier record in runs_history (docs/CONTRACTS.md §5).


rule database:
    output:
        url="results/{experiment}/database.url",
    log:
        "logs/{experiment}/database.log",
    conda:
        "../envs/demuxlab.yaml"
    params:
        cli=DEMUXLAB,
    shell:
        "({params.cli} db upgrade && {params.cli} db url > {output.url}) 2> {log}"


rule ingest_run:
    input:
        record=rules.run_point.output.record,
        database=ancient(rules.database.output.url),
    output:
        done="results/{experiment}/ingested/{run_id}.json",
    log:
        "logs/{experiment}/ingested/{run_id}.log",
    resources:
        # Ingests compute on the controller, beside one run job per pair: a few at a time.
        controller=1,
    run:
        ingest_in_controller(input.record, output.done, log[0])

