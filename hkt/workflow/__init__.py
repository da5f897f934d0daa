"""The Snakemake workflow's Python side: the job grid (:mod:`.grid`, no torch, no Hydra) and the
check of every training config before any job runs (:mod:`.job_configs`)."""
