# Per point: mean over repeats with a 95% confidence interval; a CSV and a throughput-vs-threads figure.


rule report:
    input:
        spec=spec_path,
        ingested=lambda wc: expand(rules.ingest_run.output.done, experiment=wc.experiment, run_id=runs_of(wc.experiment)),
    output:
        csv="results/{experiment}/report/points.csv",
        figure="results/{experiment}/report/throughput_vs_threads.png",
    log:
        "logs/{experiment}/report.log",
    shell:
        "{DEMUXLAB} report {input.spec} --out-dir $(dirname {output.csv}) 2> {log}"
