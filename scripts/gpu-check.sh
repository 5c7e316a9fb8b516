#!/bin/bash
# The self-check kit: on a node with NVIDIA GPUs, checks that what gpumeter reports and bills is
# what the GPU did (docs/real-hardware.md); with --sim, the same steps on the fleet simulator.
# This wrapper finds python3 and gpumeter, then runs the gpu_check package beside it; every
# other argument is passed on (--help lists them).
#
# gpumeter: --gpumeter PATH, else bin/gpumeter of the portable bundle this script sits in
# (share/gpumeter/gpu-check/), else the repository's build/bin/gpumeter.
# python3: $GPU_CHECK_PYTHON, else python3 from PATH.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
python=${GPU_CHECK_PYTHON:-$(command -v python3 || true)}
if [[ -z $python ]]; then
  echo "gpu-check: python3 not found (set GPU_CHECK_PYTHON)" >&2
  exit 2
fi

gpumeter=""
args=()
while (($#)); do
  case $1 in
    --gpumeter) gpumeter=${2:-}; shift 2 || { echo "gpu-check: --gpumeter needs a path" >&2; exit 2; } ;;
    --gpumeter=*) gpumeter=${1#--gpumeter=}; shift ;;
    *) args+=("$1"); shift ;;
  esac
done
if [[ -z $gpumeter ]]; then
  for candidate in "$here/../../../bin/gpumeter" "$here/../build/bin/gpumeter"; do
    if [[ -x $candidate ]]; then
      gpumeter=$candidate
      break
    fi
  done
fi
if [[ -z $gpumeter ]]; then
  echo "gpu-check: gpumeter not found beside this script; give --gpumeter PATH" >&2
  exit 2
fi

export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
exec "$python" -m gpu_check --gpumeter "$gpumeter" "${args[@]+"${args[@]}"}"
