#!/usr/bin/env bash
# Issue 49's GPU check on a bare GPU machine (docs/gpu-check.md): install from a wheelhouse with
# no network, the CUDA tile tests (fp32 and bf16, masked, causal and not), `hkt bench train`, and
# the GPU suite's workflow (training packed on the GPU, tracked in MLflow, the analyses, the
# attention benchmark with the tile kernel, the aggregate), published and laid out under $OUT.
# Settings: config/bench/gpu_check.yaml.
#
#   bash scripts/gpu_check.sh stage PART     # copy a wheelhouse part to the machine, nothing else
#   bash scripts/gpu_check.sh kernel PART    # join PART; from the packages it holds (hash-checked),
#                                            # the tile tests on CUDA and `hkt bench train`
#   bash scripts/gpu_check.sh run [PART]     # join PART (the last); bootstrap from the whole
#                                            # wheelhouse, the workflow, publish, pack
#   bash scripts/gpu_check.sh all [PART]     # kernel and run in one call (a wheelhouse that fits)
#   ... --dry-run                            # here, without a GPU: every step's command; runs the
#                                            # wheelhouse checks and `snakemake -n`
#
# Environment: OUT (where the results go; default results-gpu-check/out), PYTHON (the machine's
# interpreter with torch; default python3), HKT_GPU_WHEELHOUSE (where parts are joined; default
# /tmp/hkt-wheelhouse), HKT_GPU_VENV (default /tmp/hkt-venv), HKT_GPU_RESULTS (the workflow's
# results directory; default results-gpu), HKT_GPU_SUITE (another suite than the settings' one,
# e.g. `long` for issue 50), HKT_GPU_RESUME (a workflow.tar.gz of an earlier call, carried in the
# checkout: unpacked into the results directory first, so that its cut runs resume from their
# checkpoints; every pack holds the last checkpoint of each run that has no record yet).
set -uo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
house=${HKT_GPU_WHEELHOUSE:-/tmp/hkt-wheelhouse}
venv=${HKT_GPU_VENV:-/tmp/hkt-venv}
kernel_site=$house.kernel-site
results=${HKT_GPU_RESULTS:-results-gpu}
out=${OUT:-results-gpu-check/out}
mode=${1:-} part="" dry=0
for arg in "${@:2}"; do
  case "$arg" in --dry-run) dry=1 ;; *) part=$arg ;; esac
done
usage="usage: bash scripts/gpu_check.sh stage PART | kernel PART | run [PART] | all [PART]  [--dry-run]"
case "$mode" in stage|kernel|run|all) ;; *) echo "$usage" >&2; exit 2 ;; esac

setting() {  # a key of config/bench/gpu_check.yaml (a list: one item a line)
  "$python" - "$1" <<'PY'
import sys, yaml
value = yaml.safe_load(open("config/bench/gpu_check.yaml"))[sys.argv[1]]
print("\n".join(map(str, value)) if isinstance(value, list) else value)
PY
}
join_part() {
  [ -n "$part" ] || return 0
  [ -f "$part/wheelhouse.json" ] || { echo "error: $part is not a wheelhouse part (no wheelhouse.json); make the parts with: python scripts/wheelhouse.py split DIR --max-mib N" >&2; exit 2; }
  mkdir -p "$house" && cp -p "$part"/* "$house"/
  echo "wheelhouse part $part joined into $house ($(ls "$house" | wc -l) files)"
}
if [ "$mode" = stage ]; then
  [ -n "$part" ] || { echo "$usage" >&2; exit 2; }
  join_part; exit 0
fi

suite=${HKT_GPU_SUITE:-$(setting suite)} budget=$(setting budget_s) reserve=$(setting reserve_s)
[ -f "config/suites/$suite.yaml" ] || { echo "error: no config/suites/$suite.yaml (HKT_GPU_SUITE or config/bench/gpu_check.yaml's suite)" >&2; exit 2; }
resume=${HKT_GPU_RESUME:-}
[ -z "$resume" ] || [ -f "$resume" ] || { echo "error: HKT_GPU_RESUME=$resume is not a file: carry the workflow.tar.gz of the earlier call in the checkout" >&2; exit 2; }
tile_timeout=$(setting tile_tests_timeout_s) torch_spec=$(setting torch)
mapfile -t bench_train < <(setting bench_train)
mapfile -t kernel_packages < <(setting kernel_packages)
start=$(date +%s)
mkdir -p "$out"
log=$out/gpu_check.log summary=$out/gpu_check.md steps=$out/.steps
exec > >(tee -a "$log") 2>&1
: >"$steps"
# pip sees the wheelhouse and nothing else (as scripts/bootstrap.sh does)
for var in $(compgen -e | grep '^PIP_' || true); do unset "$var"; done
export PIP_CONFIG_FILE=/dev/null PYTHONUNBUFFERED=1

step() {  # NAME CMD...: run (on a dry run: print) one step; its wall time goes to the summary.
  # always=1 before it: run it on a dry run too (the checks that need no GPU)
  local name=$1 t0 rc; shift
  echo "=== $name: $*"
  if [ "$dry" = 1 ] && [ "${always:-0}" != 1 ]; then echo "$name | dry run | -" >>"$steps"; return 0; fi
  t0=$(date +%s); "$@"; rc=$?
  echo "$name | $(( $(date +%s) - t0 )) s | rc $rc" >>"$steps"
  echo "=== $name: rc $rc after $(( $(date +%s) - t0 )) s"
  return $rc
}

echo "=== gpu_check $mode $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo '?') suite $suite"
nvidia-smi -L 2>/dev/null || echo "no nvidia-smi"
"$python" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.cuda.is_available())'
join_part

kernel() {  # the tile kernel: its CUDA tests against the materialised path, and training throughput
  local reqs=$out/.kernel-requirements.txt
  always=1 step kernel_check "$python" scripts/wheelhouse.py check "$house" --lock requirements/lock.txt \
    --only "${kernel_packages[@]}" --requirements-out "$reqs" || exit 1
  step kernel_install "$python" -m pip --isolated install -q --no-index --find-links "$house" \
    --require-hashes --no-deps --target "$kernel_site" -r "$reqs" || exit 1
  rm -f "$reqs"
  # the machine's own python with the checkout and those packages on its path: no venv yet
  PYTHONPATH=$PWD:$kernel_site step tile_tests timeout "$tile_timeout" "$python" -m pytest -q \
    -o addopts=-ra -p no:cacheprovider tests/test_tile.py -k "cuda or bf16" --junitxml="$out/tile_tests.xml"
  PYTHONPATH=$PWD:$kernel_site step bench_train "$python" -c \
    'import sys; from hkt.cli.main import main; sys.argv[0] = "hkt"; sys.exit(main())' \
    bench train "${bench_train[@]}" --out "$out"
}

workflow() {  # bootstrap from the whole wheelhouse, then the suite, stopped before the budget
  if [ "$dry" = 1 ]; then
    always=1 step check "$python" scripts/wheelhouse.py check "$house" --lock requirements/lock.txt \
      --system-site || exit 1
  else
    step bootstrap env PYTHON="$python" HKT_WHEELHOUSE="$house" HKT_SYSTEM_SITE=1 \
      HKT_TORCH="$torch_spec" HKT_VENV="$venv" bash scripts/bootstrap.sh \
      || { echo "error: the bootstrap failed; a split wheelhouse needs every part staged first, while the machine is warm" >&2; exit 1; }
  fi
  if [ -n "$resume" ]; then  # an earlier call's pack: records, histories, cut runs' checkpoints
    step resume tar xzf "$resume" || exit 1
  fi
  local left=$(( budget - reserve - ($(date +%s) - start) ))
  local args=(--cores all --keep-going --config "suite=$suite" "results_dir=$results")
  if [ "$dry" = 1 ]; then  # here the project's own .venv runs snakemake
    always=1 step workflow .venv/bin/snakemake -n --quiet rules "${args[@]}" || exit 1
    return
  fi
  PATH=$venv/bin:$PATH step workflow timeout --signal=TERM --kill-after=20 "$left" \
    "$venv/bin/snakemake" "${args[@]}"
  if [ -f "$results/summary.md" ]; then
    step publish "$venv/bin/python" scripts/publish_results.py "$results" "docs/results/$suite" --replace \
      && tar czf "$out/$suite.tar.gz" "docs/results/$suite"
  fi
  # what a reader of a cut or failed run needs too: logs, plan, sessions, tables, records,
  # histories; and what the next call resumes from (HKT_GPU_RESUME; it prepares the data again,
  # the same bytes): each run's composed config, and the last checkpoint of every run without a record
  { ls -d "$results"/{logs,plan,tables,bench} 2>/dev/null
    find "$results/runs" \( -name record.json -o -name history.csv -o -name config.yaml \) 2>/dev/null
    for run in $(find "$results/runs" -name history.csv -printf '%h\n' 2>/dev/null); do
      [ -f "$run/record.json" ] || ls "$run"/checkpoints/last.pt 2>/dev/null
    done; } >"$out/.files"
  tar czf "$out/workflow.tar.gz" -T "$out/.files"; rm -f "$out/.files"
  cp -p "$results/bench/attention.csv" "$out/attention.csv" 2>/dev/null
}

case "$mode" in
  kernel) kernel ;;
  run) workflow ;;
  all) kernel; workflow ;;
esac

{
  echo "# GPU check ($mode), $(date -u +%FT%TZ)"
  echo
  echo "| step | wall | result |"
  echo "| --- | --- | --- |"
  sed 's/^/| /; s/$/ |/' "$steps"
  echo
  echo "Total: $(( $(date +%s) - start )) s (budget of a run: $budget s)."
  sessions=$results/plan/sessions.json
  if [ "$mode" != kernel ] && [ -f "$sessions" ]; then "$python" - "$sessions" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["sessions"][-1]
took = s.get("ended", s["last_seen"]) - s["started"]
print(f"Workflow: the plan's ETA {s.get('estimate_s', 0):.0f} s, measured {took:.0f} s, ok: {s.get('ok')}.")
PY
  fi
} >"$summary"
rm -f "$steps"
cat "$summary"
