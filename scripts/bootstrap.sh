#!/usr/bin/env bash
# Create (or update) the project's virtual environment in .venv: a torch build of your
# choice first, then this package. Needs only Python >= 3.11 with pip and venv.
#
#   bash scripts/bootstrap.sh          # the package and everything the workflow needs
#   bash scripts/bootstrap.sh --dev    # plus the test tools
#
# Environment:
#   PYTHON     interpreter that creates the venv (default: python3)
#   HKT_VENV   where the venv goes (default: .venv)
#   HKT_TORCH  pip arguments for torch (default: torch==2.13.0). For example a CUDA build:
#              HKT_TORCH="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128"
#              An already-installed torch that satisfies the spec is kept.
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
venv=${HKT_VENV:-.venv}
torch_spec=${HKT_TORCH:-torch==2.13.0}
extras=""
case "${1:-}" in
  --dev) extras="[dev]" ;;
  "") ;;
  *) echo "usage: bash scripts/bootstrap.sh [--dev]" >&2; exit 2 ;;
esac

if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "error: $python is not Python >= 3.11 (set PYTHON=/path/to/python3.11)" >&2
  exit 1
fi
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check -q)
# torch first, as the user chose it; the package's own loose torch requirement then keeps it.
# shellcheck disable=SC2086  # the spec may carry pip options such as --index-url
"${pip[@]}" install $torch_spec
"${pip[@]}" install -e ".${extras}"
"$venv/bin/python" -c 'import torch, hkt; print(f"hkt {hkt.__version__} with torch {torch.__version__} in '"$venv"'")'
