"""Remote access to the hosts of a cluster, below :mod:`demuxlab.launch` and :mod:`demuxlab.cluster`: the
host pairs a sweep may use and their hardware classes (:mod:`.hostpairs`, from an Ansible inventory or a
simulated cluster file), SSH to those hosts (:mod:`.ssh`), and a host's facts collected over it
(:mod:`.facts`)."""
