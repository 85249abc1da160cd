#!/usr/bin/env bash
# Install what is needed (first run only) and start Chunk Lab on http://localhost:8501.
# Extra arguments go to `streamlit run` (e.g. --server.port 8502).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh requirements.txt
# Streamlit's server refuses uploads over server.maxUploadSize whatever the app allows, so keep
# it in step with CHUNKLAB_MAX_FILE_MB (whole MB, at least 1).
upload_mb="$(.venv/bin/python -c 'import math; from backend.config import max_file_bytes; print(max(1, math.ceil(max_file_bytes() / 1048576)))')"
exec .venv/bin/python -m streamlit run app.py --server.maxUploadSize "$upload_mb" "$@"
