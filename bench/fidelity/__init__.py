"""How well models and measurements agree: the CTMC validation and the studies around it (client cost,
CPU placement, uring-shared's lock), the adaptive replay; ``specs/`` are the validation's sweeps and
``device16.sh`` its call on a lent many-core host."""
