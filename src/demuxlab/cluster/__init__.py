"""Sweeps across host pairs: per-pair health (quarantine), the scheduler that gives each run a free healthy
pair under the pair's lease (:mod:`demuxlab.lease`), a run on the pair it got, progress, the per-pair report
and provisioning. Which pairs exist and how to reach their hosts is :mod:`demuxlab.remote`'s."""
