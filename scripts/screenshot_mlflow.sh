#!/usr/bin/env bash
# Headless-Chromium screenshots of the MLflow UI as a user sees an experiment: its runs list in the
# comparison view (test accuracy, best validation accuracy, best step: the columns of
# hkt.train.run_metadata.COMPARISON_VIEW, sorted by test accuracy) and, optionally, one run's page.
#
#   bash scripts/screenshot_mlflow.sh RESULTS_DIR RUNS.png [RUN.png [EXPERIMENT]]
#
# RESULTS_DIR holds the workflow's mlflow.db (and mlartifacts/); EXPERIMENT defaults to the first
# experiment with trained runs; RUN.png shows its best trained run by test accuracy. Starts
# `mlflow ui` on 127.0.0.2 (a free port), waits for /health (about 30 s on a small machine),
# takes the screenshots, and stops the server by its PID. Needs Chromium (Debian: apt-get install
# chromium). Environment: HKT_VENV (default .venv), HKT_SCREEN and HKT_SCREEN_RUN (the window
# sizes of the two screenshots, default 1600,800 and 1600,1850).
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: bash scripts/screenshot_mlflow.sh RESULTS_DIR RUNS.png [RUN.png [EXPERIMENT]]" >&2; exit 2; }
results=$(cd "$1" && pwd); out=$(realpath -m "$2")
run_out=${3:+$(realpath -m "$3")}; experiment=${4:-}
cd "$(dirname "$0")/.."
py=${HKT_VENV:-.venv}/bin/python
db="$results/mlflow.db"
[ -f "$db" ] || { echo "error: $db does not exist (run the workflow first)" >&2; exit 1; }
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
[ -n "$browser" ] || { echo "error: no Chromium found (apt-get install chromium)" >&2; exit 1; }

# 127.0.0.2, a loopback address too: for a browser on localhost (127.0.0.1) the UI opens its
# assistant panel over a third of the window on the first visit
host=127.0.0.2
port=$("$py" -c 'import socket, sys; s = socket.socket(); s.bind((sys.argv[1], 0)); print(s.getsockname()[1])' "$host")
# the experiment, its best run, and the view's share key (what the UI's address names)
read -r exp_id run_id view <<<"$("$py" - "$db" "$experiment" <<'PY'
import sys
from mlflow.tracking import MlflowClient
from hkt.train.run_metadata import COMPARISON_VIEW
client = MlflowClient(f"sqlite:///{sys.argv[1]}")
want = sys.argv[2]
for exp in client.search_experiments():
    runs = client.search_runs([exp.experiment_id], order_by=["metrics.test_accuracy DESC"])
    trained = [r for r in runs if "external" not in r.data.tags]  # a run with a logged model
    if (want and exp.name == want) or (not want and trained):
        print(exp.experiment_id, trained[0].info.run_id if trained else "-", COMPARISON_VIEW["key"])
        break
else:
    sys.exit(f"error: no experiment {want or 'with runs'} in {sys.argv[1]}")
PY
)"
log=$(mktemp)
"${HKT_VENV:-.venv}/bin/mlflow" ui --backend-store-uri "sqlite:///$db" \
  --default-artifact-root "$results/mlartifacts" --host "$host" --port "$port" \
  --allowed-hosts "$host:$port,$host" --cors-allowed-origins "http://$host:$port" --workers 1 >"$log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 1 180); do
  "$py" -c "import urllib.request as u; u.urlopen('http://$host:$port/health', timeout=2)" 2>/dev/null && break
  kill -0 "$server" 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 1
done
"$py" -c "import urllib.request as u; u.urlopen('http://$host:$port/health', timeout=2)" 2>/dev/null || {
  cat "$log" >&2; echo "screenshot_mlflow: the MLflow UI did not answer /health in 180 s (its log above)" >&2; exit 1; }

shot() {  # shot URL OUT.png SIZE: a fresh profile each time, so no remembered view changes the page
  local profile; profile=$(mktemp -d)
  "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$profile" \
    --window-size="$3" --virtual-time-budget=30000 --screenshot="$2" "$1" \
    >/dev/null 2>&1
  rm -rf "$profile"
  echo "screenshot of $1 in $2"
}
# the addresses docs/tracking.md gives: MLflow 3.17 opens in GenAI mode unless the address says
# workflowType=machine_learning; viewStateShareKey opens the comparison view's columns
base="http://$host:$port/#/experiments/$exp_id"
shot "$base/runs?workflowType=machine_learning&viewStateShareKey=$view" "$out" "${HKT_SCREEN:-1600,800}"
if [ -n "$run_out" ] && [ "$run_id" != "-" ]; then  # taller: down to its logged model, below the params
  shot "$base/runs/$run_id?workflowType=machine_learning" "$run_out" "${HKT_SCREEN_RUN:-1600,1850}"
fi
