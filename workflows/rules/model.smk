# CTMC models of every pattern (seed 001, issue 19): calibrate from the instrumented lowest-concurrency runs,
# predict every measured point from the paper's and the calibrated rates, and validate against the runs.
# On the local pair the models compute on the measured machine, so these jobs take the `pair` resource
# (MODEL_PAIR, rules/hosts/): no run is measured while they use the CPUs.


rule calibrate:
    input:
        spec=spec_file,
        ingested=calibration_runs_ingested,
        database=ancient(rules.database.output.url),
    output:
        calibrations="results/{experiment}/model/calibrations.json",
    log:
        "logs/{experiment}/model/calibrate.log",
    conda:
        "../envs/demuxlab.yaml"
    params:
        cli=DEMUXLAB,
    resources:
        pair=MODEL_PAIR,
    shell:
        "{params.cli} model calibrate-experiment {input.spec} --out {output.calibrations} 2> {log}"


rule predict:
    input:
        spec=spec_file,
        calibrations=rules.calibrate.output.calibrations,
        ingested=ingested_runs,
    output:
        predictions="results/{experiment}/model/predictions.json",
    log:
        "logs/{experiment}/model/predict.log",
    conda:
        "../envs/demuxlab.yaml"
    params:
        cli=DEMUXLAB,
        method=MODEL["method"],
        rel_ci=MODEL["rel_ci"],
        seed=MODEL["seed"],
    # Capped at the cores Snakemake was given.
    threads: os.cpu_count() or 1
    resources:
        pair=MODEL_PAIR,
    shell:
        "{params.cli} model predict-experiment {input.spec} --calibrations {input.calibrations}"
        " --method {params.method} --rel-ci {params.rel_ci} --seed {params.seed} --jobs {threads}"
        " --out {output.predictions} 2> {log}"


rule validate_model:
    input:
        spec=spec_file,
        predictions=rules.predict.output.predictions,
    output:
        page=report(
            "results/{experiment}/report/validation.html",
            caption="../report/validation_page.rst",
            category="{experiment}",
            subcategory="Model validation",
            labels={"result": "1. model against measurement: the figure and the tables"},
        ),
        table=report(
            "results/{experiment}/report/validation.csv",
            caption="../report/validation.rst",
            category="{experiment}",
            subcategory="Model validation",
            labels={"result": "2. validation.csv (per point)"},
        ),
        summary=report(
            "results/{experiment}/report/validation_summary.csv",
            caption="../report/validation_summary.rst",
            category="{experiment}",
            subcategory="Model validation",
            labels={"result": "3. validation_summary.csv (error per pattern, notifier and rates)"},
        ),
        figure=report(
            "results/{experiment}/report/validation.png",
            caption="../report/validation_figure.rst",
            category="{experiment}",
            subcategory="Model validation",
            labels={"result": "4. validation.png (the figure alone)"},
        ),
    log:
        "logs/{experiment}/model/validate.log",
    conda:
        "../envs/demuxlab.yaml"
    params:
        cli=DEMUXLAB,
        method=MODEL["method"],
    shell:
        "{params.cli} model validate-experiment {input.spec} --method {params.method}"
        " --out-dir $(dirname {output.table}) 2> {log}"
