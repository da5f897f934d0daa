"""Every figure (PNG) the project draws, in one place, with one saver.

- :mod:`hkt.figures.common`: matplotlib (Agg) set-up, :func:`~hkt.figures.common.save`,
  colours per model, the empty-data panel.
- :mod:`hkt.figures.training`: one run's learning curve (``hkt train``).
- :mod:`hkt.figures.analysis`: one run's analyses (``hkt analyze``): κ per level, λ, truncation.
- :mod:`hkt.figures.suite`: across runs (``hkt aggregate``): validation curves, accuracy vs
  levels, the main table as bars, κ by level and truncation per task.
- :mod:`hkt.figures.per_example`: from the runs' predictions (``hkt aggregate``): accuracy
  against ListOps tree depth.

Figures take frames or arrays and a path, and return the path; they compute no table
themselves. matplotlib is imported on first use only (see ``common.pyplot``).
"""
