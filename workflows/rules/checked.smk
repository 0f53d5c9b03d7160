# The controller's checked copy of each spec, for run jobs that start with demuxlab-run (rules/lean.smk).


rule checked_spec:
    input:
        spec=spec_file,
        plan=rules.plan.output.plan,
    output:
        checked="results/{experiment}/checked.json",
    log:
        "logs/{experiment}/checked.log",
    run:
        write_checked_spec(input.spec, output.checked, log[0])
