"""Benchmark data: preparation (generate, download, verify, convert to Parquet) and loading.

* ``hkt.data.prepare.prepare_task(task, out, source=None, overrides=())`` — what
  ``hkt prepare`` runs; task configs live in ``config/task/`` (``hkt.data.task_config``).
* ``hkt.data.families`` — one module per data family (``task.family``: ``listops``, ``imdb``,
  ``cifar10``), found by the registry :data:`hkt.data.families.FAMILIES` (``hkt.plugin_registry``).
* ``hkt.data.load`` — the torch loading path: ``TokenDataset``, ``BucketBatchSampler``,
  ``make_loader`` (padded batches with masks and lengths, resumable mid-epoch).
* ``hkt.data.parquet`` — the file layout (``read_metadata``), ``hkt.data.sources`` — downloads,
  the offline mirror (``HKT_DATA_MIRROR``) and safe archive reading.

Nothing here imports torch except ``hkt.data.load``.
"""
