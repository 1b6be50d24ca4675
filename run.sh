#!/usr/bin/env bash
# The main job on the built-in defaults: set up, measure, then compare two settings.
set -euo pipefail
cd "$(dirname "$0")"
source scripts/ensure-venv.sh
.venv/bin/fitspeed measure mlp --set steps_per_execution=32
.venv/bin/fitspeed compare mlp --a steps_per_execution=1 --b steps_per_execution=32 --pairs 5
