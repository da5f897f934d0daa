#!/usr/bin/env bash
# Issue 39 on one GPU: the sensitivity suite's 12 training jobs and S4D at S4's recipe, all at once.
# Each job is stopped by SIGTERM at the deadline (it checkpoints and resumes exactly), then the
# run directories come back as tarballs. Usage: run.sh DEADLINE_S (from this script's start).
set -u
T0=$(date +%s); DEADLINE=${1:-470}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
REPO=$(pwd)
if [[ -z "${HKT_LOCAL:-}" ]]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
PY=${PY:-python3}
CODE=$REPO
if command -v git >/dev/null && [[ -d .gitcarry ]]; then
  rm -rf /tmp/code && git clone -q .gitcarry /tmp/code && CODE=/tmp/code
fi
cd "$CODE"; export PYTHONPATH=$CODE${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
echo 'import sys; from hkt.cli import main; sys.exit(main())' > /tmp/hkt_main.py
hkt() { "$PY" /tmp/hkt_main.py "$@"; }
{ echo "code $CODE commit $(git rev-parse HEAD 2>/dev/null)"; nvidia-smi 2>&1 | head -15
  "$PY" -c 'import torch, sys; print(sys.version, torch.__version__, torch.cuda.is_available())'; } > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
for r in results-sensitivity results-s4-recipe; do mkdir -p $r/data; done
hkt --log results-sensitivity/prepare.log prepare listops --out results-sensitivity/data/listops || { cat results-sensitivity/prepare.log; exit 2; }
cp -r results-sensitivity/data/listops results-s4-recipe/data/listops
echo "prepared at $(( $(date +%s) - T0 )) s"
left=$(( DEADLINE - ($(date +%s) - T0) ))
"$PY" - "$REPO/.gpu/jobs.json" > /tmp/jobs.sh <<'PYEOF'
import json, shlex, sys
for j in json.load(open(sys.argv[1])):
    root = {"sensitivity": "results-sensitivity", "s4_recipe": "results-s4-recipe"}[j["suite"]]
    out = root + j["out"].removeprefix("results")
    data = root + j["data"].removeprefix("results")
    threads = 2 if j["suite"] == "s4_recipe" else 1
    cmd = (f"mkdir -p {out}; HKT_SUITE={j['suite']} OMP_NUM_THREADS={threads} timeout -s TERM -k 60 $LEFT "
           f"$PY /tmp/hkt_main.py --log {out}.log train --data {data} --out {out} --restart-if-changed tracking.enabled=false "
           + " ".join(shlex.quote(o) for o in j["overrides"]))
    if j["suite"] == "s4_recipe":  # after the MHA jobs (or 240 s), so the sensitivity jobs end in time
        cmd = ("( while (( $(ls results-sensitivity/runs/listops/mha/*/seed*/record.json 2>/dev/null | wc -l) < 6 "
               "&& $(date +%s) - T0 < 240 )); do sleep 5; done; LEFT=$(( DEADLINE - ($(date +%s) - T0) )); "
               "echo \"s4 starts at $(( $(date +%s) - T0 )) s for $LEFT s\"; " + cmd + " )")
    print(cmd + " &")
PYEOF
LEFT=$left; echo "training for at most $LEFT s"; cat /tmp/jobs.sh
source /tmp/jobs.sh
( while sleep 60; do echo "--- $(( $(date +%s) - T0 )) s"; for h in results-*/runs/*/*/*/*/history.csv; do echo "$h $(tail -1 $h | cut -c1-100)"; done; nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader; done ) >> "$OUT/progress.log" 2>&1 &
mon=$!
wait $(jobs -p | grep -v "^$mon$") 2>/dev/null
kill $mon 2>/dev/null
echo "training ended at $(( $(date +%s) - T0 )) s"
for f in results-*/runs/*/*/*/*.log; do echo "== $f"; tail -3 "$f"; done > "$OUT/logs.txt" 2>&1
tail -40 "$OUT/logs.txt"
tar czf "$OUT/sensitivity.tar.gz" --exclude=checkpoints --exclude=data results-sensitivity
tar czf "$OUT/s4recipe.tar.gz" --exclude=data results-s4-recipe
ls -la "$OUT"; echo "done at $(( $(date +%s) - T0 )) s"
