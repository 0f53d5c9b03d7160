# A reproducibility bundle of one experiment (demuxlab bundle create; on demand, not part of `all`):
#   snakemake --profile local results/smoke/smoke.bundle.tar.zst     or     snakemake --profile local bundles


rule bundle:
    input:
        reports=lambda wc: experiment_targets(wc.experiment),
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
        expand(rules.bundle.output.bundle, experiment=config["experiments"]),
