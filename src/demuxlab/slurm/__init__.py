"""Slurm-allocated host pairs (the ``slurm`` profile): each run is one Slurm job of two whole nodes,
submitted by Snakemake's own executor plugin; inside the job one node runs the server and the other the
client (:mod:`demuxlab.slurm.job`). Settings are checked before the first job (:mod:`demuxlab.slurm.check`);
node health and quarantine live in :mod:`demuxlab.slurm.nodes`; the test cluster's Slurm is
:mod:`demuxlab.slurm.testbed`. docs/ARCHITECTURE.md, "Slurm-allocated pairs"."""
