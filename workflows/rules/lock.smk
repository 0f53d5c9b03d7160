# The workflow lock (demuxlab.lease.take_controller): the profiles set `nolock`, because Snakemake's
# own lock survives a controller killed with kill -9 and then refuses the rerun. Instead the controller
# holds an OS file lock on .snakemake/demuxlab-controller.lock for its whole life: the controller opens the
# file and `demuxlab controller-lock` takes the flock on that descriptor (an flock belongs to the open file,
# so it stays with the controller's descriptor after the command exits), so it dies with the controller (the
# command as typed resumes after any crash) while a second live controller is refused, in one line.
# onstart runs in the controller only (not in dry runs, --lint or the job processes, which get --no-hooks).
CONTROLLER = []
# Snakemake keeps one onstart handler (a second `onstart:` replaces the first), so other rule files add
# what they do when the controller starts here; they run after the lock is held.
ONSTART_HOOKS = []


def hold_controller_lock():
    """Open the lock file (kept open, never inherited by jobs) and have demuxlab lock it."""
    import subprocess

    os.makedirs(".snakemake", exist_ok=True)
    fd = os.open(".snakemake/demuxlab-controller.lock", os.O_RDWR | os.O_CREAT, 0o600)
    res = subprocess.run(
        [DEMUXLAB, "controller-lock", os.getcwd(), "--fd", str(fd), "--pid", str(os.getpid())],
        pass_fds=(fd,),
        capture_output=True,
        text=True,
        check=False,
    )
    if res.returncode != 0:
        os.close(fd)
        raise WorkflowError((res.stderr.strip().splitlines() or ["demuxlab controller-lock failed"])[-1])
    CONTROLLER.append(fd)


onstart:
    hold_controller_lock()
    for hook in ONSTART_HOOKS:
        hook()
