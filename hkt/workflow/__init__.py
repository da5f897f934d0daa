"""The Snakemake workflow's Python side: one reading of the workflow (:mod:`.invocation`), what
starting its jobs and ending the run do (:mod:`.handlers`), the job grid (:mod:`.grid`, no
torch, no Hydra) and the check of every training config before any job runs
(:mod:`.job_configs`)."""
