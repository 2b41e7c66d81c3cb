#!/usr/bin/env bash
# Run the whole test suite in the project's environment (ROS 2 overlay sourced when it was built).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
export MUJOCO_GL="${MUJOCO_GL:-egl}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
if [ -f scripts/ros_env.sh ]; then source scripts/ros_env.sh; fi
exec "$VENV/bin/python" -m pytest "$@"
