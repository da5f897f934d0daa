#!/usr/bin/env bash
# Create (or update) the project's virtual environment in .venv: the locked dependencies,
# a torch build of your choice, then this package. Needs only Python >= 3.11 with pip and venv.
#
#   bash scripts/bootstrap.sh          # the package and everything the workflow needs
#   bash scripts/bootstrap.sh --dev    # plus the test tools
#   bash scripts/bootstrap.sh --which-torch   # the torch it would install, and why; nothing else
#
# By default the dependencies come from the hashed locks requirements/lock.txt (--dev:
# requirements/lock-dev.txt), installed with pip's --require-hashes; regenerate them with
# `python scripts/lock_requirements.py` after editing pyproject.toml's dependencies. torch is not in the
# locks (they pin its own dependencies, resolved against requirements/torch.txt).
#
# Environment:
#   PYTHON       interpreter that creates the venv (default: python3)
#   HKT_VENV     where the venv goes (default: .venv)
#   HKT_TORCH    pip arguments for torch. Default: the line in requirements/torch.txt, from
#                PyPI (on Linux its CUDA build, several GB) where `nvidia-smi -L` lists a GPU, else
#                (Linux without an NVIDIA GPU) the same release's CPU build, about 2 GB less, from
#                https://download.pytorch.org/whl/cpu; one line says which and why. For example
#                a CUDA build: HKT_TORCH="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128"
#                An already-installed torch that satisfies the spec is kept. A wheelhouse
#                (HKT_WHEELHOUSE) installs the torch it holds.
#   HKT_UNLOCKED=1  install pyproject.toml's loose ranges instead of the locks (newest
#                releases that fit; what a plain `pip install -e .` would do)
#   HKT_WHEELHOUSE=DIR  install without network from a wheelhouse made by
#                `python scripts/wheelhouse.py build DIR` (docs/offline-install.md): pip --no-index,
#                the lock's hashes kept; the wheelhouse is checked first, and a missing, altered or
#                foreign file stops the install in one line before the venv is touched
#   HKT_SYSTEM_SITE=1  the venv sees the interpreter's own packages (--system-site-packages): a
#                machine image's torch, and what a wheelhouse built with --omit leaves out
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
venv=${HKT_VENV:-.venv}
extras="" lock=requirements/lock.txt which_torch=0
case "${1:-}" in
  --dev) extras="[dev]" lock=requirements/lock-dev.txt ;;
  --which-torch) which_torch=1 ;;
  "") ;;
  *) echo "usage: bash scripts/bootstrap.sh [--dev | --which-torch]" >&2; exit 2 ;;
esac

# Which torch: HKT_TORCH when set; else the pinned release, its CPU build on a Linux machine
# without an NVIDIA GPU (PyPI's Linux wheel is the CUDA one, with GBs of CUDA libraries).
torch_pin=$(grep -m1 '^torch==' requirements/torch.txt)
cpu_index=https://download.pytorch.org/whl/cpu
if [ -n "${HKT_TORCH:-}" ]; then
  torch_spec=$HKT_TORCH torch_why="HKT_TORCH"
elif [ -n "${HKT_WHEELHOUSE:-}" ]; then
  torch_spec=$torch_pin torch_why="the wheelhouse's (HKT_WHEELHOUSE)"
elif [ "$(uname -s)" != Linux ]; then
  torch_spec=$torch_pin torch_why="PyPI's build for $(uname -s)"
elif nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  torch_spec=$torch_pin torch_why="nvidia-smi lists a GPU: the CUDA build"
else
  torch_spec="$torch_pin --index-url $cpu_index"
  torch_why="no NVIDIA GPU: nvidia-smi lists none; for CUDA set HKT_TORCH, docs/install.md"
fi
echo "bootstrap: torch: $torch_spec ($torch_why)"
[ "$which_torch" = 1 ] && exit 0

if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "error: $python is not Python >= 3.11 (set PYTHON=/path/to/python3.11)" >&2
  exit 1
fi
house=${HKT_WHEELHOUSE:-} system_site=${HKT_SYSTEM_SITE:-0}
if [ -n "$house" ]; then
  [ "${HKT_UNLOCKED:-0}" = 1 ] && { echo "error: HKT_WHEELHOUSE installs the locks; unset HKT_UNLOCKED" >&2; exit 2; }
  # pip sees the wheelhouse and nothing else: no index, no configured find-links or constraints
  for var in $(compgen -e | grep '^PIP_' || true); do unset "$var"; done
  export PIP_CONFIG_FILE=/dev/null
  reqs=$(mktemp) torch_reqs=$(mktemp)
  trap 'rm -f "$reqs" "$torch_reqs"' EXIT
  # checked with the interpreter the venv is made from, before the venv is touched
  check=(scripts/wheelhouse.py check "$house" --lock "$lock" --requirements-out "$reqs")
  if [ "$system_site" = 1 ]; then check+=(--system-site); fi
  "$python" "${check[@]}" || exit 1
fi
# A venv without pip (python3 -m venv stopped half-way: Debian/Ubuntu without python3-venv) is
# made again, not reused: the next run after installing python3-venv must work as is.
if ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
  venv_args=(--clear)
  if [ "$system_site" = 1 ]; then venv_args+=(--system-site-packages); fi
  "$python" -m venv "${venv_args[@]}" "$venv" || {
    echo "error: $python -m venv failed (Debian/Ubuntu: apt install python3-venv, then run this again)" >&2
    exit 1
  }
fi
if [ "$system_site" = 1 ]; then
  # --system-site-packages reaches the base interpreter's packages only; a .pth also reaches
  # those of $python when it is itself a venv (a machine image's /opt/torch/.venv/bin/python3).
  # The venv's own packages come first on sys.path and shadow them.
  "$python" -c 'import site; print("\n".join(site.getsitepackages()))' \
    >"$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/_hkt_system_site.pth"
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check -q)
if [ -n "$house" ]; then
  offline=(--isolated install --no-index --find-links "$house")
  "${pip[@]}" "${offline[@]}" --require-hashes -r "$reqs"
  # torch: kept if one satisfying the spec is installed (HKT_SYSTEM_SITE=1: the machine's own),
  # else the wheelhouse's, pinned by its manifest's hashes
  got=$("$venv/bin/python" scripts/wheelhouse.py torch "$house" "$torch_spec" --requirements-out "$torch_reqs") || exit 1
  if [ "$got" = wheelhouse ]; then
    "${pip[@]}" "${offline[@]}" --require-hashes --no-deps -r "$torch_reqs"
  fi
  "${pip[@]}" "${offline[@]}" --no-deps -e .
  if [ "$system_site" != 1 ]; then
    "$venv/bin/python" -m pip --disable-pip-version-check check
  elif ! "$venv/bin/python" -m pip --disable-pip-version-check check >/dev/null; then
    # the interpreter's own packages may disagree among themselves; hkt's are imported below
    echo "warning: pip check finds conflicts among the packages the venv sees, the interpreter's own included (run: $venv/bin/python -m pip check)" >&2
  fi
elif [ "${HKT_UNLOCKED:-0}" = 1 ]; then
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
