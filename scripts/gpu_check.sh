#!/usr/bin/env bash
# Issue 49's GPU check in one call: install from a wheelhouse with no network, the CUDA tile
# tests (fp32 and bf16), `hkt bench train`, and the GPU suite's workflow (training packed on the
# GPU, tracked in MLflow, analyses, the attention benchmark with the tile kernel, the aggregate),
# then publish it and lay everything out under $OUT. Settings: config/bench/gpu_check.yaml.
# How to run it, and what comes back: docs/gpu-check.md.
#
#   bash scripts/gpu_check.sh stage PART          # copy one wheelhouse part to the machine
#   bash scripts/gpu_check.sh run [PART]          # join PART (the last one), then everything
#   bash scripts/gpu_check.sh run PART --dry-run  # here, without a GPU: each step's command; runs
#                                                 # the wheelhouse check and `snakemake -n`
#
# Environment: OUT (where the results go; default results-gpu-check/out), PYTHON (the machine's
# interpreter with torch; default python3), HKT_GPU_WHEELHOUSE (where the parts are joined;
# default /tmp/hkt-wheelhouse), HKT_GPU_VENV (default /tmp/hkt-venv), HKT_GPU_RESULTS (the
# workflow's results directory; default results-gpu).
set -uo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
house=${HKT_GPU_WHEELHOUSE:-/tmp/hkt-wheelhouse}
venv=${HKT_GPU_VENV:-/tmp/hkt-venv}
results=${HKT_GPU_RESULTS:-results-gpu}
out=${OUT:-results-gpu-check/out}
mode=${1:-} part=${2:-} dry=0
[ "${3:-}" = --dry-run ] || [ "${2:-}" = --dry-run ] && dry=1
[ "$part" = --dry-run ] && part=""

setting() {  # a key of config/bench/gpu_check.yaml, printed for bash (lists: one item a line)
  "$python" - "$1" <<'PY'
import sys, yaml
value = yaml.safe_load(open("config/bench/gpu_check.yaml"))[sys.argv[1]]
print("\n".join(map(str, value)) if isinstance(value, list) else value)
PY
}
join_part() {
  [ -n "$part" ] || return 0
  [ -f "$part/wheelhouse.json" ] || { echo "error: $part is not a wheelhouse part (no wheelhouse.json); make parts with: python scripts/wheelhouse.py split DIR --max-mib N" >&2; exit 2; }
  mkdir -p "$house" && cp -p "$part"/* "$house"/
  echo "wheelhouse part $part joined into $house ($(ls "$house" | wc -l) files)"
}

case "$mode" in
  stage) [ -n "$part" ] || { echo "usage: bash scripts/gpu_check.sh stage PART" >&2; exit 2; }
         join_part; exit 0 ;;
  run) ;;
  *) echo "usage: bash scripts/gpu_check.sh stage PART | run [PART] [--dry-run]" >&2; exit 2 ;;
esac

suite=$(setting suite) budget=$(setting budget_s) reserve=$(setting reserve_s)
tile_timeout=$(setting tile_tests_timeout_s) torch_spec=$(setting torch)
mapfile -t bench_train < <(setting bench_train)
start=$(date +%s)
mkdir -p "$out"
log=$out/gpu_check.log summary=$out/gpu_check.md
exec > >(tee -a "$log") 2>&1
: >"$summary.steps"

step() {  # NAME CMD...: run (or, --dry-run, print) one step; its wall time goes to the summary.
  # always=1 before it: run it on a dry run too (the checks that need no GPU)
  local name=$1 t0 rc; shift
  echo "=== $name: $*"
  if [ "$dry" = 1 ] && [ "${always:-0}" != 1 ]; then echo "$name | dry run | -" >>"$summary.steps"; return 0; fi
  t0=$(date +%s); "$@"; rc=$?
  echo "$name | $(( $(date +%s) - t0 )) s | rc $rc" >>"$summary.steps"
  echo "=== $name: rc $rc after $(( $(date +%s) - t0 )) s"
  return $rc
}

echo "=== gpu_check $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo '?') suite $suite"
nvidia-smi -L 2>/dev/null || echo "no nvidia-smi"
"$python" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.cuda.is_available())'
join_part

# 1. install from the wheelhouse (no index), the image's torch kept
if [ "$dry" = 1 ]; then
  always=1 step check "$python" scripts/wheelhouse.py check "$house" --lock requirements/lock.txt \
    --system-site || exit 1
else
  step bootstrap env PYTHON="$python" HKT_WHEELHOUSE="$house" HKT_SYSTEM_SITE=1 \
    HKT_TORCH="$torch_spec" HKT_VENV="$venv" bash scripts/bootstrap.sh || exit 1
fi
export PATH=$venv/bin:$PATH PYTHONUNBUFFERED=1

# 2. the tile kernel on CUDA against the reference: fp32 and bf16, masked, causal and not
step tile_tests timeout "$tile_timeout" "$venv/bin/python" -m pytest -n0 -q -o addopts=-ra \
  -p no:cacheprovider tests/test_tile.py -k "cuda or bf16" --junitxml="$out/tile_tests.xml"

# 3. training throughput, the tile kernel beside the fused path
step bench_train "$venv/bin/hkt" bench train "${bench_train[@]}" --out "$out"

# 4. the workflow: stopped $reserve s before the budget, so what it finished is still packed
left=$(( budget - reserve - ($(date +%s) - start) ))
workflow=(snakemake --cores all --keep-going --configfile "config/suites/$suite.yaml" --config "results_dir=$results")
if [ "$dry" = 1 ]; then  # here the project's own .venv runs snakemake
  always=1 step workflow .venv/bin/snakemake -n --quiet rules "${workflow[@]:1}" || exit 1
else
  step workflow timeout --signal=TERM --kill-after=20 "$left" "$venv/bin/${workflow[0]}" "${workflow[@]:1}"
fi

# 5. publish what the workflow made, and lay it out under $OUT (8 files at most come back)
if [ "$dry" = 0 ]; then
  if [ -f "$results/summary.md" ]; then
    step publish "$venv/bin/python" scripts/publish_results.py "$results" "docs/results/$suite" --replace \
      && tar czf "$out/$suite.tar.gz" "docs/results/$suite"
  fi
  # the rest a reader of a failed or cut run needs: logs, plan, sessions, records, the MLflow check
  { ls -d "$results"/{logs,plan,tables,bench} 2>/dev/null
    find "$results/runs" \( -name record.json -o -name history.csv \) 2>/dev/null; } >"$out/.files"
  tar czf "$out/workflow.tar.gz" -T "$out/.files" && rm -f "$out/.files"
  cp -p "$results/bench/attention.csv" "$out/attention.csv" 2>/dev/null
fi
{
  echo "# GPU check, $(date -u +%FT%TZ)"
  echo
  echo "| step | wall | result |"
  echo "| --- | --- | --- |"
  sed 's/^/| /; s/$/ |/' "$summary.steps"
  echo
  echo "Total: $(( $(date +%s) - start )) s of a $budget s budget."
  sessions=$results/plan/sessions.json
  [ -f "$sessions" ] && "$python" - "$sessions" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["sessions"][-1]
took = s.get("ended", s["last_seen"]) - s["started"]
print(f"Workflow: the plan's ETA {s.get('estimate_s', 0):.0f} s, measured {took:.0f} s, ok: {s.get('ok')}.")
PY
} >"$summary"
rm -f "$summary.steps"
cat "$summary"
