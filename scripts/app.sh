#!/usr/bin/env bash
# Install what is needed (first run only) and start Chunk Lab on http://localhost:8501.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh requirements.txt
exec .venv/bin/python -m streamlit run app.py "$@"
