# Per point: mean over repeats with a 95% confidence interval; a CSV and a throughput-vs-threads figure.
# Outputs marked report(): `snakemake --report report.html` shows them under the experiment's category, the
# HTML page inline. One label per entry: two entries whose second label takes two values make the report
# offer a toggle between entries that do not exist (its script then fails on 'mime_type').


rule report:
    input:
        spec=spec_file,
        ingested=ingested_runs,
        decisions=adaptive_decisions,
    output:
        page=report(
            "results/{experiment}/report/points.html",
            caption="../report/points_page.rst",
            category="{experiment}",
            subcategory="Throughput",
            labels={"result": "1. throughput: the figure and every point"},
        ),
        csv=report(
            "results/{experiment}/report/points.csv",
            caption="../report/points.rst",
            category="{experiment}",
            subcategory="Throughput",
            labels={"result": "2. points.csv (the table to download)"},
        ),
        figure=report(
            "results/{experiment}/report/throughput_vs_threads.png",
            caption="../report/throughput.rst",
            category="{experiment}",
            subcategory="Throughput",
            labels={"result": "3. throughput_vs_threads.png (the figure alone)"},
        ),
        # per validity check its runs' verdicts and the experiment's order effect (CONTRACTS.md §7)
        checks="results/{experiment}/report/checks.csv",
    log:
        "logs/{experiment}/report.log",
    conda:
        "../envs/demuxlab.yaml"
    params:
        cli=DEMUXLAB,
        adaptive=adaptive_option,
    shell:
        "{params.cli} report {input.spec} {params.adaptive} --out-dir $(dirname {output.csv}) 2> {log}"
