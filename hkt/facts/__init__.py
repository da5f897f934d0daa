"""Facts about a prepared task's examples, computed once from its data and kept beside it
(:mod:`.examples`: ``examples.parquet``, what each validation and test example is, each ListOps
rule's answer included). Layer 4 (docs/design.md §6): the rules' answers come from
:mod:`hkt.baselines`, a layer above the data package, and the report, which reads the facts,
imports no baseline (``tests/test_layers.py``), so the facts are a package of their own between
them."""
