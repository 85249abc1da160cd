#!/usr/bin/env bash
# Install what is needed (first run only), including Chromium for the browser test, and run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh requirements-dev.txt
if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing Chromium for the end-to-end test (apt-get)…" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
      || echo "warning: could not install chromium" >&2
  else
    echo "warning: /usr/bin/chromium missing; install Debian's 'chromium' package for the browser test" >&2
  fi
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# Every core works (pytest-xdist); a file's tests stay on one worker, so its module-scoped fixtures (a model,
# an app server, a store) are built once. CHUNKLAB_TEST_WORKERS=0 runs in this process alone.
# With no path among the arguments pytest runs `testpaths` (pyproject.toml: tests/), else just those paths.
exec .venv/bin/python -m pytest -n "${CHUNKLAB_TEST_WORKERS:-auto}" --dist loadfile "$@"
