# A verdict for every claim of seeds 000-004 the experiment's points can test, and the best design per
# workload (docs/claims.md). For modelled experiments it waits for the predictions: the model claims and the
# recommendation's model column use them.


rule claims:
    input:
        spec=spec_file,
        ingested=ingested_runs,
        predictions=claims_predictions,
        calibrations=claims_calibrations,
        decisions=adaptive_decisions,
    output:
        csv=report(
            "results/{experiment}/report/claims.csv",
            caption="../report/claims.rst",
            category="{experiment}",
            subcategory="Claims",
            labels={"result": "verdict per seed claim", "type": "table"},
        ),
        markdown=report(
            "results/{experiment}/report/claims.md",
            caption="../report/claims_md.rst",
            category="{experiment}",
            subcategory="Claims",
            labels={"result": "verdicts with their evidence", "type": "text"},
        ),
        recommendations=report(
            "results/{experiment}/report/recommendations.csv",
            caption="../report/recommendations.rst",
            category="{experiment}",
            subcategory="Claims",
            labels={"result": "best design per workload", "type": "table"},
        ),
    log:
        "logs/{experiment}/claims.log",
    conda:
        "../envs/demuxlab.yaml"
    params:
        cli=DEMUXLAB,
        method=MODEL["method"],
        adaptive=adaptive_option,
        calibrations=calibrations_option,
    shell:
        "{params.cli} claims {input.spec} --method {params.method} {params.adaptive} {params.calibrations}"
        " --out-dir $(dirname {output.csv}) 2> {log}"
