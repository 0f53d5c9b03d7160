# Per point: mean over repeats with a 95% confidence interval; a CSV and a throughput-vs-threads figure.


rule report:
    input:
        spec=spec_path,
        ingested=ingested_runs,
    output:
        csv="results/{experiment}/report/points.csv",
        figure="results/{experiment}/report/throughput_vs_threads.png",
    log:
        "logs/{experiment}/report.log",
    conda:
        "../envs/demuxlab.yaml"
    params:
        cli=DEMUXLAB,
    shell:
        "{params.cli} report {input.spec} --out-dir $(dirname {output.csv}) 2> {log}"
