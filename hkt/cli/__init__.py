"""The ``hkt`` command line: :mod:`.main` is the entry point (``hkt = hkt.cli.main:main``), which
maps each subcommand to the module that owns it; :mod:`.prepare` is ``hkt prepare``, the one
command that spans two packages (a task's splits from :mod:`hkt.data`, then their per-example
facts from :mod:`hkt.facts.examples`, which the ListOps rules of :mod:`hkt.baselines`
answer), so it sits here at the top rather than in :mod:`hkt.data` below them. Layer 5."""
