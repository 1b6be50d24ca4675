# Sourced by run.sh and test.sh: make ./.venv with fitspeed and its extras installed.
# FITSPEED_EXTRAS picks the extras (default: test); CI adds jax and torch.
set -euo pipefail
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
    .venv/bin/python -m pip install --quiet --upgrade pip
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[${FITSPEED_EXTRAS:-test}]"
