"""Sweeps across host pairs: which pairs exist (an Ansible inventory or a simulated cluster), their
hardware classes, per-pair health (quarantine), and the scheduler that gives each run a free healthy pair
under the pair's lease (:mod:`demuxlab.lease`)."""
