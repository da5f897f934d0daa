"""The commands about one suite run, each reading its config or its results directory: before it
starts, ``hkt plan`` (:mod:`.plan`, its jobs and wall time) and ``hkt doctor`` (:mod:`.doctor`,
this machine against it), both counting with the one cost model :mod:`.estimate`; while and
after it runs, ``hkt status`` (:mod:`.status`, where it stands) and ``hkt stop`` (:mod:`.stop`,
stops its workflow). Layer 5 (docs/contracts.md): they read the workflow's grid
(:mod:`hkt.workflow`), which sits beside them, and everything below."""
