#!/usr/bin/env bash
# A headless-Chromium screenshot of the MLflow UI as a user first sees an experiment: does it open
# on its runs (not on GenAI traces), with the metric columns that matter?
#
#   bash scripts/screenshot_mlflow.sh RESULTS_DIR OUT.png [EXPERIMENT]
#
# RESULTS_DIR holds the workflow's mlflow.db (and mlartifacts/); EXPERIMENT defaults to the first
# experiment with runs. Starts `mlflow ui` on 127.0.0.1 (a free port), waits for /health (about
# 30 s on a small machine), screenshots the experiment page, and stops the server by its PID.
# Needs Chromium (Debian: apt-get install chromium). Environment: HKT_VENV (default .venv).
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: bash scripts/screenshot_mlflow.sh RESULTS_DIR OUT.png [EXPERIMENT]" >&2; exit 2; }
results=$(cd "$1" && pwd); out=$(realpath -m "$2"); experiment=${3:-}
cd "$(dirname "$0")/.."
py=${HKT_VENV:-.venv}/bin/python
db="$results/mlflow.db"
[ -f "$db" ] || { echo "error: $db does not exist (run the workflow first)" >&2; exit 1; }
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
[ -n "$browser" ] || { echo "error: no Chromium found (apt-get install chromium)" >&2; exit 1; }

port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
exp_id=$("$py" - "$db" "$experiment" <<'PY'
import sys
from mlflow.tracking import MlflowClient
client = MlflowClient(f"sqlite:///{sys.argv[1]}")
want = sys.argv[2]
for exp in client.search_experiments():
    if (want and exp.name == want) or (not want and client.search_runs([exp.experiment_id], max_results=1)):
        print(exp.experiment_id)
        break
else:
    sys.exit(f"error: no experiment {want or 'with runs'} in {sys.argv[1]}")
PY
)
log=$(mktemp)
"${HKT_VENV:-.venv}/bin/mlflow" ui --backend-store-uri "sqlite:///$db" \
  --default-artifact-root "$results/mlartifacts" --host 127.0.0.1 --port "$port" >"$log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 1 120); do
  "$py" -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$port/health', timeout=2)" 2>/dev/null && break
  kill -0 "$server" 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 1
done
# the address the README gives: MLflow 3.17 opens in GenAI mode unless the address says otherwise
url="http://127.0.0.1:$port/#/experiments/$exp_id/runs?workflowType=machine_learning"
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=${HKT_SCREEN:-1600,1000} \
  --virtual-time-budget=20000 --screenshot="$out" "$url" >/dev/null 2>&1
echo "screenshot of $url (experiment $exp_id) in $out"
