# Build the static binaries (and the container images for docker experiments); record what was built and
# the pattern × notifier pairs the server implements (`demux-server --list`), which the plans check specs
# against.


rule build_binaries:
    input:
        sources=c_sources,
    output:
        manifest="results/build/binaries.json",
        pairs="results/build/pairs.json",
    log:
        "logs/build/binaries.log",
    conda:
        "../envs/demuxlab.yaml"
    params:
        cli=DEMUXLAB,
        repo=REPO,
    shell:
        "(make -C {params.repo} build && {params.cli} artifacts --launcher native --out {output.manifest}"
        " && {params.cli} pairs > {output.pairs}) > {log} 2>&1"


rule build_images:
    input:
        manifest=rules.build_binaries.output.manifest,
        dockerfiles=[str(REPO / "images" / role / "Dockerfile") for role in ("server", "client")],
    output:
        manifest="results/build/images.json",
    log:
        "logs/build/images.log",
    conda:
        "../envs/demuxlab.yaml"
    params:
        cli=DEMUXLAB,
        repo=REPO,
    shell:
        "(make -C {params.repo} images && {params.cli} artifacts --launcher docker --out {output.manifest})"
        " > {log} 2>&1"


