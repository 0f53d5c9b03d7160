# Load each run record into PostgreSQL (idempotent per run id; one transaction per run).


rule database:
    output:
        marker="results/{experiment}/database.url",
    log:
        "logs/{experiment}/database.log",
    shell:
        "({DEMUXLAB} db upgrade && {DEMUXLAB} db url > {output.marker}) 2> {log}"


rule ingest_run:
    input:
        record=rules.run_point.output.record,
        database=ancient(rules.database.output.marker),
    output:
        done="results/{experiment}/ingested/{run_id}.json",
    log:
        "logs/{experiment}/ingested/{run_id}.log",
    shell:
        "{DEMUXLAB} ingest {input.record} --done {output.done} 2> {log}"
