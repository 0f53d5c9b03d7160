"""How fast the platform's parts are: servers, client, launchers, ingest, bundles, dashboard, workflow,
testbed and CTMC solvers (each prints its figures; ``python -m bench`` lists them)."""
