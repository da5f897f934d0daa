#!/usr/bin/env bash
# Create (or update) the project's virtual environment in .venv: the locked dependencies,
# a torch build of your choice, then this package. Needs only Python >= 3.11 with pip and venv.
#
#   bash scripts/bootstrap.sh          # the package and everything the workflow needs
#   bash scripts/bootstrap.sh --dev    # plus the test tools
#
# By default the dependencies come from the hashed locks requirements/lock.txt (--dev:
# requirements/lock-dev.txt), installed with pip's --require-hashes; regenerate them with
# `python scripts/lock.py` after editing pyproject.toml's dependencies. torch is not in the
# locks (they pin its own dependencies, resolved against requirements/torch.txt).
#
# Environment:
#   PYTHON       interpreter that creates the venv (default: python3)
#   HKT_VENV     where the venv goes (default: .venv)
#   HKT_TORCH    pip arguments for torch (default: the line in requirements/torch.txt). For
#                example a CUDA build:
#                HKT_TORCH="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128"
#                An already-installed torch that satisfies the spec is kept.
#   HKT_UNLOCKED=1  install pyproject.toml's loose ranges instead of the locks (newest
#                releases that fit; what a plain `pip install -e .` would do)
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
venv=${HKT_VENV:-.venv}
torch_spec=${HKT_TORCH:-$(grep -m1 '^torch==' requirements/torch.txt)}
extras="" lock=requirements/lock.txt
case "${1:-}" in
  --dev) extras="[dev]" lock=requirements/lock-dev.txt ;;
  "") ;;
  *) echo "usage: bash scripts/bootstrap.sh [--dev]" >&2; exit 2 ;;
esac

if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "error: $python is not Python >= 3.11 (set PYTHON=/path/to/python3.11)" >&2
  exit 1
fi
# A venv without pip (python3 -m venv stopped half-way: Debian/Ubuntu without python3-venv) is
# made again, not reused: the next run after installing python3-venv must work as is.
if ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
  "$python" -m venv --clear "$venv" || {
    echo "error: $python -m venv failed (Debian/Ubuntu: apt install python3-venv, then run this again)" >&2
    exit 1
  }
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check -q)
if [ "${HKT_UNLOCKED:-0}" = 1 ]; then
  # torch first, as the user chose it; the package's own loose torch requirement then keeps it.
  # shellcheck disable=SC2086  # the spec may carry pip options such as --index-url
  "${pip[@]}" install $torch_spec
  "${pip[@]}" install -e ".${extras}"
else
  # the lock first (hash-checked; it holds torch's own dependencies but not torch), then torch,
  # which finds its dependencies satisfied, then this package alone.
  "${pip[@]}" install --require-hashes -r "$lock"
  # shellcheck disable=SC2086
  "${pip[@]}" install $torch_spec
  "${pip[@]}" install --no-deps -e .
  "$venv/bin/python" -m pip --disable-pip-version-check check
fi
"$venv/bin/python" -c 'import torch, hkt; print(f"hkt {hkt.__version__} with torch {torch.__version__} in '"$venv"'")'
