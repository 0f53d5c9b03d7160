# Each experiment's plan (`demuxlab plan`): the spec checked against the server's pairs, its points, run ids
# and randomized run order, and one ticket per run (results/<experiment>/tickets/<run id>.json: the point,
# repeat, phases, launcher, pinned class and the spec's SHA-256), the one copy of a run's point that its run
# job reads (rules/run.smk). A checkpoint: the runs, lanes and report targets of the DAG are read from the
# plan (rules/common.smk: plan_of), so parsing the workflow never loads a spec. The server's pairs are
# `ancient`: a rebuild does not re-plan (each run checks its spec against the binaries it runs).


checkpoint plan:
    input:
        spec=spec_file,
        server_pairs=ancient(rules.build_binaries.output.pairs),
    output:
        plan="results/plans/{experiment}.json",
        tickets=directory("results/{experiment}/tickets"),
    log:
        "logs/{experiment}/plan.log",
    conda:
        "../envs/demuxlab.yaml"
    params:
        cli=DEMUXLAB,
    shell:
        "{params.cli} plan {input.spec} --server-pairs {input.server_pairs} --tickets {output.tickets}"
        " --out {output.plan} 2> {log}"
