# Adaptive experiments (a spec with an `adaptive:` block, docs/adaptive.md): their runs are decided round by
# round instead of planned. Round N is a checkpoint: `demuxlab adaptive next` replays the policy over the
# experiment's run records (rounds 0..N-1 all recorded) and writes round N's runs with the reason for each,
# or the stop, and the tickets of its runs. Its runs are run_point jobs like any other (rules/run.smk, lanes
# within the round); round N+1 waits for every record of round N. Once a round stops, `demuxlab adaptive
# decisions` writes what the sweep decided, which the report and the claims read to mark model-only points,
# and `adaptive store` puts it in the database for the dashboard (after every run is ingested).


checkpoint adaptive_round:
    wildcard_constraints:
        round="[0-9]+",
    input:
        spec=spec_file,
        plan=rules.plan.output.plan,
        records=records_before_round,
    output:
        round="results/{experiment}/adaptive/round-{round}.json",
        # The round's run tickets (an adaptive experiment's plan has none: its runs come round by round).
        tickets=directory("results/{experiment}/adaptive/tickets-{round}"),
    log:
        "logs/{experiment}/adaptive/round-{round}.log",
    conda:
        "../envs/demuxlab.yaml"
    params:
        cli=DEMUXLAB,
        runs=lambda wc: f"results/{wc.experiment}/runs",
    resources:
        # The models' predictions (fluid) compute on the machine that measures: never beside a run.
        pair=MODEL_PAIR,
    shell:
        "{params.cli} adaptive next {input.spec} --records {params.runs} --round {wildcards.round}"
        " --tickets {output.tickets} --out {output.round} 2> {log}"


rule adaptive_decisions:
    input:
        spec=spec_file,
        rounds=adaptive_round_files,
        records=adaptive_records,
    output:
        decisions="results/{experiment}/adaptive/decisions.json",
    log:
        "logs/{experiment}/adaptive/decisions.log",
    conda:
        "../envs/demuxlab.yaml"
    params:
        cli=DEMUXLAB,
        runs=lambda wc: f"results/{wc.experiment}/runs",
    resources:
        pair=MODEL_PAIR,
    shell:
        "{params.cli} adaptive decisions {input.spec} --records {params.runs} --out {output.decisions} 2> {log}"


rule adaptive_store:
    input:
        spec=spec_file,
        decisions=rules.adaptive_decisions.output.decisions,
        ingested=ingested_runs,
    output:
        done="results/{experiment}/adaptive/stored.json",
    log:
        "logs/{experiment}/adaptive/store.log",
    conda:
        "../envs/demuxlab.yaml"
    params:
        cli=DEMUXLAB,
    shell:
        "{params.cli} adaptive store {input.spec} --decisions {input.decisions} --done {output.done} 2> {log}"
