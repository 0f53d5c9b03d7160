"""CTMC performance models of HSHA and LF (seed 001): docs/ctmc.md."""
