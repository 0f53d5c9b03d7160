"""CTMC performance models of every pattern (seed 001's HSHA and LF, and the chains of the reactor, the
multireactor, tpc, the proactor and both io_uring designs), their solvers (SSA, fluid, exact) and their
calibration from instrumented runs. Pure: plain values in, plain values out. docs/ctmc.md is the guide,
docs/ctmc-reference.md the details."""
