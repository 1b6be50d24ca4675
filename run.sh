#!/usr/bin/env bash
# The main job on the built-in defaults: set up, then tune the built-in `tiny`
# workload (SQLite study in ./fitspeed.db, answer in ./best.json), then write
# the HTML report with its plots to ./fitspeed-report/. Arguments go to
# `fitspeed tune`: `bash run.sh --allow-shared-host`, `bash run.sh --trials 60`.
set -euo pipefail
cd "$(dirname "$0")"
FITSPEED_EXTRAS=${FITSPEED_EXTRAS-}  # the tool alone: the test extras are test.sh's
source scripts/ensure-venv.sh
.venv/bin/fitspeed tune tiny "$@"
.venv/bin/fitspeed report
