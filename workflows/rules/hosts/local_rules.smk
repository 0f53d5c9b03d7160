# Topology and noise facts of this machine (NUMA nodes, cores, SMT, governor, turbo, irqbalance).


rule host_facts:
    output:
        facts="results/facts/{pair}/server.json",
    log:
        "logs/facts/{pair}.log",
    conda:
        "../../envs/demuxlab.yaml"
    params:
        cli=DEMUXLAB,
    shell:
        "{params.cli} facts --out {output.facts} 2> {log}"
