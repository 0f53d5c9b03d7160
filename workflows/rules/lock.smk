# The workflow lock (demuxlab.lease.hold_controller): the profiles set `nolock`, because Snakemake's
# own lock survives a controller killed with kill -9 and then refuses the rerun. Instead the controller
# holds an OS file lock on .snakemake/demuxlab-controller.lock for its whole life: it dies with the
# controller (the command as typed resumes after any crash), and a second live controller is refused.
# onstart runs in the controller only (not in dry runs, --lint or the job processes, which get --no-hooks).
CONTROLLER = []
# Snakemake keeps one onstart handler (a second `onstart:` replaces the first), so other rule files add
# what they do when the controller starts here; they run after the lock is held.
ONSTART_HOOKS = []


onstart:
    from demuxlab.errors import DemuxlabError
    from demuxlab.lease import hold_controller

    try:
        CONTROLLER.append(hold_controller(os.getcwd()))
    except DemuxlabError as exc:
        raise WorkflowError(f"demuxlab: error: {exc.message}") from None
    for hook in ONSTART_HOOKS:
        hook()
