"""Snakemake for tests/test_slurm_e2e.py: `python -m snakemake` with the SLURM executor checking
its jobs' status every second.

The executor (snakemake-executor-plugin-slurm) waits 10 s longer after each status check in
which no job finished (up to 180 s), to spare a real cluster's controller. On the tests'
one-node cluster, where jobs take 10-30 s, that back-off alone added a minute to each run
(a finished job seen 30 s late). Everything else is the plugin's own: its submission, its
`squeue` status check, its reading of CANCELLED as a failure, Snakemake's retry. Jobs on the
cluster run plain `python -m snakemake`; only this, the submitting process, checks faster.

    python tests/slurm_snakemake.py SNAKEMAKE_ARGS...
"""

from __future__ import annotations

import runpy

from snakemake_executor_plugin_slurm import Executor

SECONDS_BETWEEN_CHECKS = 1

_check_active_jobs = Executor.check_active_jobs


async def _check_each_second(self, active_jobs):
    async for job in _check_active_jobs(self, active_jobs):
        yield job
    self.next_seconds_between_status_checks = SECONDS_BETWEEN_CHECKS


Executor.check_active_jobs = _check_each_second

if __name__ == "__main__":
    runpy.run_module("snakemake", run_name="__main__", alter_sys=True)
