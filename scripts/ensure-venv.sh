# Sourced by run.sh and test.sh: make ./.venv with fitspeed and its extras installed.
# FITSPEED_EXTRAS picks the extras (unset: test; empty: none, as run.sh asks); CI adds jax, torch and more.
set -euo pipefail
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
    .venv/bin/python -m pip install --quiet --upgrade pip
fi
EXTRAS=${FITSPEED_EXTRAS-test}
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".${EXTRAS:+[$EXTRAS]}"
