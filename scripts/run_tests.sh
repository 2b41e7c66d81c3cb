#!/usr/bin/env bash
# Run the test suite in the project's environment (ROS 2 overlay sourced when it was built), after the lint and
# type gate (scripts/lint.sh) when the whole suite runs.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
export MUJOCO_GL="${MUJOCO_GL:-egl}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
if [ -f scripts/ros_env.sh ]; then source scripts/ros_env.sh; fi
# The lint and type gate runs first for the whole suite (make test, CI), or with HOMIE_LINT=1; a run of chosen
# test files skips it unless asked.
if [ "$#" -eq 0 ] || [ "${HOMIE_LINT:-0}" = 1 ]; then VENV="$VENV" scripts/lint.sh; fi
# The whole suite (make test, CI) ends with the 30 slowest tests, so the tiers' cost shows in CI's output.
if [ "$#" -eq 0 ]; then set -- --durations=30; fi
exec "$VENV/bin/python" -m pytest "$@"
