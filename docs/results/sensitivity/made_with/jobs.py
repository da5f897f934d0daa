"""Write the train jobs of the sensitivity and s4_recipe suites as lines for the device script."""
import json, sys
from hkt.workflow.suites import load_suite
lines = []
for name in ("sensitivity", "s4_recipe"):
    suite = load_suite(name, cuda=lambda: True)
    g = suite.grid
    for job in g.train_jobs():
        lines.append({"suite": suite.name, "out": g.path("run", **job.wildcards()),
                      "data": g.data_files(job.task)[0].rsplit("/", 1)[0],
                      "prepare": g.prepare_args(job.task), "overrides": list(g.train_overrides(job))})
json.dump(lines, sys.stdout, indent=1)
