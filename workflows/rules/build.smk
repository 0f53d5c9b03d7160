# Build the static binaries (and the container images for docker experiments); record what was built.


rule build_binaries:
    input:
        sources=lambda wc: sorted(
            str(p) for p in (REPO / "images").rglob("*") if p.suffix in (".c", ".h") or p.name == "Makefile"
        ),
    output:
        manifest="results/build/binaries.json",
    log:
        "logs/build/binaries.log",
    shell:
        "(make -C {REPO} build && {DEMUXLAB} artifacts --launcher native --out {output.manifest}) > {log} 2>&1"


rule build_images:
    input:
        manifest=rules.build_binaries.output.manifest,
        dockerfiles=[str(REPO / "images/server/Dockerfile"), str(REPO / "images/client/Dockerfile")],
    output:
        manifest="results/build/images.json",
    log:
        "logs/build/images.log",
    shell:
        "(make -C {REPO} images && {DEMUXLAB} artifacts --launcher docker --out {output.manifest}) > {log} 2>&1"


def build_outputs(wildcards):
    """What a run needs built: the binaries, plus the images when the experiment runs in Docker."""
    out = [rules.build_binaries.output.manifest]
    if launcher_of(wildcards.experiment) == "docker":
        out.append(rules.build_images.output.manifest)
    return out
