"""Training runs from Hydra configs, tracked in MLflow, resumable and reproducible.

``hkt train`` (:mod:`hkt.train.command`) composes ``config/train.yaml``
(:mod:`hkt.train.run_config`) and trains one model (:mod:`hkt.train.loop`, the session) from
its parts:

- :mod:`hkt.train.data`: the prepared data a run reads; :mod:`hkt.train.optim`: AdamW and the
  learning-rate schedule; :mod:`hkt.train.step`: the training step (shared with ``hkt bench``)
  and evaluation; :mod:`hkt.train.log_window`: the loss and accuracy since the last logged step;
- :mod:`hkt.train.checkpoint`: atomic, ``weights_only``-safe checkpoints, the loop's state,
  and :class:`~hkt.train.checkpoint.Checkpoint`, the object a run resumes and saves with;
  :mod:`hkt.train.run_conditions`: how a run executed (precision, threads, GPU sharing);
  :mod:`hkt.train.rundir`: one process per run directory, a run continues only with its own
  config and data;
- :mod:`hkt.train.tracking`: MLflow; :mod:`hkt.train.run_metadata`: what a run's MLflow run says
  of itself (tags, params, suite run, model name); :mod:`hkt.train.progress`: the progress line;
  :mod:`hkt.train.finish`: the run record (written with :mod:`hkt.run_record`), the summary, and
  completing the MLflow run of a finished run whose store stopped answering.
"""

__all__ = ["train", "load_config"]


def __getattr__(name: str):
    # torch and Hydra load only when asked for: `import hkt.train.X` stays cheap for the CLI
    if name == "train":
        from hkt.train.loop import train

        return train
    if name == "load_config":
        from hkt.train.run_config import load_config

        return load_config
    raise AttributeError(name)
