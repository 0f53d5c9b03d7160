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


# A reproducibility bundle of one experiment (demuxlab bundle create; on demand, not part of `all`):
#   snakemake --profile local results/smoke/smoke.bundle.tar.zst     or     snakemake --profile local bundles
rule bundle:
    input:
        reports=report_targets,
    output:
        bundle="results/{experiment}/{experiment}.bundle.tar.zst",
    log:
        "logs/{experiment}/bundle.log",
    conda:
        "../envs/demuxlab.yaml"
    params:
        cli=DEMUXLAB,
        specs=str(EXPERIMENTS_DIR),
        config=lambda wc: shlex.quote(json.dumps(config, sort_keys=True)),
    shell:
        "{params.cli} bundle create {wildcards.experiment} --workdir . --experiments-dir {params.specs}"
        " --workflow-config-json {params.config} --out {output.bundle} 2> {log}"


rule bundles:
    input:
        expand(rules.bundle.output.bundle, experiment=list(SPECS)),
