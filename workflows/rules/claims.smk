# A verdict for every claim of seeds 000-004 the experiment's points can test, and the best design per
# workload (docs/claims.md). For modelled experiments it waits for the predictions: the model claims and the
# recommendation's model column use them.


rule claims:
    input:
        spec=spec_path,
        ingested=ingested_runs,
        predictions=claims_predictions,
    output:
        csv="results/{experiment}/report/claims.csv",
        markdown="results/{experiment}/report/claims.md",
        recommendations="results/{experiment}/report/recommendations.csv",
    log:
        "logs/{experiment}/claims.log",
    conda:
        "../envs/demuxlab.yaml"
    params:
        cli=DEMUXLAB,
        method=MODEL["method"],
    shell:
        "{params.cli} claims {input.spec} --method {params.method} --out-dir $(dirname {output.csv}) 2> {log}"
