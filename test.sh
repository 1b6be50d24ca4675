#!/usr/bin/env bash
# Set up, then run the whole test suite (real training on tiny models; a few minutes).
set -euo pipefail
cd "$(dirname "$0")"
source scripts/ensure-venv.sh
.venv/bin/mypy
# -n 2 --maxschedchunk 1: each worker is handed one test at a time, the slow ones first (tests/conftest.py),
# so neither sits idle while the other finishes a queue of long tests
.venv/bin/python -m pytest -q -rs -n 2 --maxschedchunk 1 --durations=20 "$@"
