"""The Snakemake workflow's Python side: one reading of the workflow and what starting its jobs
does (:mod:`.invocation`), the job grid (:mod:`.grid`, no torch, no Hydra) and the check of every
training config before any job runs (:mod:`.configs`)."""
