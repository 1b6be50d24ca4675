#!/usr/bin/env bash
# Set up, then run the whole test suite (real training on tiny models; a few minutes).
set -euo pipefail
cd "$(dirname "$0")"
source scripts/ensure-venv.sh
.venv/bin/mypy
.venv/bin/python -m pytest -q -rs -n 2 --durations=20 "$@"
