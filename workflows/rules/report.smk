# Per point: mean over repeats with a 95% confidence interval; a CSV and a throughput-vs-threads figure.
# Outputs marked report(): `snakemake --report report.html` shows them under the experiment's category.


rule report:
    input:
        spec=spec_file,
        ingested=ingested_runs,
        decisions=adaptive_decisions,
    output:
        csv=report(
            "results/{experiment}/report/points.csv",
            caption="../report/points.rst",
            category="{experiment}",
            subcategory="Throughput",
            labels={"result": "mean throughput per point, 95% CI", "type": "table"},
        ),
        figure=report(
            "results/{experiment}/report/throughput_vs_threads.png",
            caption="../report/throughput.rst",
            category="{experiment}",
            subcategory="Throughput",
            labels={"result": "throughput vs server threads", "type": "figure"},
        ),
    log:
        "logs/{experiment}/report.log",
    conda:
        "../envs/demuxlab.yaml"
    params:
        cli=DEMUXLAB,
        adaptive=adaptive_option,
    shell:
        "{params.cli} report {input.spec} {params.adaptive} --out-dir $(dirname {output.csv}) 2> {log}"
